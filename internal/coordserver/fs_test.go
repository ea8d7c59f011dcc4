package coordserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fsEnv is a cluster with storage nodes played by the test.
type fsEnv struct {
	t      *testing.T
	tc     *testCluster
	leader int
	ns     pb.NamespaceClient
	nl     clusterpb.NodeLinkClient
	ctx    context.Context
}

func newFSEnv(t *testing.T, opts ...clusterOpt) *fsEnv {
	t.Helper()
	tc := newTestCluster(t, 3, opts...)
	e := &fsEnv{t: t, tc: tc, ctx: context.Background()}
	e.connect(tc.waitLeader())
	return e
}

// connect dials member i (a follower forwards) and waits for log format 3.
func (e *fsEnv) connect(i int) {
	e.t.Helper()
	e.leader = i
	s := e.tc.server(i)
	eventually(e.t, 20*time.Second, "log format 3", func() bool { return s.logFormat() >= fsm.NamespaceFormat })
	conn, err := grpc.NewClient(e.tc.cfgs[i].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	e.ns, e.nl = pb.NewNamespaceClient(conn), clusterpb.NewNodeLinkClient(conn)
	eventually(e.t, 20*time.Second, "namespace service ready", func() bool {
		_, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/"})
		return err == nil || status.Code(err) == codes.NotFound
	})
}

func nodeID(i int) string { return fmt.Sprintf("n%d", i) }

// registerNodes registers, heartbeats and fully reports nodes 1..n (node
// i has i*100 free bytes).
func (e *fsEnv) registerNodes(n int) {
	e.t.Helper()
	for i := 1; i <= n; i++ {
		st := []*pb.StorageReport{{StorageId: "s1", Capacity: 1000, Free: uint64(i * 100)}}
		_, err := e.nl.Register(e.ctx, &clusterpb.NodeRegisterRequest{Node: &fsmpb.NodeRecord{
			Id: nodeID(i), GrpcAddr: fmt.Sprintf("127.0.0.1:%d", 9000+i), StorageIds: []string{"s1"}, InstanceId: "inst-" + nodeID(i),
		}, Storages: st})
		if err != nil {
			e.t.Fatalf("register %s: %v", nodeID(i), err)
		}
		hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: nodeID(i), Storages: st})
		if err != nil {
			e.t.Fatalf("heartbeat %s: %v", nodeID(i), err)
		}
		if !hasFullReportCmd(hb.Commands) {
			e.t.Fatalf("heartbeat of a node without a full report: no SendFullReport in %v", hb.Commands)
		}
		if _, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: nodeID(i), Storages: []*pb.StorageBlockReport{{StorageId: "s1"}}}); err != nil {
			e.t.Fatalf("block report %s: %v", nodeID(i), err)
		}
	}
}

func hasFullReportCmd(cmds []*clusterpb.NodeCommand) bool {
	for _, c := range cmds {
		if c.GetSendFullReport() != nil {
			return true
		}
	}
	return false
}

func recoverCmds(cmds []*clusterpb.NodeCommand) []*clusterpb.RecoverBlockCommand {
	var out []*clusterpb.RecoverBlockCommand
	for _, c := range cmds {
		if r := c.GetRecoverBlock(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

func (e *fsEnv) report(node string, b *pb.BlockRecord, n int64, state pb.ReplicaState) {
	e.t.Helper()
	_, err := e.nl.IncrementalReport(e.ctx, &clusterpb.NodeIncrementalReportRequest{NodeId: node, Changes: []*clusterpb.IncrementalChange{{
		Change: clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVED, StorageId: "s1",
		Replica: &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: n, State: state},
	}}})
	if err != nil {
		e.t.Fatalf("report %s: %v", node, err)
	}
}

func (e *fsEnv) stat(path string) *pb.StatResponse {
	e.t.Helper()
	st, err := e.ns.Stat(e.ctx, &pb.StatRequest{Path: path})
	if err != nil {
		e.t.Fatalf("stat %s: %v", path, err)
	}
	return st
}

// nextSeq is the leader's next journal seq (every accepted namespace op
// writes an audit event).
func (e *fsEnv) nextSeq() uint64 {
	var seq uint64
	e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) { seq = st.NextSeq() })
	return seq
}

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("%s: got %v (%v), want %v", what, st.Code(), err, code)
	}
	if reason == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.Reason != reason {
				t.Fatalf("%s: reason %q, want %q", what, info.Reason, reason)
			}
			return
		}
	}
	t.Fatalf("%s: no ErrorInfo in %v", what, err)
}

