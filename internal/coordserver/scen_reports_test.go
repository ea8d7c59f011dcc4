package coordserver

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/protobuf/proto"
)

// TestScenario27RestartDropsTemporary — §R7 scenario 27: "DN restart with
// TEMPORARY replica → deleted, never reported; NN re-replicates." A node
// holds an interrupted transfer's TEMPORARY copy of a complete block; it
// restarts; then a holder dies and the block is copied to it afresh.
func TestScenario27RestartDropsTemporary(t *testing.T) {
	t.Parallel()
	s := startScen(t, 4, nil, fastReplication)
	data := randData(27, 200_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s27", data)
	dns := map[string]pb.DataNodeClient{}
	for _, n := range s.nodes {
		dns[n.ID()] = dataNode(t, n)
	}
	var holders []string
	eventually(t, 20*time.Second, "3 finalized replicas", func() bool {
		holders = finalizedHolders(s.ctx, t, dns, blk, len(data))
		return len(holders) == 3
	})
	var spare string
	for _, n := range s.nodes {
		if !slices.Contains(holders, n.ID()) {
			spare = n.ID()
		}
	}
	w, err := s.node(spare).Store().CreateTemporary(s.ctx, "BP-1", replica.Block{ID: blk.Id, GS: blk.Gs, NumBytes: int64(len(data))}, true, replica.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(s.ctx, 0, data[:65536], blockio.Checksums(data[:65536])); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if r, ok := s.replicaOn(spare, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_TEMPORARY {
		t.Fatalf("%s: %v, want TEMPORARY", spare, r)
	}
	notReported := func() bool {
		for _, r := range s.stat("/s27").Blocks[0].ReportedLocations {
			if r.NodeId == spare {
				return false
			}
		}
		return true
	}
	stays(t, time.Second, spare+"'s TEMPORARY replica never reported", notReported)
	s.restart(spare)
	if r, ok := s.replicaOn(spare, blk.Id); ok {
		t.Fatalf("%s after restart: %v, want the TEMPORARY replica gone", spare, r)
	}
	if !notReported() {
		t.Fatalf("%s reported a replica it does not hold", spare)
	}
	s.kill(holders[0])
	delete(dns, holders[0])
	dns[spare] = dataNode(t, s.node(spare))
	eventually(t, 40*time.Second, "the block copied to "+spare, func() bool {
		return slices.Contains(finalizedHolders(s.ctx, t, dns, blk, len(data)), spare)
	})
	st := s.stat("/s27")
	if got := readReplica(s.ctx, t, dns[spare], st.Blocks[0]); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", spare)
	}
}

// TestScenario28ReportsOfUCBlock — §R7 scenario 28: "FBR: FINALIZED replica
// with GS ≥ NN GS for an UNDER_CONSTRUCTION block → recorded as location
// and in the UC list; GS < NN GS → corrupt." Real pipelines leave it so: a
// first pipeline recovery (g0 → g1) dropped node c; a close recovery then
// finalized a and b at g2 and the writer died before telling the
// coordinator (block still at g1). a and c restart (full reports). a and b
// are the recovery's FINALIZED sources; c's stale replica is never used and
// is replaced once the block is complete.
func TestScenario28ReportsOfUCBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, fastReplication)
	blk, locs := s.openFile("/s28", 3)
	data := randData(28, 50_000)
	n := uint64(len(data))
	s.writeBlock(blk, locs, data, false)
	ab := locs[:2]
	setup := func(stage pb.BlockStage, gs, newGS uint64) {
		t.Helper()
		pl, err := blockio.Open(s.ctx, dataNodeConn(t, ab[0].GrpcAddr), &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: gs, NewGs: newGS, Stage: stage,
			MinBytesRcvd: int64(n), MaxBytesRcvd: int64(n), ClientName: "w1", Targets: addrsOf(ab[1:])}, blockio.Options{Address: ab[0].GrpcAddr})
		if err != nil {
			t.Fatalf("%v setup: %v", stage, err)
		}
		pl.Abort()
	}
	newGS := func() uint64 {
		t.Helper()
		r, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: "/s28", ClientName: "w1", BlockId: blk.Id})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result.NewGs
	}
	g1 := newGS()
	setup(pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY, blk.Gs, g1)
	if _, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: "/s28", ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g1,
		NewLength: n, NewNodes: locIDs(ab)}); err != nil {
		t.Fatal(err)
	}
	g2 := newGS()
	setup(pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY, g1, g2)
	a, b, c := locs[0].NodeId, locs[1].NodeId, locs[2].NodeId
	s.restart(a)
	s.restart(c)
	s.waitNodes()
	if st := s.stat("/s28").Blocks[0]; st.Gs != g1 || st.State != pb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION {
		t.Fatalf("staging: %v", st)
	}
	s.waitReported("/s28", blk.Id, []string{a, b}, pb.ReplicaState_REPLICA_STATE_FINALIZED, g2, int64(n))
	s.waitReported("/s28", blk.Id, []string{c}, pb.ReplicaState_REPLICA_STATE_RWR, blk.Gs, int64(n))
	// Nothing is deleted while the block is under construction.
	stays(t, time.Second, "every replica kept", func() bool {
		for id, gs := range map[string]uint64{a: g2, b: g2, c: blk.Gs} {
			if r, ok := s.replicaOn(id, blk.Id); !ok || r.Gs != gs {
				return false
			}
		}
		return true
	})
	s.recoverLease("/s28", "w2")
	s.waitClosed("/s28", 30*time.Second)
	fin := s.checkSynchronised("/s28", blk.Id, []string{a, b}, data, int(n))
	if com := s.commitsOf(blk.Id); len(com) != 1 || com[0].OldGs != g1 || !(g2 < fin.Gs) {
		t.Fatalf("commit %v: from GS %d, over replicas at %d", com, g1, g2)
	}
	eventually(t, 30*time.Second, c+"'s stale replica replaced by a copy", func() bool {
		r, ok := s.replicaOn(c, blk.Id)
		return ok && r.Gs == fin.Gs && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && r.NumBytes == int64(n)
	})
	if got := readReplica(s.ctx, t, s.dn(c), fin); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", c)
	}
}

