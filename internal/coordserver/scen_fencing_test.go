package coordserver

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestScenario13WriterFencedAfterRecoveryStarts — §R7 scenario 13:
// "Original writer after recovery starts: updateBlockForPipeline →
// 'Unexpected BlockUCState'; complete → 'under recovery'; any lease-checked
// op → lease mismatch. The writer can never revive the block at its old
// GS." The writer has a live pipeline to real nodes and a pipeline GS it
// obtained before the recovery started.
func TestScenario13WriterFencedAfterRecoveryStarts(t *testing.T) {
	t.Parallel()
	const path = "/s13"
	s := startScen(t, 3, pauseAt(3*time.Second, path))
	blk, locs := s.openFile(path, 3)
	data := randData(13, 160_000)
	pl := openPipeline(s.ctx, t, blk, locs, "w1")
	for _, p := range blockio.SplitPackets(data[:100_000], 0, 64<<10) {
		p.Sync = p.End() == 100_000
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(s.ctx); err != nil {
		t.Fatal(err)
	}
	ub, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
	if err != nil {
		t.Fatal(err)
	}
	g2 := ub.Result.NewGs
	s.recoverLease(path, "w2")
	rec := s.stat(path).Blocks[0].Recovery
	s.waitRUR(blk.Id, rec.RecoveryId, locIDs(locs))

	writerOps := func() int {
		n := 0
		for _, typ := range []string{fsm.EventUpdateBlockForPipeline, fsm.EventUpdatePipeline, fsm.EventComplete, fsm.EventAddBlock, fsm.EventAbandonBlock} {
			n += len(s.journalEvents(typ))
		}
		return n
	}
	ops, gs := writerOps(), s.nextGS()
	ref := &pb.BlockRef{Id: blk.Id, Gs: blk.Gs, NumBytes: 100_000}
	fenced := func(when string) {
		t.Helper()
		for what, call := range map[string]func() error{
			"update block for pipeline": func() error {
				_, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
				return err
			},
			"update pipeline to its own new GS": func() error {
				_, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g2,
					NewLength: 100_000, NewNodes: locIDs(locs)})
				return err
			},
			"complete": func() error {
				_, err := s.ns.Complete(s.ctx, &pb.CompleteRequest{Path: path, ClientName: "w1", Last: ref})
				return err
			},
			"add block": func() error {
				_, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1", Previous: ref})
				return err
			},
			"abandon block": func() error {
				_, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
				return err
			},
		} {
			if err := call(); grpcCode(err) == codes.OK || grpcCode(err) == codes.Unavailable {
				t.Fatalf("%s, %s by the old writer: %v", when, what, err)
			}
		}
	}
	fenced("under recovery")
	// Its pipeline is dead too: the replicas' writers were stopped.
	_, err = pl.Send(s.ctx, blockio.Packet{Offset: 99_840, Data: data[99_840:160_000], Sync: true})
	if err == nil {
		err = pl.Flush(s.ctx)
	}
	if err == nil {
		t.Fatal("the old writer's pipeline still takes data")
	}
	if writerOps() != ops || s.nextGS() != gs {
		t.Fatal("a refused writer op was journaled or allocated a GS")
	}
	st := s.waitClosed(path, 30*time.Second)
	b := s.checkSynchronised(path, blk.Id, locIDs(locs), data, 100_000)
	if b.Gs != rec.RecoveryId || !(blk.Gs < g2 && g2 < b.Gs) {
		t.Fatalf("GS %d -> pipeline %d -> recovered %d: must only grow", blk.Gs, g2, b.Gs)
	}
	fenced("after the recovery")
	// Nor can it reopen the replicas at its old GS.
	conn := dataNodeConn(t, locs[0].GrpcAddr)
	_, err = blockio.Open(s.ctx, conn, &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: blk.Gs, NewGs: g2, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		MinBytesRcvd: 100_000, MaxBytesRcvd: 160_000, ClientName: "w1", Targets: addrsOf(locs[1:])}, blockio.Options{Address: locs[0].GrpcAddr})
	if err == nil {
		t.Fatal("the old writer reopened a recovered replica at its old GS")
	}
	if after := s.stat(path); !proto.Equal(st.File, after.File) || after.Blocks[0].Gs != b.Gs {
		t.Fatalf("the fenced writer changed the file: %v", after)
	}
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, 100_000)
}