func TestFSCreateAddBlockCompleteRoundTrip(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	// Talk to a follower: every call is forwarded to the leader.
	e.connect(e.tc.followers(e.leader)[0])
	e.leader = e.tc.waitLeader()
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/a/f", Replication: 3, BlockSize: 1 << 20, ClientName: "w1",
		Session: &pb.FsSession{ClientId: "c1", RequestSeq: 1}}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/a/f", ClientName: "w1", Session: &pb.FsSession{ClientId: "c1", RequestSeq: 2}})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	// Distinct live nodes, most free space first.
	if got := strings.Join(b.ExpectedLocations, ","); got != "n3,n2,n1" {
		t.Fatalf("targets %s, want n3,n2,n1", got)
	}
	if len(ab.Locations) != 3 || ab.Locations[0].GrpcAddr != "127.0.0.1:9003" {
		t.Fatalf("locations %v", ab.Locations)
	}
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	}
	c, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/a/f", ClientName: "w1", Last: &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 100},
		Session: &pb.FsSession{ClientId: "c1", RequestSeq: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Result.Closed || c.Result.File.UnderConstruction || c.Result.File.Length != 100 {
		t.Fatalf("complete: %v", c.Result)
	}
	st := e.stat("/a/f")
	if !st.FromLeader || len(st.Blocks) != 1 || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE || len(st.Blocks[0].ReportedLocations) != 3 {
		t.Fatalf("stat: %v", st)
	}
	for _, r := range st.Blocks[0].ReportedLocations {
		if r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != b.Gs || r.NumBytes != 100 {
			t.Fatalf("reported location %v", r)
		}
	}
	ls, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Entries) != 1 || ls.Entries[0].Path != "/a/f" || ls.Entries[0].File.Length != 100 || ls.More {
		t.Fatalf("list: %v", ls)
	}
	root, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/"})
	if err != nil || len(root.Entries) != 1 || !root.Entries[0].Dir {
		t.Fatalf("list /: %v %v", root, err)
	}
	if locs := st.Blocks[0].Locations; len(locs) != 3 || locs[0].GrpcAddr == "" {
		t.Fatalf("stat: node addresses %v", locs)
	}
	nodes, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
	if err != nil || len(nodes.Nodes) != 3 {
		t.Fatalf("list nodes: %v %v", nodes, err)
	}
	for _, n := range nodes.Nodes {
		if !n.Live || n.LastHeartbeatMs < 0 || !n.FullReport || n.Replicas != 1 || len(n.Storages) == 0 {
			t.Fatalf("node %s: %v", n.Node.GetId(), n)
		}
	}
	// A retried complete is answered from the session.
	c2, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/a/f", ClientName: "w1", Last: &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 100},
		Session: &pb.FsSession{ClientId: "c1", RequestSeq: 3}})
	if err != nil || c2.Seq != c.Seq {
		t.Fatalf("retried complete: %v %v", c2, err)
	}
	e.tc.waitConverged()
}