// TestScenario29ReportOfUnknownBlock — §R7 scenario 29: "Report for an
// unknown block id → DN told to delete it." The nodes hold, besides a real
// file's replicas, replicas of ids the coordinators never allocated.
func TestScenario29ReportOfUnknownBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	data := randData(29, 10_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s29", data)
	const unknown = 1 << 40
	s.stageUnknown("dn1", unknown, data[:3000], true)
	s.stageUnknown("dn2", unknown+1, data[:2000], false)
	for id, b := range map[string]uint64{"dn1": unknown, "dn2": unknown + 1} {
		eventually(t, 30*time.Second, fmt.Sprintf("%s deleting unknown block %d", id, b), func() bool {
			_, ok := s.replicaOn(id, b)
			return !ok
		})
	}
	st := s.stat("/s29")
	for _, n := range s.nodes {
		if r, ok := s.replicaOn(n.ID(), blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != blk.Gs {
			t.Fatalf("%s lost a known replica: %v", n.ID(), r)
		}
		if got := readReplica(s.ctx, t, s.dn(n.ID()), st.Blocks[0]); !bytes.Equal(got, data) {
			t.Fatalf("%s: replica bytes differ", n.ID())
		}
	}
}

// TestScenario30ScannerLengthMismatch — §R7 scenario 30: "Directory scanner
// length mismatch on a FINALIZED replica → memory length corrected and
// replica reported bad → NN marks it corrupt and re-replicates. A
// concurrent append must not cause a false corrupt report (HDFS-17346)."
// The nodes scan every 100 ms.
func TestScenario30ScannerLengthMismatch(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, func(_ int, c *nodeserver.Config) { c.DirScanInterval = 100 * time.Millisecond }, fastReplication)
	data := randData(30, 100_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s30", data)
	s.waitReported("/s30", blk.Id, serverIDs(s.nodes), pb.ReplicaState_REPLICA_STATE_FINALIZED, blk.Gs, int64(len(data)))
	victim := s.nodes[1]
	path := blockData(t, victim.Config().DataDir, blk.Id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	eventually(t, 30*time.Second, "the scanner's length fix", func() bool { return victim.Store().Stats().DirScanLenFixed >= 1 })
	// Reported bad, deleted and copied back: the node ends with the right
	// bytes, at the right length, on disk too.
	eventually(t, 40*time.Second, victim.ID()+"'s replica replaced", func() bool {
		r, ok := s.replicaOn(victim.ID(), blk.Id)
		if !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.NumBytes != int64(len(data)) {
			return false
		}
		st, err := os.Stat(blockData(t, victim.Config().DataDir, blk.Id))
		return err == nil && st.Size() == int64(len(data))
	})
	st := s.stat("/s30")
	if got := readReplica(s.ctx, t, s.dn(victim.ID()), st.Blocks[0]); !bytes.Equal(got, data) {
		t.Fatalf("%s: replica bytes differ", victim.ID())
	}
	s.waitReported("/s30", blk.Id, serverIDs(s.nodes), pb.ReplicaState_REPLICA_STATE_FINALIZED, blk.Gs, int64(len(data)))

	// Appends while the scanners run: no replica is reported bad.
	bad := func() (n int64) {
		for _, nd := range s.nodes {
			st := nd.Store().Stats()
			n += st.DirScanLenFixed + st.DirScanGSFixed + st.CorruptBlocks
		}
		return n
	}
	all := randData(31, 40_000)
	ab := writeFile(s.ctx, t, s.fsEnv, "/s30a", all[:5000])
	before := bad()
	for i, from := 0, 5000; i < 5; i, from = i+1, from+7000 {
		s.appendTo("/s30a", all[:from+7000], from)
	}
	scans := victim.Store().Stats().DirScans
	eventually(t, 20*time.Second, "more scans after the appends", func() bool { return victim.Store().Stats().DirScans >= scans+3 })
	if got := bad(); got != before {
		t.Fatalf("appends under the scanners: %d replicas reported bad", got-before)
	}
	fin := s.stat("/s30a").Blocks[0]
	for _, r := range fin.ReportedLocations {
		if r.Corrupt {
			t.Fatalf("%s marked corrupt", r.NodeId)
		}
	}
	s.checkSynchronised("/s30a", ab.Id, serverIDs(s.nodes), all, len(all))
}

// TestScenario31ExpiredLeasesInBulk — §R7 scenario 31: "Expired leases in
// bulk (e.g. 100 000 files) → monitor processes at most ~25 ms worth per
// 2 s cycle; NN stays responsive (HDFS-10220)." Here the bound is
// MaxLeaseActionsPerCycle (10 per 1 s cycle) on 60 expired files; the
// coordinators alone are involved (the files have no blocks).
func TestScenario31ExpiredLeasesInBulk(t *testing.T) {
	t.Parallel()
	const files, perCycle, interval = 60, 10, time.Second
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit = time.Second, 2*time.Second
		c.FS.LeaseCheckInterval, c.FS.MaxLeaseActionsPerCycle = interval, perCycle
	})
	for i := 0; i < files; i++ {
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: fmt.Sprintf("/s31/f%03d", i), Replication: 1, BlockSize: 1 << 20, ClientName: "dead"}); err != nil {
			t.Fatal(err)
		}
	}
	open := func() int {
		n := 0
		ls, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/s31"})
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ls.Entries {
			if en.File.UnderConstruction {
				n++
			}
		}
		return n
	}
	// While the monitor works through them, the namespace answers at once.
	var slowest time.Duration
	probes := 0
	eventually(t, 60*time.Second, "every expired lease released", func() bool {
		start := time.Now()
		if probes++; probes%5 == 1 {
			if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: fmt.Sprintf("/s31x/p%d", probes), Replication: 1, BlockSize: 1 << 20, ClientName: "live"}); err != nil {
				t.Fatal(err)
			}
		}
		n := open()
		slowest = max(slowest, time.Since(start))
		return n == 0
	})
	if slowest > 3*time.Second {
		t.Fatalf("a create and a list took %v during the releases", slowest)
	}
	// At most perCycle releases a cycle: the 60 need at least 6 cycles,
	// and the ticker starts the k-th cycle no earlier than k-1 intervals
	// after the first (a late cycle only delays the first release), so the
	// releases span at least 3 intervals. Without the bound they would all
	// go in one cycle.
	var at []int64
	for _, ev := range e.journalEvents(fsm.EventLeaseReleased) {
		if strings.HasPrefix(ev.Op.GetReleaseLease().GetPath(), "/s31/") {
			at = append(at, ev.UnixNanos)
		}
	}
	if len(at) != files {
		t.Fatalf("%d releases journaled, want %d", len(at), files)
	}
	slices.Sort(at)
	if span := time.Duration(at[len(at)-1] - at[0]); span < 3*interval {
		t.Fatalf("the %d releases took %v: fewer cycles than %d per cycle allows", files, span, perCycle)
	}
}