// TestScenario14RecoverLeaseTwice — §R7 scenario 14: "recoverLease twice
// within 90 s → second returns false, no new GS allocated, no second
// command. recoverLease on a closed file → true."
func TestScenario14RecoverLeaseTwice(t *testing.T) {
	t.Parallel()
	const path = "/s14"
	s := startScen(t, 3, pauseAt(1500*time.Millisecond, path))
	blk, locs := s.openFile(path, 3)
	data := randData(14, 2000)
	for _, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data, false)
	}
	gs := s.nextGS()
	if s.recoverLease(path, "w2") {
		t.Fatal("first recover lease closed the file")
	}
	rec := s.stat(path).Blocks[0].Recovery
	for _, c := range []string{"w2", "w3"} {
		if s.recoverLease(path, c) {
			t.Fatalf("recover lease by %s during the recovery: true", c)
		}
	}
	if got := s.stat(path).Blocks[0].Recovery; s.nextGS() != gs+1 || !proto.Equal(got, rec) {
		t.Fatalf("a repeated recover lease started another attempt: %v after %v (next GS %d, was %d)", got, rec, s.nextGS(), gs)
	}
	s.waitClosed(path, 30*time.Second)
	for _, c := range []string{"w2", "w4"} {
		if !s.recoverLease(path, c) {
			t.Fatalf("recover lease of the closed file by %s: false", c)
		}
	}
	if s.nextGS() != gs+1 || len(s.recoveriesOf(blk.Id)) != 1 || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatalf("next GS %d (was %d), recoveries %v, commits %v", s.nextGS(), gs, s.recoveriesOf(blk.Id), s.commitsOf(blk.Id))
	}
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, len(data))
}

// TestScenario15CompetingWriter — §R7 scenario 15: "Another client
// create(overwrite)/append while holder's lease < 60 s old →
// AlreadyBeingCreated; after 60 s → RecoveryInProgress (or success if the
// file could be closed synchronously)." (Soft limit 1 s here.)
func TestScenario15CompetingWriter(t *testing.T) {
	t.Parallel()
	const path = "/s15"
	s := startScen(t, 3, pauseAt(1500*time.Millisecond, path), func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit = time.Second, time.Minute
	})
	blk, locs := s.openFile(path, 3)
	data := randData(15, 5000)
	s.writeBlock(blk, locs, data, false)
	if _, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: "/s15b", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	seq := s.nextSeq()
	appendBy := func(c string) error {
		_, err := s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: c})
		return err
	}
	overwriteBy := func(p, c string) error {
		_, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: c, Overwrite: true})
		return err
	}
	wantCode(t, "append while the lease is fresh", appendBy("w2"), codes.FailedPrecondition, "lease-held")
	wantCode(t, "overwrite while the lease is fresh", overwriteBy(path, "w2"), codes.FailedPrecondition, "lease-held")
	if s.nextSeq() != seq {
		t.Fatal("a refused takeover was journaled")
	}
	// Past the soft limit the takeover starts a recovery and is told to
	// come back.
	eventually(t, 20*time.Second, "the soft limit to pass", func() bool {
		err := appendBy("w2")
		switch grpcCode(err) {
		case codes.FailedPrecondition:
			return false
		case codes.Unavailable:
			wantCode(t, "append after the soft limit", err, codes.Unavailable, "recovery-in-progress")
			return true
		}
		t.Fatalf("append after the soft limit: %v", err)
		return false
	})
	if st := s.stat(path); st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
		t.Fatalf("after the takeover: %v", st.Blocks[0])
	}
	wantCode(t, "overwrite during the recovery", overwriteBy(path, "w3"), codes.Unavailable, "recovery-in-progress")
	s.waitClosed(path, 30*time.Second)
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, len(data))
	if err := appendBy("w2"); err != nil {
		t.Fatalf("append once recovered: %v", err)
	}
	if st := s.stat(path); !st.File.UnderConstruction || st.File.LeaseHolder != "w2" {
		t.Fatalf("after the append: %v", st.File)
	}
	// A file that can be closed at once is taken over at once.
	if err := overwriteBy("/s15b", "w3"); err != nil {
		t.Fatalf("overwrite of an expired empty file: %v", err)
	}
	if st := s.stat("/s15b"); st.File.LeaseHolder != "w3" {
		t.Fatalf("after the overwrite: %v", st.File)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 1 {
		t.Fatalf("%d recoveries started, want 1 (/s15 only)", len(ev))
	}
}

