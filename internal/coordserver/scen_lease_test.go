package coordserver

import (
	"bytes"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestScenario01ClientDiesBeforeData — §R7 scenario 1: "Client dies before
// any DN got data. Last block UC, no expected locations known, NN length
// 0. Hard limit expires → last block removed, file closed, file length =
// sum of earlier blocks; no recovery command sent."
//
// In this design AddBlock always records the pipeline as the block's
// expected locations (FSM state, design §R9.9), so a writer dying right after
// AddBlock leaves a block WITH locations: its recovery finds no replica
// anywhere and deletes the block ("locations-no-replica", real nodes).
// The rule-4b state itself, no expected location at all, is reachable only
// through a close_file=false commit naming unregistered targets; from there
// the hard limit removes the block with no recovery ("no-locations", faked
// node reports).
func TestScenario01ClientDiesBeforeData(t *testing.T) {
	t.Parallel()
	t.Run("locations-no-replica", func(t *testing.T) {
		s := startScen(t, 3, nil)
		b1, locs := s.openFile("/s01", 3)
		data := randData(1, 70_000)
		s.writeBlock(b1, locs, data, true)
		s.waitReported("/s01", b1.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b1.Gs, int64(len(data)))
		ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s01", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
		if err != nil {
			t.Fatal(err)
		}
		b2 := ab.Result.Block
		// The writer dies before it opens b2's pipeline.
		if s.recoverLease("/s01", "w2") {
			t.Fatal("closed at once although the last block has locations")
		}
		st := s.waitClosed("/s01", 30*time.Second)
		if len(st.Blocks) != 1 || st.Blocks[0].Id != b1.Id || st.File.Length != uint64(len(data)) || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE {
			t.Fatalf("after recovery: %v, want only block %d (%d bytes)", st, b1.Id, len(data))
		}
		if c := s.commitsOf(b2.Id); len(c) != 1 || !c[0].DeleteBlock || len(c[0].Targets) != 0 {
			t.Fatalf("commits of the empty block: %v, want one delete", c)
		}
		for _, id := range locIDs(ab.Locations) {
			if r, ok := s.replicaOn(id, b2.Id); ok {
				t.Fatalf("%s holds a replica of the never-written block: %v", id, r)
			}
		}
		s.checkSynchronised("/s01", b1.Id, locIDs(locs), data, len(data))
	})
	t.Run("no-locations", func(t *testing.T) {
		e := newFSEnv(t, shortLeases)
		e.registerNodes(3)
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s01b", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
			t.Fatal(err)
		}
		ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s01b", ClientName: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		b1 := ab.Result.Block
		for _, n := range b1.ExpectedLocations {
			e.report(n, b1, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
		}
		ab, err = e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s01b", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: 100}})
		if err != nil {
			t.Fatal(err)
		}
		b2 := ab.Result.Block
		if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/s01b", ClientName: "w2"}); err != nil {
			t.Fatal(err)
		}
		primary, cmd := e.waitRecoverCmd(b2.Id, 0)
		// A commit that keeps the file open and names no registered node
		// leaves the last block with no expected location and length 0.
		res, err := e.nl.CommitBlockSynchronization(e.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: primary, BlockId: b2.Id, RecoveryId: cmd.RecoveryId,
			NewGs: cmd.RecoveryId, OldGs: cmd.Gs, NewLength: 0, CloseFile: false, Targets: []string{"ghost"}})
		if err != nil {
			t.Fatal(err)
		}
		gs := e.nextGS()
		if l, f := res.Result.GetBlock(), res.Result.GetFile(); !f.GetUnderConstruction() || l.GetState() != fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION ||
			len(l.GetExpectedLocations()) != 0 || l.GetNumBytes() != 0 {
			t.Fatalf("staging: %v", res.Result)
		}
		// The hard limit (2 s) passes: the block is removed, no recovery.
		eventually(t, 30*time.Second, "/s01b closed", func() bool { return !e.stat("/s01b").File.UnderConstruction })
		st := e.stat("/s01b")
		if len(st.Blocks) != 1 || st.Blocks[0].Id != b1.Id || st.File.Length != 100 {
			t.Fatalf("after the hard limit: %v, want block %d only, length 100", st, b1.Id)
		}
		if got := e.nextGS(); got != gs {
			t.Fatalf("a GS was allocated (next GS %d -> %d): a recovery was started", gs, got)
		}
		if r := e.recoveriesOf(b2.Id); len(r) != 1 {
			t.Fatalf("recoveries of block %d: %v, want only the staging one", b2.Id, r)
		}
		for i := 1; i <= 3; i++ {
			hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: nodeID(i), Storages: []*pb.StorageReport{{StorageId: "s1", Free: uint64(i * 100)}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := recoverCmds(hb.Commands); len(r) != 0 {
				t.Fatalf("%s got recovery commands %v", nodeID(i), r)
			}
		}
	})
}