// TestScenario32ReportAheadOfMetadata — §R7 scenario 32: "Standby/after-
// failover IBR ordering. A DN IBR with GS ahead of the applied metadata
// must be queued, not marked corrupt, and replayed once metadata catches
// up." A node reports a replica of the next block id at a GS not allocated
// yet; neither the leader nor, after a failover, the next one has it
// deleted; once AddBlock allocates that very block the early report makes
// it replicated (Complete succeeds on it alone). A replica of an unknown id
// at an old GS is deleted meanwhile (the control).
func TestScenario32ReportAheadOfMetadata(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s32o", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s32o", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var nextID, nextGS uint64
	e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) { nextID, nextGS = st.NextBlockID(), st.NextGS() })
	// The next GS to allocate: the first one not yet allocated (the
	// boundary a "GS above the highest allocated" check must get right).
	ahead := &pb.BlockRecord{Id: nextID, Gs: nextGS}
	old := &pb.BlockRecord{Id: nextID + 50, Gs: 1}
	e.report("n1", ahead, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	e.report("n2", old, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	invalidates := func(node string, id uint64) bool {
		for _, c := range e.fakeHeartbeat(node) {
			for _, b := range c.GetInvalidate().GetBlocks() {
				if b.Id == id {
					return true
				}
			}
		}
		return false
	}
	eventually(t, 20*time.Second, "the old unknown replica invalidated", func() bool { return invalidates("n2", old.Id) })
	keep := func(when string) {
		t.Helper()
		for i := 0; i < 5; i++ {
			if invalidates("n1", ahead.Id) {
				t.Fatalf("%s: the replica ahead of the metadata was invalidated", when)
			}
		}
		for _, r := range e.stat("/s32o").Blocks[0].ReportedLocations {
			if r.Corrupt {
				t.Fatalf("%s: %s marked corrupt", when, r.NodeId)
			}
		}
	}
	keep("on the leader")

	// Failover: the new leader asks for full reports, then judges them.
	old0 := e.leader
	e.tc.kill(old0)
	e.connect(e.tc.waitLeader())
	e.tc.start(old0)
	for i := 1; i <= 3; i++ {
		reps := []*pb.ReportedReplica{{BlockId: ab.Result.Block.Id, Gs: ab.Result.Block.Gs, NumBytes: 0, State: pb.ReplicaState_REPLICA_STATE_RBW}}
		if i == 1 {
			reps = append(reps, &pb.ReportedReplica{BlockId: ahead.Id, Gs: ahead.Gs, NumBytes: 100, State: pb.ReplicaState_REPLICA_STATE_FINALIZED})
		}
		eventually(t, 20*time.Second, nodeID(i)+"'s full report", func() bool {
			_, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: nodeID(i), Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}})
			return err == nil
		})
	}
	eventually(t, 20*time.Second, "the new leader out of safe mode", func() bool {
		r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
		return err == nil && !r.SafeMode
	})
	keep("after the failover")

	// The metadata catches up: AddBlock allocates exactly the reported
	// block (the next block id at the next GS).
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s32", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	nb, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s32", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if b := nb.Result.Block; b.Id != ahead.Id || b.Gs != ahead.Gs {
		t.Fatalf("allocated block %d at GS %d, want the reported %d at %d", b.Id, b.Gs, ahead.Id, ahead.Gs)
	}
	keep("once caught up")
	c, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/s32", ClientName: "w1", Last: &pb.BlockRef{Id: ahead.Id, Gs: ahead.Gs, NumBytes: 100}})
	if err != nil || !c.Result.Closed {
		t.Fatalf("complete on the early report alone: %v, %v", c, err)
	}
	st := e.stat("/s32").Blocks[0]
	if st.State != pb.BlockState_BLOCK_STATE_COMPLETE || len(st.ReportedLocations) != 1 || st.ReportedLocations[0].NodeId != "n1" || st.ReportedLocations[0].Corrupt {
		t.Fatalf("after complete: %v", st)
	}
}

