package nodeserver

import (
	"bytes"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoveryNodes starts three nodes, the first with a link to fc, and
// writes RBW replicas of blk id at gs with the given lengths (prefixes of
// one data), returning the nodes, the data and the command's locations.
func recoveryNodes(t *testing.T, fc *fakeCoord, id, gs uint64, lengths [3]int) ([]*testNode, []byte, []*pb.NodeLocation) {
	t.Helper()
	nodes := []*testNode{
		startNode(t, "n1", withCoord(10*time.Minute, fc.addr)), startNode(t, "n2"), startNode(t, "n3"),
	}
	data := randomBytes(slices.Max(lengths[:]), id)
	var locs []*pb.NodeLocation
	for i, n := range nodes {
		writeReplica(t, n, id, gs, data[:lengths[i]], false)
		locs = append(locs, &pb.NodeLocation{NodeId: n.srv.ID(), GrpcAddr: n.addr})
	}
	return nodes, data, locs
}

// RBW replicas of different lengths on three nodes: the primary truncates
// all to the shortest, GS := recovery id, FINALIZED, and commits that.
func TestPrimaryRecoversRBW(t *testing.T) {
	ctx := testCtx(t)
	fc := startFakeCoord(t)
	const id, gs, rid = 10, 100, 105
	nodes, data, locs := recoveryNodes(t, fc, id, gs, [3]int{70_000, 30_001, 90_000})
	cmd := &clusterpb.RecoverBlockCommand{BlockId: id, Gs: gs, NumBytes: 90_000, RecoveryId: rid, Locations: locs, Path: "/f"}
	if err := nodes[0].srv.link.recoverBlock(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	const want = 30_001
	for _, n := range nodes {
		ri := getReplica(t, n, id)
		if ri.State != replica.StateFinalized || ri.GS != rid || ri.NumBytes != want {
			t.Fatalf("%s: %v gs %d len %d, want FINALIZED gs %d len %d", n.srv.ID(), ri.State, ri.GS, ri.NumBytes, rid, want)
		}
		if got, _ := readAll(t, ctx, n, id, rid, 0, 0); !bytes.Equal(got, data[:want]) {
			t.Fatalf("%s: bytes differ after recovery", n.srv.ID())
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.commits) != 1 {
		t.Fatalf("%d commits", len(fc.commits))
	}
	c := fc.commits[0]
	if c.GetNodeId() != "n1" || c.GetBlockId() != id || c.GetRecoveryId() != rid || c.GetNewGs() != rid || c.GetOldGs() != gs ||
		c.GetNewLength() != want || !c.GetCloseFile() || c.GetDeleteBlock() || !slices.Equal(c.GetTargets(), []string{"n1", "n2", "n3"}) {
		t.Fatalf("commit %v", c)
	}
}

// The same recovery sent by a heartbeat reply runs (once, though sent
// twice) and commits.
func TestPrimaryFromHeartbeatCommand(t *testing.T) {
	fc := startFakeCoord(t)
	const id, gs, rid = 11, 100, 107
	// A fast heartbeat for this test: restart n1's link settings.
	nodes := []*testNode{startNode(t, "n1", withCoord(50*time.Millisecond, fc.addr)), startNode(t, "n2")}
	data := randomBytes(5000, 9)
	var locs []*pb.NodeLocation
	for i, n := range nodes {
		writeReplica(t, n, id, gs, data[:4000+i*1000], false)
		locs = append(locs, &pb.NodeLocation{NodeId: n.srv.ID(), GrpcAddr: n.addr})
	}
	cmd := &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_RecoverBlock{RecoverBlock: &clusterpb.RecoverBlockCommand{BlockId: id, Gs: gs, NumBytes: 5000, RecoveryId: rid, Locations: locs}}}
	fc.queue(cmd, cmd)
	waitFor(t, "commit", func() bool { _, _, _, _, c := fc.counts(); return c >= 1 })
	for _, n := range nodes {
		waitFor(t, "finalized", func() bool {
			ri, err := n.srv.Store().GetReplica(testPool, id)
			return err == nil && ri.State == replica.StateFinalized && ri.GS == rid && ri.NumBytes == 4000
		})
	}
	waitFor(t, "task done", func() bool { l := nodes[0].srv.link; l.mu.Lock(); defer l.mu.Unlock(); return len(l.running) == 0 })
	if _, _, _, _, c := fc.counts(); c != 1 {
		t.Fatalf("%d commits, want 1", c)
	}
}

// A stale recovery id: the coordinator refuses the commit with Aborted and
// the worker stops at once.
func TestPrimaryStaleCommitStops(t *testing.T) {
	ctx := testCtx(t)
	fc := startFakeCoord(t)
	fc.commitErr = status.Error(codes.Aborted, "recovery id 105 is not the current one")
	const id, gs, rid = 12, 100, 105
	nodes, _, locs := recoveryNodes(t, fc, id, gs, [3]int{1000, 1000, 1000})
	err := nodes[0].srv.link.recoverBlock(ctx, &clusterpb.RecoverBlockCommand{BlockId: id, Gs: gs, NumBytes: 1000, RecoveryId: rid, Locations: locs})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("got %v, want Aborted", err)
	}
	if _, _, _, _, c := fc.counts(); c != 1 {
		t.Fatalf("%d commit calls, want 1", c)
	}
}

// Unavailable (no leader, a leader in safe mode) is retried, within
// commitDeadline and linkCommitRounds.
func TestPrimaryCommitRetriesBounded(t *testing.T) {
	ctx := testCtx(t)
	fc := startFakeCoord(t)
	unavailable := status.Error(codes.Unavailable, "not the leader")
	fc.commitErrs = []error{unavailable, unavailable}
	const id, gs = 13, 100
	nodes, _, locs := recoveryNodes(t, fc, id, gs, [3]int{1000, 2000, 3000})
	if err := nodes[0].srv.link.recoverBlock(ctx, &clusterpb.RecoverBlockCommand{BlockId: id, Gs: gs, NumBytes: 3000, RecoveryId: 105, Locations: locs}); err != nil {
		t.Fatalf("after two Unavailable: %v", err)
	}
	if _, _, _, _, c := fc.counts(); c != 3 {
		t.Fatalf("%d commit calls, want 3", c)
	}
	// Always unavailable: the worker gives up (here after the 5 s minimum
	// window: the command carries no deadline).
	fc.mu.Lock()
	fc.commitErr = unavailable
	fc.mu.Unlock()
	for _, n := range nodes {
		writeReplica(t, n, id+1, gs, randomBytes(1000, 1), false)
	}
	err := nodes[0].srv.link.recoverBlock(ctx, &clusterpb.RecoverBlockCommand{BlockId: id + 1, Gs: gs, NumBytes: 1000, RecoveryId: 106, Locations: locs})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	if _, _, _, _, c := fc.counts(); c-3 < 2 || c-3 > linkCommitRounds {
		t.Fatalf("%d commit calls, want 2..%d", c-3, linkCommitRounds)
	}
}

func TestCommitDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) *clusterpb.RecoverBlockCommand {
		return &clusterpb.RecoverBlockCommand{DeadlineUnixNanos: now.Add(d).UnixNano()}
	}
	for _, c := range []struct {
		name string
		cmd  *clusterpb.RecoverBlockCommand
		want time.Time
	}{
		{"no deadline: the minimum window", &clusterpb.RecoverBlockCommand{}, now.Add(linkCommitMinWindow)},
		{"deadline passed: the minimum window", at(-time.Second), now.Add(linkCommitMinWindow)},
		{"deadline nearer than the window", at(linkCommitMinWindow / 2), now.Add(linkCommitMinWindow)},
		{"deadline later: retried until it", at(80 * time.Second), now.Add(80 * time.Second)},
	} {
		if got := commitDeadline(c.cmd, now); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A newer recovery owns a replica: the plan is preempted, nothing is
// committed. No replica anywhere: a delete commit.
func TestPrimaryPreemptedAndDelete(t *testing.T) {
	ctx := testCtx(t)
	fc := startFakeCoord(t)
	const id, gs = 14, 100
	nodes, _, locs := recoveryNodes(t, fc, id, gs, [3]int{1000, 1000, 1000})
	if _, err := nodes[1].srv.Store().InitReplicaRecovery(ctx, testPool, replica.Block{ID: id, GS: gs, NumBytes: 1000}, 200); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].srv.link.recoverBlock(ctx, &clusterpb.RecoverBlockCommand{BlockId: id, Gs: gs, NumBytes: 1000, RecoveryId: 150, Locations: locs}); err == nil {
		t.Fatal("preempted recovery succeeded")
	}
	if _, _, _, _, c := fc.counts(); c != 0 {
		t.Fatalf("%d commits after a preempted plan", c)
	}
	if err := nodes[0].srv.link.recoverBlock(ctx, &clusterpb.RecoverBlockCommand{BlockId: 99, Gs: gs, NumBytes: 0, RecoveryId: 150, Locations: locs}); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.commits) != 1 || !fc.commits[0].GetDeleteBlock() || fc.commits[0].GetNewLength() != 0 || len(fc.commits[0].GetTargets()) != 0 {
		t.Fatalf("commits %v, want one delete", fc.commits)
	}
}