// TestScenario02ZeroBytesWritten — §R7 scenario 2: "Pipeline set up but zero
// bytes written. Expected locations = 3 DNs, each has a 0-byte RBW. →
// recovery starts; primary sees no candidate (len 0) → commit with
// deleteBlock=true → block removed, file closed."
func TestScenario02ZeroBytesWritten(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s02", 3)
	pl := openPipeline(s.ctx, t, blk, locs, "w1")
	for _, id := range locIDs(locs) {
		if r, ok := s.replicaOn(id, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.NumBytes != 0 {
			t.Fatalf("%s: %v, want a 0-byte RBW", id, r)
		}
	}
	pl.Abort()
	if s.recoverLease("/s02", "w2") {
		t.Fatal("closed at once: no recovery ran")
	}
	st := s.waitClosed("/s02", 30*time.Second)
	if len(st.Blocks) != 0 || st.File.Length != 0 {
		t.Fatalf("after recovery: %v, want no block", st)
	}
	if r := s.recoveriesOf(blk.Id); len(r) != 1 {
		t.Fatalf("recoveries %v, want one", r)
	}
	c := s.commitsOf(blk.Id)
	if len(c) != 1 || !c[0].DeleteBlock || !c[0].CloseFile || c[0].NewLength != 0 || len(c[0].Targets) != 0 {
		t.Fatalf("commits %v, want one delete_block commit", c)
	}
	// The empty replicas now belong to no block: the nodes are told to
	// delete them.
	for _, id := range locIDs(locs) {
		eventually(t, 30*time.Second, id+" dropping the deleted block's replica", func() bool {
			_, ok := s.replicaOn(id, blk.Id)
			return !ok
		})
	}
}

// TestScenario03AllBlocksCompleteFileOpen — §R7 scenario 3: "All blocks
// COMPLETE but file still open (... or a file with zero blocks) →
// internalReleaseLease closes immediately, recoverLease returns true, no
// GS allocated." Staged with real nodes: a finalized, reported block whose
// successor was abandoned; a file without blocks; and one more without
// blocks left to the hard limit.
func TestScenario03AllBlocksCompleteFileOpen(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit, c.FS.LeaseCheckInterval = time.Second, 3*time.Second, 100*time.Millisecond
	})
	b1, locs := s.openFile("/s03", 3)
	data := randData(3, 20_000)
	s.writeBlock(b1, locs, data, true)
	s.waitReported("/s03", b1.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b1.Gs, int64(len(data)))
	ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s03", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: "/s03", ClientName: "w1", BlockId: ab.Result.Block.Id}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/s03z", "/s03h"} {
		if _, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: "w9"}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.stat("/s03"); !st.File.UnderConstruction || len(st.Blocks) != 1 || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE {
		t.Fatalf("staging: %v", st)
	}
	gs := s.nextGS()
	for _, p := range []string{"/s03", "/s03z"} {
		if !s.recoverLease(p, "w2") {
			t.Fatalf("recover lease of %s: false, want closed at once", p)
		}
		if st := s.stat(p); st.File.UnderConstruction {
			t.Fatalf("%s still open after recover lease answered true", p)
		}
	}
	s.waitClosed("/s03h", 30*time.Second) // the hard limit
	if got := s.nextGS(); got != gs {
		t.Fatalf("next GS %d -> %d: a GS was allocated", gs, got)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 0 {
		t.Fatalf("recoveries started: %v", ev)
	}
	if st := s.stat("/s03"); st.File.Length != uint64(len(data)) || st.Blocks[0].Gs != b1.Gs {
		t.Fatalf("after close: %v", st)
	}
}

