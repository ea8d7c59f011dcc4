package client

import (
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

func TestStateNames(t *testing.T) {
	t.Parallel()
	for v, name := range pb.BlockState_name {
		if got, want := toBlockState(pb.BlockState(v)).String(), strings.TrimPrefix(name, "BLOCK_STATE_"); got != want {
			t.Errorf("block state %s: %s", name, got)
		}
	}
	for v, name := range pb.ReplicaState_name {
		if got, want := toReplicaState(pb.ReplicaState(v)).String(), strings.TrimPrefix(name, "REPLICA_STATE_"); got != want {
			t.Errorf("replica state %s: %s", name, got)
		}
	}
	if got := BlockState(99).String(); got != "BlockState(99)" {
		t.Errorf("unknown block state: %s", got)
	}
	if got := ReplicaState(-1).String(); got != "ReplicaState(-1)" {
		t.Errorf("unknown replica state: %s", got)
	}
}

func TestStatusAndNodesConversion(t *testing.T) {
	t.Parallel()
	st := toClusterStatus(&pb.StatusResponse{ClusterId: "lb", LeaderId: "c1", LeaderGrpcAddr: "h:1", Term: 3, CommitIndex: 9, AppliedIndex: 8,
		ResponderId: "c2", Warnings: []string{"w"}, Members: []*pb.MemberStatus{
			{Id: "c1", RaftAddr: "h:2", GrpcAddr: "h:1", Suffrage: "voter", Healthy: true, Leader: true, AppliedIndex: 8,
				StartupReplay: &pb.StartupReplay{SnapshotSeconds: 0.5, Seconds: 2.25, LogWaitSeconds: 1, CaughtUp: true}},
			{Id: "c2", LastContactMs: -1, Error: "down"},
		}})
	if st.ClusterID != "lb" || st.LeaderID != "c1" || st.LeaderGRPCAddr != "h:1" || st.ResponderID != "c2" || len(st.Members) != 2 {
		t.Fatalf("status: %+v", st)
	}
	m := st.Members[0]
	if m.ID != "c1" || m.GRPCAddr != "h:1" || !m.Leader || m.StartupReplay == nil ||
		m.StartupReplay.SnapshotTime != 500*time.Millisecond || m.StartupReplay.Time != 2250*time.Millisecond || m.StartupReplay.LogWait != time.Second {
		t.Fatalf("member: %+v %+v", m, m.StartupReplay)
	}
	if m := st.Members[1]; m.LastContact >= 0 || m.LastContact.Milliseconds() != -1 || m.StartupReplay != nil {
		t.Fatalf("a member that did not answer: %+v", m)
	}
	nl := toNodeList(&pb.ListNodesResponse{SafeMode: true, MissingBlocks: 2, Nodes: []*pb.StorageNodeStatus{{
		Node: &pb.NodeRecord{Id: "n1", GrpcAddr: "h:3", InstanceId: "i", RegisteredUnixNanos: 5e9},
		Live: true, LastHeartbeatMs: 1500, Storages: []*pb.StorageReport{{StorageId: "s1", Capacity: 10, Free: 4}},
	}, {Node: &pb.NodeRecord{Id: "n2"}, LastHeartbeatMs: -1}}})
	if !nl.SafeMode || nl.MissingBlocks != 2 || len(nl.Nodes) != 2 {
		t.Fatalf("nodes: %+v", nl)
	}
	if n := nl.Nodes[0]; n.ID != "n1" || n.GRPCAddr != "h:3" || n.InstanceID != "i" || !n.Registered.Equal(time.Unix(5, 0)) || !n.Updated.IsZero() ||
		n.LastHeartbeat != 1500*time.Millisecond || len(n.Storages) != 1 || n.Storages[0].Free != 4 {
		t.Fatalf("node: %+v", n)
	}
	if n := nl.Nodes[1]; n.LastHeartbeat >= 0 {
		t.Fatalf("a node not heard from: %+v", n)
	}
}