func TestFSBadInput(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(2)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/f", Replication: 2, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/f", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	before, seq := e.stat("/f"), e.nextSeq()
	long := "/" + strings.Repeat("a", 5000)
	cases := []struct {
		what   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"empty path", func() error {
			_, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "", Replication: 1, BlockSize: 1 << 20, ClientName: "w2"})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
		{"relative path", func() error {
			_, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "rel/x", Replication: 1, BlockSize: 1 << 20, ClientName: "w2"})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
		{"oversize path", func() error {
			_, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: long, Replication: 1, BlockSize: 1 << 20, ClientName: "w2"})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
		{"unclean path", func() error {
			_, err := e.ns.Stat(e.ctx, &pb.StatRequest{Path: "/a/../f"})
			return err
		}, codes.InvalidArgument, "INVALID_PATH"},
		{"file exists", func() error {
			_, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/f", Replication: 1, BlockSize: 1 << 20, ClientName: "w1"})
			return err
		}, codes.AlreadyExists, "FILE_EXISTS"},
		{"non-holder add block", func() error {
			_, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/f", ClientName: "w2", Previous: &pb.BlockRef{Id: b.Id, Gs: b.Gs}})
			return err
		}, codes.FailedPrecondition, ""},
		{"non-holder complete", func() error {
			_, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/f", ClientName: "w2", Last: &pb.BlockRef{Id: b.Id, Gs: b.Gs}})
			return err
		}, codes.FailedPrecondition, ""},
		{"stale gs in update pipeline", func() error {
			_, err := e.ns.UpdatePipeline(e.ctx, &pb.UpdatePipelineRequest{Path: "/f", ClientName: "w1", BlockId: b.Id,
				OldGs: b.Gs, NewGs: b.Gs, NewLength: 0, NewNodes: b.ExpectedLocations})
			return err
		}, codes.InvalidArgument, ""},
		{"missing file", func() error {
			_, err := e.ns.Stat(e.ctx, &pb.StatRequest{Path: "/nope"})
			return err
		}, codes.NotFound, "FILE_NOT_FOUND"},
		{"too many excluded nodes", func() error {
			ex := make([]string, 17)
			for i := range ex {
				ex[i] = fmt.Sprintf("x%d", i)
			}
			_, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/f", ClientName: "w1", ExcludedNodes: ex})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
		{"list limit", func() error {
			_, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/", Limit: 10001})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
		{"unregistered heartbeat", func() error {
			_, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: "ghost"})
			return err
		}, codes.FailedPrecondition, ReasonNodeNotRegistered},
		{"unregistered block report", func() error {
			_, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: "ghost"})
			return err
		}, codes.FailedPrecondition, ReasonNodeNotRegistered},
		{"unregistered incremental report", func() error {
			_, err := e.nl.IncrementalReport(e.ctx, &clusterpb.NodeIncrementalReportRequest{NodeId: "ghost", Changes: []*clusterpb.IncrementalChange{{
				Change: clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVED, Replica: &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, State: pb.ReplicaState_REPLICA_STATE_RBW}}}})
			return err
		}, codes.FailedPrecondition, ReasonNodeNotRegistered},
		{"node id held by another node", func() error {
			_, err := e.nl.Register(e.ctx, &clusterpb.NodeRegisterRequest{Node: &fsmpb.NodeRecord{Id: "n1", GrpcAddr: "127.0.0.1:9999", StorageIds: []string{"s1"}, InstanceId: "impostor"}})
			return err
		}, codes.FailedPrecondition, "NODE_ID_HELD"},
	}
	for _, c := range cases {
		wantCode(t, c.what, c.call(), c.code, c.reason)
	}
	if err := status.Convert(e.callHeld()); !strings.Contains(err.Message(), "node id held by another node") {
		t.Fatalf("held message: %q", err.Message())
	}
	if after := e.stat("/f"); !proto.Equal(before, after) {
		t.Fatalf("stat changed:\n%v\n%v", before, after)
	}
	if got := e.nextSeq(); got != seq {
		t.Fatalf("refused ops wrote audit events: next seq %d, was %d", got, seq)
	}
}

func (e *fsEnv) callHeld() error {
	_, err := e.nl.Register(e.ctx, &clusterpb.NodeRegisterRequest{Node: &fsmpb.NodeRecord{Id: "n1", GrpcAddr: "127.0.0.1:9999", InstanceId: "impostor"}})
	return err
}

func shortLeases(i int, c *Config) {
	c.FS.LeaseSoftLimit = time.Second
	c.FS.LeaseHardLimit = 2 * time.Second
	c.FS.RecoveryTimeout = time.Minute
	c.FS.LeaseCheckInterval = 200 * time.Millisecond
}