// TestScenario04LastBlockCommitted — §R7 scenario 4: "Last block COMMITTED,
// ≥1 FINALIZED replica known → closed immediately. COMMITTED, 0 replicas
// known → AlreadyBeingCreated; no recoveryId allocated; monitor retries
// each cycle it is due; file closes as soon as one RECEIVED IBR arrives and
// the next attempt runs." Real nodes hold the block RBW, every byte acked;
// the writer committed it (AddBlock of the next, then abandoned) and died.
func TestScenario04LastBlockCommitted(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit, c.FS.LeaseCheckInterval = time.Second, 2*time.Second, 100*time.Millisecond
	})
	b1, locs := s.openFile("/s04", 3)
	data := randData(4, 30_000)
	s.writeBlock(b1, locs, data, false)
	for _, id := range locIDs(locs) {
		if r, ok := s.replicaOn(id, b1.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.BytesAcked != int64(len(data)) {
			t.Fatalf("%s: %v, want RBW with every byte acked", id, r)
		}
	}
	ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s04", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: "/s04", ClientName: "w1", BlockId: ab.Result.Block.Id}); err != nil {
		t.Fatal(err)
	}
	if st := s.stat("/s04"); len(st.Blocks) != 1 || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMMITTED {
		t.Fatalf("staging: %v, want the last block COMMITTED", st)
	}
	gs := s.nextGS()
	_, err = s.ns.RecoverLease(s.ctx, &pb.RecoverLeaseRequest{Path: "/s04", ClientName: "w2"})
	wantCode(t, "recover lease of a committed, unreplicated block", err, codes.Unavailable, "committed-not-replicated")
	// Past the hard limit the monitor retries every cycle: nothing changes.
	stays(t, 3*time.Second, "COMMITTED, open, no GS allocated", func() bool {
		st := s.stat("/s04")
		return st.File.UnderConstruction && st.File.LeaseHolder == "w1" && st.Blocks[0].State == pb.BlockState_BLOCK_STATE_COMMITTED && s.nextGS() == gs
	})
	// One node finalizes its replica (a RECEIVED report): the next cycle
	// closes the file.
	id := locIDs(locs)[1]
	if _, err := s.node(id).Store().FinalizeBlock(s.ctx, "BP-1", replica.Block{ID: b1.Id, GS: b1.Gs}); err != nil {
		t.Fatal(err)
	}
	st := s.waitClosed("/s04", 30*time.Second)
	if st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE || st.Blocks[0].Gs != b1.Gs || st.File.Length != uint64(len(data)) {
		t.Fatalf("after close: %v", st)
	}
	if got := s.nextGS(); got != gs {
		t.Fatalf("next GS %d -> %d: a recovery id was allocated", gs, got)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 0 {
		t.Fatalf("recoveries started: %v", ev)
	}
	if !s.recoverLease("/s04", "w2") {
		t.Fatal("recover lease of the closed file: false")
	}
}