// TestScenario16StaleNodeFiltering — §R7 scenario 16: "Stale-node
// filtering. 3 expected locations, 1 DN without heartbeat for > 30 s →
// command lists 2 locations. 2 of 3 stale → all 3 listed. (Recommended per
// HDFS-17430: dead nodes never listed.)" The command's locations can only
// be seen in a heartbeat reply, so the nodes are faked (stale interval 1 s,
// dead 4 s).
func TestScenario16StaleNodeFiltering(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval, c.FS.ReplicationCheckInterval = time.Second, 4*time.Second, 100*time.Millisecond
		c.FS.RecoveryTimeout = time.Minute
	})
	e.registerNodes(3)
	var blks []*pb.BlockRecord
	for _, p := range []string{"/s16a", "/s16b", "/s16c"} {
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
			t.Fatal(err)
		}
		ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: p, ClientName: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		b := ab.Result.Block
		if len(b.ExpectedLocations) != 3 {
			t.Fatalf("%s: %v", p, b.ExpectedLocations)
		}
		for _, n := range b.ExpectedLocations {
			e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
		}
		blks = append(blks, b)
	}
	// heartbeat heartbeats as node and answers a new leader's request for a
	// full report with the node's replicas, as a real node does: after an
	// election under load the new leader waits in safe mode for it, and
	// re-drives no recovery meanwhile.
	reps := map[string][]*pb.ReportedReplica{}
	for _, b := range blks {
		for _, n := range b.ExpectedLocations {
			reps[n] = append(reps[n], &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW})
		}
	}
	heartbeat := func(n string) []*clusterpb.NodeCommand { return e.heartbeatAnswering(n, reps[n]...) }
	// command heartbeats the given nodes until one gets the recovery of
	// blk and returns its locations.
	command := func(blk uint64, beat ...string) []string {
		t.Helper()
		var locs []string
		eventually(t, 20*time.Second, fmt.Sprintf("the recovery command of block %d", blk), func() bool {
			for _, n := range beat {
				for _, r := range recoverCmds(heartbeat(n)) {
					if r.BlockId == blk {
						locs = locIDs(r.Locations)
					}
				}
			}
			return locs != nil
		})
		slices.Sort(locs)
		return locs
	}
	recoverWhen := func(path string, beat []string, silent func() bool) {
		t.Helper()
		eventually(t, 30*time.Second, "the silent nodes to go stale", func() bool {
			for _, n := range beat {
				heartbeat(n)
			}
			return silent()
		})
		if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"}); err != nil {
			t.Fatal(err)
		}
	}

	// One stale node: left out.
	recoverWhen("/s16a", []string{"n1", "n2"}, func() bool { return !e.nodeLive("n3") })
	if got := command(blks[0].Id, "n1", "n2"); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("one of 3 locations stale: the command lists %v, want [n1 n2]", got)
	}
	// Two stale, not dead: every location is listed.
	recoverWhen("/s16b", []string{"n1"}, func() bool { return !e.nodeLive("n2") && !e.nodeLive("n3") })
	if got := command(blks[1].Id, "n1"); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("two of 3 locations stale: the command lists %v, want all 3", got)
	}
	// n3 dead (silent past the dead interval), n2 stale: the dead node is
	// never listed.
	eventually(t, 30*time.Second, "n3 dead", func() bool {
		heartbeat("n1")
		return e.nodeDead("n3")
	})
	heartbeat("n2")
	recoverWhen("/s16c", []string{"n1"}, func() bool { return !e.nodeLive("n2") })
	if got := command(blks[2].Id, "n1"); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("n3 dead, n2 stale: the command lists %v, want [n1 n2]", got)
	}
}