// TestScenario33FailoverMidRecovery — §R7 scenario 33: "Recovery across
// failover. Recovery started on leader A (id R); failover to B before
// commit. ... Our Raft design: see §R9.1 (the commit with R should be accepted
// by B if R is the replicated current id)." The primary is paused between
// its initialisations and its updates while the leader is killed.
func TestScenario33FailoverMidRecovery(t *testing.T) {
	t.Parallel()
	const path = "/s33"
	s := startScen(t, 3, pauseAt(4*time.Second, path), func(_ int, c *Config) { c.FS.RecoveryTimeout = 30 * time.Second })
	blk, locs := s.openFile(path, 3)
	data := randData(33, 6000)
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:[]int{6000, 5000, 6000}[i]], false)
	}
	s.recoverLease(path, "w2")
	rec := s.stat(path).Blocks[0].Recovery
	s.waitRUR(blk.Id, rec.RecoveryId, locIDs(locs))
	old := s.leader
	s.tc.kill(old)
	s.connect(s.tc.waitLeader())
	if s.leader == old {
		t.Fatal("no new leader")
	}
	s.waitClosed(path, 60*time.Second)
	b := s.checkSynchronised(path, blk.Id, locIDs(locs), data, 5000)
	if b.Gs != rec.RecoveryId {
		t.Fatalf("block GS %d, want the first leader's recovery id %d", b.Gs, rec.RecoveryId)
	}
	if r := s.recoveriesOf(blk.Id); !slices.Equal(r, []uint64{rec.RecoveryId}) {
		t.Fatalf("recoveries %v: the new leader started another", r)
	}
	if c := s.commitsOf(blk.Id); len(c) != 1 || c[0].RecoveryId != rec.RecoveryId {
		t.Fatalf("commits %v", c)
	}
	s.tc.start(old)
	s.tc.waitConverged()
}