// TestScenario05ThreeRBWDifferentLengths — §R7 scenario 5: "Three RBW
// replicas with bytesOnDisk 100/120/150, NN GS g → newLength = 100, all
// three truncated to 100, GS = recoveryId, FINALIZED; NN block COMPLETE,
// len 100, 3 locations."
func TestScenario05ThreeRBWDifferentLengths(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s05", 3)
	data := randData(5, 150)
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:[]int{100, 120, 150}[i]], false)
	}
	gs0 := s.nextGS()
	if s.recoverLease("/s05", "w2") {
		t.Fatal("recover lease closed a file whose last block needs a recovery")
	}
	st := s.waitClosed("/s05", 30*time.Second)
	rids := s.recoveriesOf(blk.Id)
	if len(rids) != 1 || rids[0] != gs0 {
		t.Fatalf("recovery ids %v, want one, %d (the next GS when it started)", rids, gs0)
	}
	b := s.checkSynchronised("/s05", blk.Id, locIDs(locs), data, 100)
	if b.Gs != rids[0] || b.Gs <= blk.Gs {
		t.Fatalf("block GS %d: want the recovery id %d (> the writer's %d)", b.Gs, rids[0], blk.Gs)
	}
	if st.File.Length != 100 || len(st.Blocks) != 1 {
		t.Fatalf("file after recovery: %v", st)
	}
	// The nodes report the synchronised replicas: 3 locations.
	s.waitReported("/s05", blk.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b.Gs, 100)
	if c := s.commitsOf(blk.Id); len(c) != 1 || c[0].NewLength != 100 || len(c[0].Targets) != 3 || c[0].DeleteBlock {
		t.Fatalf("commits %v", c)
	}
}

// TestScenario06InconsistentFinalizedLengths — §R7 scenario 6: "Two
// FINALIZED replicas with different lengths (150 vs 140) → primary fails
// with 'Inconsistent size'; no commit; file remains UNDER_RECOVERY; every
// later attempt fails the same way (needs operator action). Test that the
// NN keeps retrying without crashing and without closing."
func TestScenario06InconsistentFinalizedLengths(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = time.Second, 100*time.Millisecond
	})
	blk, locs := s.openFile("/s06", 3)
	data := randData(6, 150)
	lengths := []int{150, 140, 150}
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:lengths[i]], true)
	}
	s.recoverLease("/s06", "w2")
	var seen []*pb.BlockRecovery
	eventually(t, 60*time.Second, "4 recovery attempts", func() bool {
		st := s.stat("/s06")
		if !st.File.UnderConstruction || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
			t.Fatalf("the file left recovery: %v", st)
		}
		r := st.Blocks[0].Recovery
		if n := len(seen); n == 0 || seen[n-1].RecoveryId != r.RecoveryId {
			seen = append(seen, r)
		}
		return r.Attempt >= 4
	})
	for i := 1; i < len(seen); i++ {
		if seen[i].RecoveryId <= seen[i-1].RecoveryId || seen[i].Attempt <= seen[i-1].Attempt {
			t.Fatalf("attempts %v: ids and attempts must grow", seen)
		}
	}
	if c := s.commitsOf(blk.Id); len(c) != 0 {
		t.Fatalf("commits %v: an inconsistent recovery committed", c)
	}
	for i, id := range locIDs(locs) {
		r, ok := s.replicaOn(id, blk.Id)
		if !ok || r.Gs != blk.Gs || r.NumBytes != int64(lengths[i]) ||
			(r.State != pb.ReplicaState_REPLICA_STATE_RUR && r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED) {
			t.Fatalf("%s: %v, want its FINALIZED %d bytes at GS %d untouched", id, r, lengths[i], blk.Gs)
		}
	}
	for i := range s.tc.servers {
		if s.tc.server(i) == nil {
			t.Fatalf("coordinator %d stopped", i)
		}
	}
	s.tc.waitConverged()
}

// TestScenario07OnlyRWRReplicas — §R7 scenario 7: "Only RWR replicas (all
// DNs restarted), lengths 512/1024/1000. → all participate, length 512."
func TestScenario07OnlyRWRReplicas(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s07", 3)
	data := randData(7, 1024)
	lengths := []int{512, 1024, 1000}
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:lengths[i]], false)
	}
	for i, id := range locIDs(locs) {
		s.restart(id)
		if r, ok := s.replicaOn(id, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RWR || r.NumBytes != int64(lengths[i]) {
			t.Fatalf("%s after restart: %v, want RWR with %d bytes", id, r, lengths[i])
		}
	}
	s.waitNodes()
	s.recoverLease("/s07", "w2")
	s.waitClosed("/s07", 30*time.Second)
	b := s.checkSynchronised("/s07", blk.Id, locIDs(locs), data, 512)
	if rids := s.recoveriesOf(blk.Id); len(rids) != 1 || b.Gs != rids[0] {
		t.Fatalf("GS %d, recoveries %v", b.Gs, rids)
	}
}

