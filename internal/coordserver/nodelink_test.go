package coordserver

import (
	"context"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestNodeLinkWithRealNode: one coordinator and one storage node with the
// coordinator as its endpoint: the node registers (the state machine holds
// its record, with its address, instance and storage), its heartbeats keep
// it live in the leader's view, and a heartbeat of the registered node is
// answered without a request to register again.
func TestNodeLinkWithRealNode(t *testing.T) {
	t.Parallel()
	c, err := StartCluster(ClusterOptions{
		Coordinators: 1, Nodes: 1, Dir: t.TempDir(), ClusterID: "test-cluster",
		Ports: testPorts(t), Logger: testLogger(t), Coordinator: func(_ int, c *Config) { testTimings(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	coord, node := c.Coordinator(0), c.Node(0)
	var rec *fsmpb.NodeRecord
	coord.FSM().View(func(st *fsm.State) { rec, _ = st.Node(node.ID()) })
	vols := node.Store().VolumeInfo()
	if rec == nil || rec.GrpcAddr != node.AdvertisedGRPC() || rec.InstanceId == "" || len(rec.StorageIds) != 1 || len(vols) != 1 || rec.StorageIds[0] != vols[0].StorageID {
		t.Fatalf("registered %v; node at %s with volumes %v", rec, node.AdvertisedGRPC(), vols)
	}
	eventually(t, 10*time.Second, "heartbeats within the last second", func() bool {
		for _, ns := range coord.blocks.Nodes().Nodes {
			if ns.Record.Id == node.ID() {
				return ns.Live && ns.SinceHeartbeat >= 0 && ns.SinceHeartbeat < time.Second
			}
		}
		return false
	})
	conn, err := grpc.NewClient(coord.GRPCAddr(), append(grpcflow.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := clusterpb.NewNodeLinkClient(conn).Heartbeat(ctx, &clusterpb.NodeHeartbeatRequest{NodeId: node.ID(),
		Storages: []*pb.StorageReport{{StorageId: vols[0].StorageID, Capacity: uint64(vols[0].Capacity), Used: uint64(vols[0].Used), Free: uint64(vols[0].Available)}}})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	for _, cmd := range resp.GetCommands() {
		if cmd.GetReRegister() != nil {
			t.Fatalf("heartbeat of a registered node answered %v", cmd)
		}
	}
}