// TestScenario34AppendRecoveryInterleavingReplays — §R7 scenario 34: "Append
// newGS == current GS → should be rejected (HDFS-17850 direction) ... test
// that replaying the journal after any recovery/append interleaving never
// hits a GS mismatch." One block goes through write, append, append + dead
// writer + recovery, append; a node refuses an append at the current GS;
// then every coordinator is restarted in turn and replays to the same
// state.
func TestScenario34AppendRecoveryInterleavingReplays(t *testing.T) {
	t.Parallel()
	const path = "/s34"
	s := startScen(t, 3, nil)
	all := randData(34, 30_000)
	blk := writeFile(s.ctx, t, s.fsEnv, path, all[:10_000])
	gss := []uint64{blk.Gs}
	gss = append(gss, s.appendTo(path, all[:15_000], 10_000))
	// An append whose writer dies after an hflush: recovered.
	r, err := s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	gss = append(gss, r.Result.Block.Gs)
	pl := s.openAppend(path, r.Result.Block, r.Locations, 15_000)
	for _, p := range blockio.SplitPackets(all[:22_000], 15_000, 64<<10) {
		p.Sync = p.End() == 22_000
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(s.ctx); err != nil {
		t.Fatal(err)
	}
	pl.Abort()
	s.recoverLease(path, "w2")
	st := s.waitClosed(path, 30*time.Second)
	gss = append(gss, st.Blocks[0].Gs)
	s.checkSynchronised(path, blk.Id, serverIDs(s.nodes), all, 22_000)
	gss = append(gss, s.appendTo(path, all[:26_000], 22_000))
	// A node refuses an append that keeps the replica's GS.
	r, err = s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	cur := gss[len(gss)-1]
	_, err = blockio.Open(s.ctx, dataNodeConn(t, r.Locations[0].GrpcAddr), &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: cur, NewGs: cur,
		Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, MinBytesRcvd: 26_000, MaxBytesRcvd: 26_000, ClientName: "w1"}, blockio.Options{Address: r.Locations[0].GrpcAddr})
	if err == nil {
		t.Fatal("a node accepted an append with new GS == current GS")
	}
	if rep, _ := s.replicaOn(r.Locations[0].NodeId, blk.Id); rep.GetGs() != cur || rep.GetState() != pb.ReplicaState_REPLICA_STATE_FINALIZED || rep.GetNumBytes() != 26_000 {
		t.Fatalf("the refused append changed the replica: %v", rep)
	}
	pl = s.openAppend(path, r.Result.Block, r.Locations, 26_000)
	for _, p := range blockio.SplitPackets(all, 26_000, 64<<10) {
		p.Last = p.End() == int64(len(all))
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	s.complete(path, &pb.BlockRef{Id: blk.Id, Gs: r.Result.Block.Gs, NumBytes: uint64(len(all))})
	gss = append(gss, r.Result.Block.Gs)
	for i := 1; i < len(gss); i++ {
		if gss[i] <= gss[i-1] {
			t.Fatalf("GS history %v: must only grow", gss)
		}
	}
	s.checkSynchronised(path, blk.Id, serverIDs(s.nodes), all, len(all))
	s.tc.waitConverged()
	want := s.stat(path)
	// Replay: every member restarts (the leader last) and comes back to
	// the same state.
	for _, i := range append(s.tc.followers(s.leader), s.leader) {
		s.tc.restart(i)
		s.connect(s.tc.waitLeader())
		s.tc.waitConverged()
	}
	if got := s.stat(path); !proto.Equal(got.File, want.File) || got.Blocks[0].Gs != want.Blocks[0].Gs || got.Blocks[0].NumBytes != want.Blocks[0].NumBytes {
		t.Fatalf("after replay: %v, want %v", got, want)
	}
}