// TestScenario08StaleReplica — §R7 scenario 8: "Stale replica: one DN has GS
// g−1 (missed a pipeline recovery). → its initReplicaRecovery fails
// (replica GS < block GS) → counted as error; others proceed. If it is the
// only location → 'All datanodes failed', no commit." The stale replica is
// then replaced: invalidated once the block is COMPLETE, and re-replicated.
func TestScenario08StaleReplica(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, fastReplication, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 2*time.Second, 100*time.Millisecond
	})
	// A pipeline recovery bumped two replicas to g2; the third node lost
	// the bump (it acknowledged it, then crashed before it was durable),
	// so the pipeline update still names it.
	stale := func(path string, repl uint32, n int, keep []int) (*pb.BlockRecord, []string, []byte) {
		blk, locs := s.openFile(path, repl)
		data := randData(int64(n), n)
		for _, id := range locIDs(locs) {
			s.stage(id, blk.Id, blk.Gs, data, false)
		}
		r, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
		if err != nil {
			t.Fatal(err)
		}
		g2 := r.Result.NewGs
		for _, i := range keep {
			w, err := s.node(locs[i].NodeId).Store().RecoverRbw(s.ctx, "BP-1", replica.Block{ID: blk.Id, GS: blk.Gs}, g2, int64(n), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		if _, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g2,
			NewLength: uint64(n), NewNodes: locIDs(locs)}); err != nil {
			t.Fatal(err)
		}
		return blk, locIDs(locs), data
	}

	blk, nodes, data := stale("/s08", 3, 1000, []int{0, 1})
	s.recoverLease("/s08", "w2")
	s.waitClosed("/s08", 30*time.Second)
	b := s.checkSynchronised("/s08", blk.Id, nodes[:2], data, 1000)
	if c := s.commitsOf(blk.Id); len(c) != 1 || len(c[0].Targets) != 2 || slices.Contains(c[0].Targets, nodes[2]) {
		t.Fatalf("commits %v: want the two fresh replicas only", c)
	}
	eventually(t, 30*time.Second, nodes[2]+"'s stale replica replaced by a copy", func() bool {
		r, ok := s.replicaOn(nodes[2], blk.Id)
		return ok && r.Gs == b.Gs && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED
	})
	if got := readReplica(s.ctx, t, s.dn(nodes[2]), b); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", nodes[2])
	}

	// The only location is stale: every attempt fails, nothing commits.
	blk, nodes, _ = stale("/s08b", 1, 700, nil)
	s.recoverLease("/s08b", "w2")
	eventually(t, 30*time.Second, "a second attempt", func() bool {
		st := s.stat("/s08b")
		return st.Blocks[0].Recovery.GetAttempt() >= 2
	})
	st := s.stat("/s08b")
	if !st.File.UnderConstruction || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || len(s.commitsOf(blk.Id)) != 0 {
		t.Fatalf("only a stale location: %v, commits %v", st, s.commitsOf(blk.Id))
	}
	if r, ok := s.replicaOn(nodes[0], blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.Gs != blk.Gs || r.NumBytes != 700 {
		t.Fatalf("the stale replica changed: %v", r)
	}
}

