package nodeserver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/testports"
)

// One coordinator and one node with the coordinator as its endpoint: the
// node registers (the FSM holds its record) and keeps heartbeating.
func TestCoordLinkWithCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator")
	}
	cc := coordserver.DefaultConfig()
	cc.ID, cc.ClusterID, cc.DataDir = "c1", "test-cluster", filepath.Join(t.TempDir(), "c1")
	cc.RaftAddr, cc.GRPCAddr, cc.GossipAddr, cc.HTTPAddr = testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true)
	cc.BootstrapExpect = 1
	cc.WALPrefill = false
	cc.Raft.HeartbeatTimeout, cc.Raft.ElectionTimeout, cc.Raft.LeaderLeaseTimeout = 250*time.Millisecond, 500*time.Millisecond, 125*time.Millisecond
	cc.Logger = testLogger()
	coord, err := coordserver.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })

	n := startNode(t, "n1", withCoord(100*time.Millisecond, coord.GRPCAddr()))
	writeReplica(t, n, 1, 1001, randomBytes(2000, 5), true)
	var rec *fsmpb.NodeRecord
	waitFor(t, "n1 in the coordinator's FSM", func() bool {
		coord.FSM().View(func(st *fsm.State) { rec, _ = st.Node("n1") })
		return rec != nil
	})
	if rec.GetGrpcAddr() != n.addr || rec.GetInstanceId() != n.srv.link.instanceID || len(rec.GetStorageIds()) != 1 {
		t.Fatalf("registered %v", rec)
	}
	// The link's heartbeats are accepted, and the coordinator asks for no
	// new registration.
	waitFor(t, "accepted heartbeats", func() bool { return n.srv.link.heartbeatsOK.Load() >= 3 })
	resp, err := clusterpb.NewNodeLinkClient(n.srv.link.conns[0]).Heartbeat(testCtx(t), &clusterpb.NodeHeartbeatRequest{NodeId: "n1", Storages: storageReports(n.srv.Store().VolumeInfo())})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	for _, c := range resp.GetCommands() {
		if c.GetReRegister() != nil {
			t.Fatalf("heartbeat answered %v", c)
		}
	}
}