// TestScenario16DeadBeforeLeaderChange: a node silent since before an
// election is dead for the new leader one dead interval into its term (a
// new leader counts every node as heard from at its term's start, so it
// does not wait for a heartbeat that will never come): ListNodes says so,
// and a recovery command that lists every expected location not dead —
// the other one stale too — leaves it out (HDFS-17430), as the leader
// that had heard it would have.
func TestScenario16DeadBeforeLeaderChange(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval, c.FS.ReplicationCheckInterval = time.Second, 4*time.Second, 100*time.Millisecond
		c.FS.RecoveryTimeout = time.Minute
	})
	b := e.startAbandonedWrite() // /w: one block, RBW on n1-n3
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	// n3 is silent from here on; the leadership moves.
	old := e.tc.waitLeader()
	next := (old + 1) % 3
	e.tc.transferLeadership(old, next)
	eventually(t, 30*time.Second, "n3 dead for the new leader", func() bool {
		e.heartbeatAnswering("n1", rbw)
		e.heartbeatAnswering("n2", rbw)
		return e.nodeDead("n3") && !e.nodeDead("n1") && !e.nodeDead("n2")
	})
	// n2 goes stale, not dead: the command lists every location not dead.
	eventually(t, 20*time.Second, "n2 stale", func() bool {
		e.heartbeatAnswering("n1", rbw)
		return !e.nodeLive("n2")
	})
	if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/w", ClientName: "w2"}); err != nil {
		t.Fatal(err)
	}
	var locs []string
	eventually(t, 20*time.Second, "n1's recovery command", func() bool {
		for _, r := range recoverCmds(e.heartbeatAnswering("n1", rbw)) {
			if r.BlockId == b.Id {
				locs = locIDs(r.Locations)
			}
		}
		return locs != nil
	})
	slices.Sort(locs)
	if !slices.Equal(locs, []string{"n1", "n2"}) {
		t.Fatalf("n3 dead before the election, n2 stale: the command lists %v, want [n1 n2]", locs)
	}
}

// TestScenario17PrimaryRotation — §R7 scenario 17: "Primary rotation.
// Recovery attempts k = 1..3 on a 3-replica block with all DNs alive choose
// three different primaries (most-recent heartbeat first); attempt 4 resets
// and may reuse any. No alive replica → UNDER_RECOVERY with no command."
// Faked nodes, so that the test alone decides who heartbeats when.
func TestScenario17PrimaryRotation(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 600*time.Millisecond, 50*time.Millisecond
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval = 8*time.Second, time.Minute
	})
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s17", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s17", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
	}
	for _, n := range []string{"n1", "n2", "n3"} { // n3 heard from last
		e.fakeHeartbeat(n)
	}
	if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/s17", ClientName: "w2"}); err != nil {
		t.Fatal(err)
	}
	// Every attempt is a journal event carrying its recovery record.
	var seen []*fsmpb.BlockRecovery
	eventually(t, 20*time.Second, "4 attempts", func() bool {
		seen = nil
		for _, ev := range e.journalEvents(fsm.EventRecoveryStarted) {
			if ev.Result.GetBlock().GetId() == b.Id {
				seen = append(seen, ev.Result.Block.Recovery)
			}
		}
		return len(seen) >= 4
	})
	want := []struct {
		primary string
		tried   []string
	}{{"n3", []string{"n3"}}, {"n2", []string{"n3", "n2"}}, {"n1", []string{"n3", "n2", "n1"}}, {"n3", []string{"n3"}}}
	for i, w := range want {
		r := seen[i]
		if r.Attempt != uint32(i+1) || r.Primary != w.primary || !slices.Equal(r.TriedPrimaries, w.tried) {
			t.Fatalf("attempt %d: %v, want primary %s, tried %v (all attempts %v)", i+1, r, w.primary, w.tried, seen)
		}
	}
	// Every location goes stale: no attempt can choose a primary, so none
	// starts and no id is allocated; the block stays UNDER_RECOVERY.
	eventually(t, 30*time.Second, "every node stale", func() bool { return !e.nodeLive("n1") && !e.nodeLive("n2") && !e.nodeLive("n3") })
	// The last attempt started while a node was live runs out; from then
	// on every re-drive finds no primary.
	var cur *pb.BlockRecovery
	eventually(t, 20*time.Second, "the last attempt past its deadline", func() bool {
		cur = e.stat("/s17").Blocks[0].Recovery
		return time.Now().After(time.Unix(0, cur.DeadlineUnixNanos).Add(300 * time.Millisecond))
	})
	gs := e.nextGS()
	stays(t, 2*time.Second, "no new attempt without a live location", func() bool {
		st := e.stat("/s17").Blocks[0]
		return st.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY && st.Recovery.RecoveryId == cur.RecoveryId && e.nextGS() == gs
	})
	// n1 is heard from again: the next attempt is its, and so is the
	// command.
	var cmd *clusterpb.RecoverBlockCommand
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	eventually(t, 20*time.Second, "n1's recovery command", func() bool {
		for _, r := range recoverCmds(e.heartbeatAnswering("n1", rbw)) {
			if r.BlockId == b.Id && r.RecoveryId > cur.RecoveryId {
				cmd = r
			}
		}
		return cmd != nil
	})
	if r := e.stat("/s17").Blocks[0].Recovery; r.Primary != "n1" || r.RecoveryId != cmd.RecoveryId {
		t.Fatalf("after n1 came back: %v, command %v", r, cmd)
	}
}