// TestScenario09LateOlderRecovery — §R7 scenario 9: "Late older recovery. B
// (1002) already initialized; A's init (1001) arrives → RecoveryInProgress
// → A's primary aborts silently, sends no commit; B unaffected." A is a
// first attempt whose primary died mid-way; B its re-drive, paused after
// initialising the replicas; A's late messages (its init on every live
// replica, then its commit) are delivered in B's window.
func TestScenario09LateOlderRecovery(t *testing.T) {
	t.Parallel()
	const path = "/s09"
	d := stageDeadPrimary(t, path)
	d.waitSecondAttempt(path)
	r1, r2 := d.r1.RecoveryId, d.r2.RecoveryId
	before := d.stat(path)
	seq, gs := d.nextSeq(), d.nextGS()
	for _, id := range d.survivors() {
		_, err := d.dn(id).InitReplicaRecovery(d.ctx, &pb.InitReplicaRecoveryRequest{Pool: "BP-1", BlockId: d.blk.Id, Gs: d.blk.Gs,
			NumBytes: int64(d.lengths[id]), RecoveryId: r1})
		wantCode(t, id+": A's late init", err, codes.Aborted, "RECOVERY_IN_PROGRESS")
		if r, _ := d.replicaOn(id, d.blk.Id); r.GetState() != pb.ReplicaState_REPLICA_STATE_RUR || r.RecoveryId != r2 || r.BytesOnDisk != int64(d.lengths[id]) || r.Gs != d.blk.Gs {
			t.Fatalf("%s after A's late init: %v, want B's RUR unchanged", id, r)
		}
	}
	// Had A's primary not aborted, its commit would carry A's id: refused,
	// and nothing changes.
	_, err := d.nl.CommitBlockSynchronization(d.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: d.r1.Primary, BlockId: d.blk.Id, RecoveryId: r1, NewGs: r1,
		OldGs: d.blk.Gs, NewLength: uint64(d.shortest()), CloseFile: true, Targets: d.survivors()})
	wantCode(t, "A's commit", err, codes.Aborted, "recovery-id-mismatch")
	after := d.stat(path)
	if !proto.Equal(before.File, after.File) || after.Blocks[0].Gs != before.Blocks[0].Gs || !proto.Equal(before.Blocks[0].Recovery, after.Blocks[0].Recovery) {
		t.Fatalf("A's refused messages changed the file:\n%v\n%v", before, after)
	}
	if d.nextSeq() != seq || d.nextGS() != gs {
		t.Fatal("A's refused commit wrote a journal event or allocated a GS")
	}
	// B goes on as if nothing happened.
	d.waitClosed(path, 30*time.Second)
	b := d.checkSynchronised(path, d.blk.Id, d.survivors(), d.data, d.shortest())
	if b.Gs != r2 {
		t.Fatalf("block GS %d, want B's id %d", b.Gs, r2)
	}
	if c := d.commitsOf(d.blk.Id); len(c) != 1 || c[0].RecoveryId != r2 {
		t.Fatalf("commits %v, want B's only", c)
	}
}

// TestScenario10PrimaryDiesAfterInit — §R7 scenario 10: "Primary dies after
// init, before commit. NN stays UNDER_RECOVERY; no new attempt within 90 s
// (recoverLease returns false without a new id); after 90 s the next
// trigger allocates a new id and picks a different alive primary (not
// previously chosen); replicas still in RUR are re-initialized with the
// higher id and recovery completes." (The attempt timeout is 6 s here.)
func TestScenario10PrimaryDiesAfterInit(t *testing.T) {
	t.Parallel()
	const path = "/s10"
	d := stageDeadPrimary(t, path)
	// Within the attempt's timeout: no new attempt, no new id.
	if d.recoverLease(path, "w3") {
		t.Fatal("recover lease closed the file")
	}
	st := d.stat(path)
	if got := st.Blocks[0].Recovery; st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || got.RecoveryId != d.r1.RecoveryId || got.Attempt != 1 {
		t.Fatalf("within the timeout: %v, want attempt 1 (%d) still", st.Blocks[0], d.r1.RecoveryId)
	}
	if d.nextGS() != d.gs0+1 {
		t.Fatalf("next GS %d: a second id was allocated within the timeout", d.nextGS())
	}
	d.waitSecondAttempt(path)
	if d.r2.Attempt != 2 || d.r2.RecoveryId <= d.r1.RecoveryId || d.r2.Primary == d.r1.Primary || !slices.Contains(d.survivors(), d.r2.Primary) ||
		!slices.Equal(d.r2.TriedPrimaries, []string{d.r1.Primary, d.r2.Primary}) {
		t.Fatalf("second attempt %v after %v", d.r2, d.r1)
	}
	d.waitClosed(path, 30*time.Second)
	b := d.checkSynchronised(path, d.blk.Id, d.survivors(), d.data, d.shortest())
	if b.Gs != d.r2.RecoveryId {
		t.Fatalf("block GS %d, want %d", b.Gs, d.r2.RecoveryId)
	}
	if r := d.recoveriesOf(d.blk.Id); !slices.Equal(r, []uint64{d.r1.RecoveryId, d.r2.RecoveryId}) {
		t.Fatalf("recoveries %v", r)
	}
	if c := d.commitsOf(d.blk.Id); len(c) != 1 || c[0].RecoveryId != d.r2.RecoveryId {
		t.Fatalf("commits %v", c)
	}
}