// startAbandonedWrite creates /w with one block on 3 nodes (RBW replicas
// reported) whose writer then stops renewing.
func (e *fsEnv) startAbandonedWrite() *pb.BlockRecord {
	e.t.Helper()
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/w", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		e.t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/w", ClientName: "w1"})
	if err != nil {
		e.t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
	}
	return b
}

// waitRecoverCmd heartbeats every node until one gets RecoverBlock for
// block id; it returns the node and the command.
func (e *fsEnv) waitRecoverCmd(id, after uint64) (string, *clusterpb.RecoverBlockCommand) {
	e.t.Helper()
	var node string
	var cmd *clusterpb.RecoverBlockCommand
	eventually(e.t, 20*time.Second, "a RecoverBlock command", func() bool {
		for i := 1; i <= 3; i++ {
			hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: nodeID(i), Storages: []*pb.StorageReport{{StorageId: "s1", Free: uint64(i * 100)}}})
			if err != nil {
				continue
			}
			for _, r := range recoverCmds(hb.Commands) {
				if r.BlockId == id && r.RecoveryId > after {
					node, cmd = nodeID(i), r
				}
			}
		}
		return cmd != nil
	})
	return node, cmd
}

func TestFSLeaseHardLimitStartsRecovery(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, shortLeases, func(i int, c *Config) { c.FS.RecoveryTimeout = 2 * time.Second })
	b := e.startAbandonedWrite()
	primary, cmd := e.waitRecoverCmd(b.Id, 0)
	st := e.stat("/w")
	blk := st.Blocks[0]
	if blk.State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || blk.Recovery.GetRecoveryId() < cmd.RecoveryId {
		t.Fatalf("block %v, command %v from %s", blk, cmd, primary)
	}
	if st.File.LeaseHolder != fsm.RecoveryLeaseHolder {
		t.Fatalf("lease holder %q", st.File.LeaseHolder)
	}
	if cmd.Gs != b.Gs || len(cmd.Locations) != 3 {
		t.Fatalf("command %v", cmd)
	}
	// The writer is fenced.
	_, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/w", ClientName: "w1", Last: &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 10}})
	if status.Code(err) == codes.OK {
		t.Fatal("the old writer completed a file under recovery")
	}
	// A recover-lease while the recovery runs answers false.
	rl, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/w", ClientName: "w2"})
	if err != nil || rl.Closed {
		t.Fatalf("recover lease during recovery: %v %v", rl, err)
	}
	// Past its deadline the recovery is re-driven with a new id.
	_, cmd2 := e.waitRecoverCmd(b.Id, cmd.RecoveryId)
	if cmd2.RecoveryId <= cmd.RecoveryId {
		t.Fatalf("re-driven recovery id %d after %d", cmd2.RecoveryId, cmd.RecoveryId)
	}
	seq := e.nextSeq()
	// The superseded recovery id is refused, changing nothing.
	_, err = e.nl.CommitBlockSynchronization(e.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: primary, BlockId: b.Id, RecoveryId: cmd.RecoveryId,
		NewGs: cmd.RecoveryId, NewLength: 10, CloseFile: true, Targets: b.ExpectedLocations, OldGs: b.Gs})
	wantCode(t, "stale recovery id", err, codes.Aborted, "")
	if e.nextSeq() != seq {
		t.Fatal("refused commit wrote an audit event")
	}
	// The current one commits and closes the file (retried if yet
	// another re-drive overtook it).
	var rid uint64
	eventually(t, 20*time.Second, "the recovery commit", func() bool {
		cur := e.stat("/w").Blocks[0]
		rid = cur.Recovery.GetRecoveryId()
		res, err := e.nl.CommitBlockSynchronization(e.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: cur.Recovery.GetPrimary(), BlockId: b.Id, RecoveryId: rid,
			NewGs: rid, NewLength: 10, CloseFile: true, Targets: b.ExpectedLocations, OldGs: cur.Gs})
		if status.Code(err) == codes.Aborted {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if !res.Result.Closed {
			t.Fatalf("commit: %v", res.Result)
		}
		return true
	})
	if st := e.stat("/w"); st.File.UnderConstruction || st.Blocks[0].Gs != rid || st.Blocks[0].NumBytes != 10 {
		t.Fatalf("after commit: %v", st)
	}
	rl, err = e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/w", ClientName: "w2"})
	if err != nil || !rl.Closed {
		t.Fatalf("recover lease of a closed file: %v %v", rl, err)
	}
}