// TestScenario17NoLiveLocationFirstAttempt — §R3.3 "No expected replicas
// [alive] → primary = none; nothing is sent (file stays UNDER_RECOVERY)"
// for a block's first attempt: recover-lease still allocates a recovery id,
// moves the block UNDER_RECOVERY with no primary (the old writer is fenced)
// and hands the lease over, answering "not closed"; no command goes out and
// no further id is allocated until a location is heard from, whose
// heartbeat then brings the re-driven attempt.
func TestScenario17NoLiveLocationFirstAttempt(t *testing.T) {
	t.Parallel()
	testScenario17NoLiveLocationFirstAttempt(t, false)
}

// TestScenario17NoLiveLocationAfterLeaderChange: the same, with a leader
// change before n2 is heard from again. The new leader starts in safe
// mode and leaves it once n2, the one node it hears from, has sent its
// full report (the silent two are not waited for); CI once met such an
// election under load, and the test's fake node, which did not answer the
// new leader's request for a full report, waited 20 s for a command that
// a safe-mode leader never sends.
func TestScenario17NoLiveLocationAfterLeaderChange(t *testing.T) {
	t.Parallel()
	testScenario17NoLiveLocationFirstAttempt(t, true)
}

func testScenario17NoLiveLocationFirstAttempt(t *testing.T, leaderChange bool) {
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 600*time.Millisecond, 50*time.Millisecond
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval = 2*time.Second, time.Minute
	})
	e.registerNodes(3)
	const path = "/s17n"
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: path, Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
	}
	eventually(t, 30*time.Second, "every node stale", func() bool { return !e.nodeLive("n1") && !e.nodeLive("n2") && !e.nodeLive("n3") })

	gs := e.nextGS()
	r, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"})
	if err != nil || r.Closed {
		t.Fatalf("recover lease with no live location: %v, %v; want not closed, no error", r, err)
	}
	st := e.stat(path)
	blk := st.Blocks[0]
	if blk.State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || blk.Recovery.GetRecoveryId() != gs || blk.Recovery.GetPrimary() != "" || e.nextGS() != gs+1 {
		t.Fatalf("after recover lease: %v (next GS %d), want UNDER_RECOVERY, recovery id %d, no primary", blk, e.nextGS(), gs)
	}
	if st.File.LeaseHolder != "w2" {
		t.Fatalf("lease holder %q, want w2", st.File.LeaseHolder)
	}
	if _, err := e.ns.UpdateBlockForPipeline(e.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: b.Id}); err == nil {
		t.Fatal("the old writer still got a new GS for a block under recovery")
	}
	// No location is live: no new id past the deadline, and a second
	// recover-lease answers "not closed" without allocating one.
	stays(t, 1500*time.Millisecond, "no new attempt without a live location", func() bool {
		cur := e.stat(path).Blocks[0]
		return cur.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY && cur.Recovery.GetRecoveryId() == gs && e.nextGS() == gs+1
	})
	if r, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"}); err != nil || r.Closed || e.nextGS() != gs+1 {
		t.Fatalf("second recover lease: %v, %v, next GS %d; want not closed, no new id", r, err, e.nextGS())
	}
	// n2 is heard from: the re-driven attempt is its.
	var cmd *clusterpb.RecoverBlockCommand
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	if leaderChange {
		old := e.leader
		next := (old + 1) % 3
		e.tc.transferLeadership(old, next)
	}
	eventually(t, 20*time.Second, "n2's recovery command", func() bool {
		for _, c := range recoverCmds(e.heartbeatAnswering("n2", rbw)) {
			if c.BlockId == b.Id && c.RecoveryId > gs {
				cmd = c
			}
		}
		return cmd != nil
	})
	if cur := e.stat(path).Blocks[0].Recovery; cur.Primary != "n2" || cur.RecoveryId != cmd.RecoveryId || cur.Attempt != 2 {
		t.Fatalf("re-driven attempt %v, command %v; want attempt 2 with primary n2", cur, cmd)
	}
}