// TestScenario11CommitRetriedAfterSuccess — §R7 scenario 11: "Commit retried
// after success (RPC retry / DN re-send) → file already closed with
// COMPLETE last block → success, no second CLOSE journaled."
func TestScenario11CommitRetriedAfterSuccess(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, nodes, data, c := s.recovered("/s11", [3]int{4000, 3500, 4000})
	before, seq := s.stat("/s11"), s.nextSeq()
	req := &clusterpb.CommitBlockSyncRequest{NodeId: nodes[0], BlockId: c.BlockId, RecoveryId: c.RecoveryId, NewGs: c.NewGs, OldGs: c.OldGs,
		NewLength: c.NewLength, CloseFile: c.CloseFile, Targets: c.Targets}
	res, err := s.nl.CommitBlockSynchronization(s.ctx, req)
	if err != nil || !res.Result.GetClosed() || !res.Result.GetUnchanged() {
		t.Fatalf("retried commit: %v, %v; want an unchanged success", res, err)
	}
	// A "retry" that disagrees with what was applied is refused.
	bad := proto.Clone(req).(*clusterpb.CommitBlockSyncRequest)
	bad.NewLength--
	_, err = s.nl.CommitBlockSynchronization(s.ctx, bad)
	wantCode(t, "a retry with another length", err, codes.FailedPrecondition, "length-mismatch")
	after := s.stat("/s11")
	if !proto.Equal(before.File, after.File) || !slices.Equal(before.Blocks[0].ExpectedLocations, after.Blocks[0].ExpectedLocations) ||
		after.Blocks[0].Gs != c.NewGs || after.Blocks[0].NumBytes != c.NewLength {
		t.Fatalf("the retries changed the file:\n%v\n%v", before, after)
	}
	if s.nextSeq() != seq || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatal("a retried commit was journaled")
	}
	s.checkSynchronised("/s11", blk.Id, nodes, data, 3500)
}

// TestScenario12DeleteCommitForGoneBlock — §R7 scenario 12: "deleteBlock
// commit for a block that is already gone → silent success."
func TestScenario12DeleteCommitForGoneBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s12", 3)
	openPipeline(s.ctx, t, blk, locs, "w1").Abort() // 0-byte RBW replicas
	s.recoverLease("/s12", "w2")
	if st := s.waitClosed("/s12", 30*time.Second); len(st.Blocks) != 0 {
		t.Fatalf("%v: the empty block was not deleted", st)
	}
	c := s.commitsOf(blk.Id)
	if len(c) != 1 || !c[0].DeleteBlock {
		t.Fatalf("commits %v", c)
	}
	seq := s.nextSeq()
	for _, id := range []uint64{blk.Id, blk.Id + 1000} { // the re-sent commit; a block that never was
		res, err := s.nl.CommitBlockSynchronization(s.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: locs[0].NodeId, BlockId: id, RecoveryId: c[0].RecoveryId,
			NewGs: c[0].NewGs, OldGs: c[0].OldGs, CloseFile: true, DeleteBlock: true})
		if err != nil || !res.Result.GetUnchanged() {
			t.Fatalf("delete commit for gone block %d: %v, %v", id, res, err)
		}
	}
	if s.nextSeq() != seq || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatal("a delete commit for a gone block was journaled")
	}
	if st := s.stat("/s12"); st.File.UnderConstruction || len(st.Blocks) != 0 {
		t.Fatalf("after the retries: %v", st)
	}
}