// TestFSSafeModeHoldsLeaseMonitor: design §R9.12 — a new leader releases
// no lease and starts no recovery until the nodes have sent it their full
// reports, even for a lease past its hard limit.
func TestFSSafeModeHoldsLeaseMonitor(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, shortLeases, func(_ int, c *Config) { c.FS.LeaseHardLimit = 3 * time.Second })
	b := e.startAbandonedWrite()
	old := e.leader
	e.tc.kill(old)
	e.connect(e.tc.waitLeader())
	// The writer is gone: the hard limit (3 s, counted from the new term)
	// passes, but no node has reported to the new leader.
	stays(t, 5*time.Second, "no release in safe mode", func() bool {
		return e.stat("/w").Blocks[0].State == pb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION
	})
	for i := 1; i <= 3; i++ {
		reps := []*pb.ReportedReplica{{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}}
		if _, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: nodeID(i), Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}}); err != nil {
			t.Fatalf("full report of %s: %v", nodeID(i), err)
		}
		e.fakeHeartbeat(nodeID(i))
	}
	eventually(t, 20*time.Second, "the recovery once out of safe mode", func() bool {
		return e.stat("/w").Blocks[0].State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY
	})
}

func TestFSLeaderChangeResumesRecovery(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, shortLeases)
	b := e.startAbandonedWrite()
	primary, cmd := e.waitRecoverCmd(b.Id, 0)
	old := e.leader
	e.tc.kill(old)
	e.connect(e.tc.waitLeader())
	if e.leader == old {
		t.Fatal("same leader")
	}
	var got *clusterpb.RecoverBlockCommand
	eventually(t, 20*time.Second, "the new leader's RecoverBlock", func() bool {
		hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: primary, Storages: []*pb.StorageReport{{StorageId: "s1", Free: 100}}})
		if err != nil {
			return false
		}
		if !hasFullReportCmd(hb.Commands) {
			t.Fatalf("a new leader must ask for a full report: %v", hb.Commands)
		}
		if !hb.SafeMode {
			t.Fatal("a new leader starts in safe mode")
		}
		for _, r := range recoverCmds(hb.Commands) {
			if r.BlockId == b.Id {
				got = r
			}
		}
		return got != nil
	})
	if got.RecoveryId != cmd.RecoveryId {
		t.Fatalf("new leader's recovery id %d, was %d", got.RecoveryId, cmd.RecoveryId)
	}
	// Design §R9.12: in safe mode the commit is refused (Unavailable,
	// retryable by the primary) and changes nothing.
	commit := &clusterpb.CommitBlockSyncRequest{NodeId: primary, BlockId: b.Id, RecoveryId: got.RecoveryId,
		NewGs: got.RecoveryId, NewLength: 10, CloseFile: true, Targets: b.ExpectedLocations, OldGs: b.Gs}
	seq := e.nextSeq()
	_, err := e.nl.CommitBlockSynchronization(e.ctx, commit)
	wantCode(t, "commit in safe mode", err, codes.Unavailable, ReasonSafeMode)
	if st := e.stat("/w").Blocks[0]; st.State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || e.nextSeq() != seq {
		t.Fatalf("a commit refused in safe mode changed the block (%v) or wrote an event", st)
	}
	// Every node's full report ends safe mode; the same commit closes the file.
	for i := 1; i <= 3; i++ {
		reps := []*pb.ReportedReplica{{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}}
		if _, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: nodeID(i), Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}}); err != nil {
			t.Fatalf("full report of %s: %v", nodeID(i), err)
		}
	}
	eventually(t, 20*time.Second, "the commit after safe mode", func() bool {
		res, err := e.nl.CommitBlockSynchronization(e.ctx, commit)
		if status.Code(err) == codes.Unavailable {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return res.Result.GetFile().GetUnderConstruction() == false
	})
}
