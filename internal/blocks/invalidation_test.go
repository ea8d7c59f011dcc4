package blocks

import (
	"context"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"

	"github.com/logbookhq/logbook/fsm"
)

// TestTakeChecksSweep: a heartbeat checks the replicas marked for a
// recheck and the sweep's next slice, each at most once; the sweep covers
// every replica in ceil(n/limit) heartbeats, then starts over; a full
// report starts it over at once.
func TestTakeChecksSweep(t *testing.T) {
	f := &fsSoft{}
	f.reset(1, time.Now(), time.Minute)
	n := f.node("n1")
	reps := map[uint64]softReplica{}
	for id := uint64(1); id <= 10; id++ {
		reps[id] = softReplica{gs: id}
	}
	n.setReplicas(reps, countReplicas(reps))
	ids := func(checks []replicaCheck) []uint64 {
		var out []uint64
		for _, c := range checks {
			if c.softReplica != reps[c.id] {
				t.Fatalf("replica %d is %+v, want %+v", c.id, c.softReplica, reps[c.id])
			}
			out = append(out, c.id)
		}
		return out
	}
	seen := map[uint64]int{}
	for beat := 0; beat < 3; beat++ {
		got := ids(f.takeChecksLocked(n, 4))
		if want := []int{4, 4, 2}[beat]; len(got) != want {
			t.Fatalf("beat %d: %d checks, want %d", beat, len(got), want)
		}
		for _, id := range got {
			seen[id]++
		}
	}
	if len(seen) != 10 {
		t.Fatalf("one pass checked %d distinct replicas, want 10: %v", len(seen), seen)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("replica %d checked %d times in one pass", id, c)
		}
	}

	// Rechecks come first, without repeats, and ids the node no longer
	// holds are dropped.
	n.markRecheck(3)
	n.markRecheck(99)
	got := ids(f.takeChecksLocked(n, 4))
	want := 4 // the new pass's first four
	if !slices.Contains(n.sweep[:4], 3) {
		want++
	}
	sorted := slices.Sorted(slices.Values(got))
	if len(got) != want || got[0] != 3 || slices.Contains(got, 99) || len(slices.Compact(sorted)) != len(got) {
		t.Fatalf("recheck of 3 and 99 then a new pass's first 4 (%v): %v", n.sweep[:4], got)
	}
	if len(n.recheck.set) != 0 {
		t.Fatalf("rechecks left: %v", n.recheck.set)
	}

	// A full report starts the pass over from its replicas.
	reps = map[uint64]softReplica{42: {}}
	n.setReplicas(reps, countReplicas(reps))
	if got := ids(f.takeChecksLocked(n, 4)); !slices.Equal(got, []uint64{42}) {
		t.Fatalf("after a full report: %v", got)
	}
}

// softNode is a leader's soft state with one node, n1, holding replicas
// 1..count at GS 1.
func softNode(count uint64) (*fsSoft, *nodeSoft) {
	f := &fsSoft{}
	f.reset(1, time.Now(), time.Minute)
	n := f.node("n1")
	reps := map[uint64]softReplica{}
	for id := uint64(1); id <= count; id++ {
		reps[id] = softReplica{gs: 1}
	}
	n.setReplicas(reps, countReplicas(reps))
	return f, n
}

// TestRechecksOldestFirst: rechecks beyond a heartbeat's bound wait in the
// order they were marked, each once however often it was marked, so that
// later marks (a steady stream of reports) cannot keep one waiting: each
// heartbeat takes the limit longest waiting, and a recheck marked again
// while queued keeps its place.
func TestRechecksOldestFirst(t *testing.T) {
	f, n := softNode(100)
	f.takeChecksLocked(n, 100) // the first pass of the sweep: all of them
	rechecks := func(checks []replicaCheck) []uint64 {
		var out []uint64
		for _, c := range checks[:min(len(checks), 3)] {
			out = append(out, c.id)
		}
		return out
	}
	for id := uint64(10); id <= 16; id++ {
		n.markRecheck(id)
	}
	n.markRecheck(10) // queued already: keeps its place, checked once
	for beat, want := range [][]uint64{{10, 11, 12}, {13, 14, 15}} {
		// Each beat marks three new ones behind those waiting.
		for i := range uint64(3) {
			n.markRecheck(50 + 10*uint64(beat) + i)
		}
		if got := rechecks(f.takeChecksLocked(n, 3)); !slices.Equal(got, want) {
			t.Fatalf("beat %d: rechecked %v first, want %v", beat, got, want)
		}
	}
	for _, want := range [][]uint64{{16, 50, 51}, {52, 60, 61}, {62}} {
		if got := rechecks(f.takeChecksLocked(n, 3)); !slices.Equal(got[:len(want)], want) {
			t.Fatalf("rechecked %v first, want %v", got, want)
		}
	}
	if len(n.recheck.set) != 0 || len(n.recheck.order) != 0 {
		t.Fatalf("rechecks left: %v %v", n.recheck.set, n.recheck.order)
	}
}

// TestSweepFollowsReplicas: with replicas reported and deleted between
// heartbeats, every pass of the sweep checks each replica held throughout
// the pass, checks only held ones, and its list stays bounded by the
// replicas.
func TestSweepFollowsReplicas(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	f, n := softNode(100)
	const limit = 7
	for pass := range 200 {
		held := maps.Clone(n.replicas)
		touched, seen := map[uint64]bool{}, map[uint64]bool{}
		for beat := 0; ; beat++ {
			for range rng.IntN(4) {
				id := uint64(1 + rng.IntN(150)) // re-adds and new ids
				touched[id] = true
				if rng.IntN(2) == 0 {
					f.deleteReplica(n, id)
				} else {
					f.setReplica(n, id, softReplica{gs: 2})
				}
			}
			for _, c := range f.takeChecksLocked(n, limit) {
				if _, ok := n.replicas[c.id]; !ok {
					t.Fatalf("pass %d: checked %d, not held", pass, c.id)
				}
				seen[c.id] = true
			}
			if beat == 0 && len(n.sweep) > 2*len(n.replicas)+2*limit {
				t.Fatalf("pass %d: a sweep of %d ids for %d replicas", pass, len(n.sweep), len(n.replicas))
			}
			if n.sweepAt >= len(n.sweep) { // the pass is done
				break
			}
		}
		for id := range held {
			if !touched[id] && !seen[id] {
				t.Fatalf("pass %d: replica %d, held throughout, not checked", pass, id)
			}
		}
	}
}

// openWithBlock creates path, open by writer w1, with one block allocated
// on the registered nodes.
func (e *testEnv) openWithBlock(path string, replication uint32) *fsmpb.BlockRecord {
	e.t.Helper()
	if _, err := e.m.propose(&fsmpb.CreateFileOp{Path: path, Replication: replication, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		e.t.Fatal(err)
	}
	v, err := e.m.ViewFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	targets, _, err := e.m.NewBlock(v, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.m.propose(&fsmpb.AddBlockOp{Path: path, ClientName: "w1", Targets: targets})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Result.Block
}

// fullReport sends node's full block report of reps on storage s1.
func (e *testEnv) fullReport(node string, reps ...Replica) {
	e.t.Helper()
	if err := e.m.BlockReport(context.Background(), node, []StorageReplicas{{StorageID: "s1", Replicas: reps}}); err != nil {
		e.t.Fatalf("full report of %s: %v", node, err)
	}
}

// report sends node's incremental report of its replica of b.
func (e *testEnv) report(node string, b *fsmpb.BlockRecord, n int64, state lr.ReplicaState) {
	e.t.Helper()
	if err := e.m.IncrementalReport(node, []Change{{StorageID: "s1", Replica: Replica{BlockID: b.Id, GS: b.Gs, NumBytes: n, State: state}}}); err != nil {
		e.t.Fatalf("report %s: %v", node, err)
	}
}

// heartbeat sends node's heartbeat and returns its work.
func (e *testEnv) heartbeat(node string) Work {
	e.t.Helper()
	r, err := e.m.Heartbeat(Heartbeat{NodeID: node, Storages: []Storage{{ID: "s1", Capacity: 1000, Free: 100}}})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", node, err)
	}
	return r.Work
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestInvalidationSweepAndRemovals: with a node holding far more replicas
// than a heartbeat checks, a replica of an unknown block at an old GS is
// invalidated once per pass of the sweep, a replica reported since is
// judged at the next heartbeat, and a deleted file's replica is
// invalidated at the next heartbeat (the state machine's removal feed)
// rather than when the sweep reaches it.
//
// With background set, the sweep's lists are built in the background
// (sweepBuildMin below the node's replicas), and each heartbeat waits for
// a build in progress to end, as heartbeats seconds apart would.
func TestInvalidationSweepAndRemovals(t *testing.T) {
	t.Run("list at once", func(t *testing.T) { testInvalidationSweep(t, false) })
	t.Run("list in background", func(t *testing.T) { testInvalidationSweep(t, true) })
}

func testInvalidationSweep(t *testing.T, background bool) {
	// Restored in a cleanup registered before the cluster's, so it runs
	// after the cluster has stopped (a defer would run before, racing its
	// goroutines).
	n, m, c := invalidateChecksPerBeat, sweepBuildMin, sweepBuildChunk
	t.Cleanup(func() { invalidateChecksPerBeat, sweepBuildMin, sweepBuildChunk = n, m, c })
	invalidateChecksPerBeat = 8
	if background {
		sweepBuildMin, sweepBuildChunk = 16, 5
	}
	e := newTestEnv(t, Config{})
	e.register("n1", 100)
	e.heartbeat("n1")
	blk := e.openWithBlock("/inv", 1)
	var nextID, nextGS uint64
	e.f.View(func(st *fsm.State) { nextID, nextGS = st.NextBlockID(), st.NextGS() })
	// 400 replicas ahead of the metadata (kept), the open block's (kept
	// while the file exists) and one of an unknown block at an old GS.
	const ahead = 400
	old := nextID + 10_000
	reps := []Replica{
		{BlockID: blk.Id, GS: blk.Gs, NumBytes: 0, State: lr.ReplicaRBW},
		{BlockID: old, GS: 1, NumBytes: 10, State: lr.ReplicaFinalized},
	}
	for i := range uint64(ahead) {
		reps = append(reps, Replica{BlockID: nextID + 100 + i, GS: nextGS + 100, NumBytes: 10, State: lr.ReplicaFinalized})
	}
	e.fullReport("n1", reps...)
	if e.m.SafeMode() {
		t.Fatal("in safe mode after the only registered node's full report")
	}
	invalidated := func() []uint64 {
		if background {
			eventually(t, 10*time.Second, "the sweep list built", func() bool {
				f := e.m.locked()
				defer f.mu.Unlock()
				n := f.nodes["n1"]
				return n == nil || n.next == nil || n.next.done
			})
		}
		var ids []uint64
		for _, b := range e.heartbeat("n1").Invalidate {
			ids = append(ids, b.Id)
		}
		return ids
	}

	// One pass: ceil(402/8) heartbeats, the old replica invalidated once,
	// nothing else.
	passLen := (len(reps) + invalidateChecksPerBeat - 1) / invalidateChecksPerBeat
	var got []uint64
	if background {
		passLen++ // the first heartbeat starts the first list's build
	}
	for range passLen {
		got = append(got, invalidated()...)
	}
	if !slices.Equal(got, []uint64{old}) {
		t.Fatalf("one pass of the sweep invalidated %v, want [%d]", got, old)
	}

	// Into the next pass: a replica reported now is judged at once.
	invalidated()
	old2 := old + 1
	e.report("n1", &fsmpb.BlockRecord{Id: old2, Gs: 1}, 10, lr.ReplicaFinalized)
	if got := invalidated(); !slices.Contains(got, old2) {
		t.Fatalf("after an incremental report of %d: invalidated %v", old2, got)
	}

	// The file goes: its block's replica is invalidated at the next
	// heartbeat (the sweep alone would take up to a pass).
	if _, err := e.m.propose(&fsmpb.DeleteFileOp{Path: "/inv"}); err != nil {
		t.Fatal(err)
	}
	if got := invalidated(); !slices.Contains(got, blk.Id) {
		t.Fatalf("the heartbeat after the delete invalidated %v, not the deleted block %d", got, blk.Id)
	}
}

// largeNode registers node n1 on a manager and returns the node's full
// block report of LOGBOOK_BENCH_NODE_REPLICAS replicas (default
// 1,000,000) of block ids ahead of the metadata, which are kept: every
// heartbeat finds nothing to invalidate, as in a steady state.
func largeNode(b *testing.B) (*testEnv, []StorageReplicas) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("LOGBOOK_BENCH_NODE_REPLICAS")); err == nil && v > 0 {
		n = v
	}
	e := newTestEnv(b, Config{})
	e.register("n1", 1<<40)
	var nextID, nextGS uint64
	e.f.View(func(st *fsm.State) { nextID, nextGS = st.NextBlockID(), st.NextGS() })
	reps := make([]Replica, n)
	for i := range reps {
		reps[i] = Replica{BlockID: nextID + 100 + uint64(i), GS: nextGS + 100, NumBytes: 1 << 20, State: lr.ReplicaFinalized}
	}
	return e, []StorageReplicas{{StorageID: "s1", Replicas: reps}}
}

// BenchmarkHeartbeatLargeNode: one heartbeat at the leader from a node
// holding a million replicas (largeNode), out of safe mode. It also
// reports the slowest heartbeat (max-beat-ms) and the longest another
// goroutine waited for the soft state's lock meanwhile (max-wait-ms: how
// long every other node's heartbeats and reports could be held up).
func BenchmarkHeartbeatLargeNode(b *testing.B) {
	e, report := largeNode(b)
	if err := e.m.BlockReport(context.Background(), "n1", report); err != nil {
		b.Fatal(err)
	}
	if e.m.SafeMode() {
		b.Fatal("in safe mode after the only node's full report")
	}
	stop, waited := make(chan struct{}), make(chan time.Duration)
	go func() {
		var longest time.Duration
		for {
			select {
			case <-stop:
				waited <- longest
				return
			case <-time.After(time.Millisecond):
			}
			start := time.Now()
			e.m.soft.mu.Lock()
			longest = max(longest, time.Since(start))
			e.m.soft.mu.Unlock()
		}
	}()
	// Heartbeats come seconds apart: a pass's list built in the
	// background is ready by the next one.
	built := func() bool {
		f := &e.m.soft
		f.mu.Lock()
		defer f.mu.Unlock()
		n := f.nodes["n1"]
		return n == nil || n.next == nil || n.next.done
	}
	var slowest time.Duration
	b.ResetTimer()
	for b.Loop() {
		if !built() {
			b.StopTimer()
			for !built() {
				runtime.Gosched()
			}
			b.StartTimer()
		}
		start := time.Now()
		r, err := e.m.Heartbeat(Heartbeat{NodeID: "n1", Storages: []Storage{{ID: "s1", Capacity: 1 << 40, Free: 1 << 40}}})
		if err != nil {
			b.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
		if n := len(r.Work.Invalidate); n > 0 {
			b.Fatalf("invalidated %d replicas", n)
		}
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(slowest)/1e6, "max-beat-ms")
	b.ReportMetric(float64(<-waited)/1e6, "max-wait-ms")
}

// BenchmarkBlockReportLargeNode: the leader taking a full block report of
// a million replicas (largeNode), during which it holds its soft state's
// lock: every other node's heartbeats and reports wait.
func BenchmarkBlockReportLargeNode(b *testing.B) {
	e, report := largeNode(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := e.m.BlockReport(ctx, "n1", report); err != nil {
			b.Fatal(err)
		}
	}
}

// replicatedOnTwo registers three nodes, completes path (replication 2)
// with its block reported FINALIZED by n1 and n2, and has the leader judge
// it replicated. It returns the block's replica and a check of the
// under-replicated count after a replication cycle.
func (e *testEnv) replicatedOnTwo(path string) (Replica, func(want uint64) bool) {
	e.t.Helper()
	for i := 1; i <= 3; i++ {
		e.register(nodeID(i), uint64(i*100))
		e.heartbeat(nodeID(i))
	}
	b := e.openWithBlock(path, 2)
	rep := Replica{BlockID: b.Id, GS: b.Gs, NumBytes: 100, State: lr.ReplicaFinalized}
	e.fullReport("n1", rep)
	e.fullReport("n2", rep)
	e.fullReport("n3")
	v, err := e.m.ViewFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	last := &fsmpb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 100}
	r, err := e.m.propose(&fsmpb.CompleteFileOp{Path: path, ClientName: "w1", Last: last, ReplicatedBlocks: e.m.Replicated(v, last)})
	if err != nil || !r.Result.Closed {
		e.t.Fatalf("complete: %+v, %v", r, err)
	}
	under := func(want uint64) bool {
		e.m.replicationCycle(time.Now())
		f := e.m.locked()
		defer f.mu.Unlock()
		return !f.safeMode && uint64(len(f.repl.needed)) == want && !f.repl.dirty.has(b.Id)
	}
	if !under(0) {
		e.t.Fatal("under-replicated on n1 and n2")
	}
	return rep, under
}

// TestFullReportDropsReplica: a full report that no longer lists a
// replica takes it out of its block's count, so the block becomes
// under-replicated, and a report that lists it again puts it back (the
// blocks a report changes are marked for the replication check after the
// report is taken).
func TestFullReportDropsReplica(t *testing.T) {
	e := newTestEnv(t, Config{})
	rep, under := e.replicatedOnTwo("/drop")
	e.fullReport("n1")
	if !under(1) {
		t.Fatal("not under-replicated after n1's report without it")
	}
	e.fullReport("n1", rep)
	if !under(0) {
		t.Fatal("not replicated again after n1's report with it")
	}
}

// TestFullReportMarksOnlyChanges: a full report marks for the
// replication check the blocks whose replica on the node it changed (a
// new one, another GS, length, state or storage, or one no longer
// listed), and not those it lists as they were: a large node's periodic
// report must not queue every block it holds ahead of those that need a
// check.
func TestFullReportMarksOnlyChanges(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.register("n1", 100)
	rep := func(id, gs uint64, n int64, state lr.ReplicaState) Replica {
		return Replica{BlockID: id, GS: gs, NumBytes: n, State: state}
	}
	const fin, rbw = lr.ReplicaFinalized, lr.ReplicaRBW
	const same, newGS, grown, finalized, dropped, added = 1001, 1002, 1003, 1004, 1005, 1006
	e.fullReport("n1", rep(same, 7, 100, fin), rep(newGS, 7, 100, fin), rep(grown, 7, 100, rbw),
		rep(finalized, 7, 100, rbw), rep(dropped, 7, 100, fin))
	f := e.m.locked()
	f.repl.dirty = idQueue{}
	f.mu.Unlock()

	e.fullReport("n1", rep(same, 7, 100, fin), rep(newGS, 8, 100, fin), rep(grown, 7, 200, rbw),
		rep(finalized, 7, 100, fin), rep(added, 7, 100, fin))
	f = e.m.locked()
	got := slices.Sorted(maps.Keys(f.repl.dirty.set))
	f.mu.Unlock()
	if want := []uint64{newGS, grown, finalized, dropped, added}; !slices.Equal(got, want) {
		t.Fatalf("marked for the check: %v, want %v (not %d, reported as it was)", got, want, same)
	}
}

// TestReregisterDropsReplicas: a node that registers again (a restart, a
// wiped disk) has its replicas forgotten until it reports in full; its
// blocks are judged without them at once, so a block it held becomes
// under-replicated even if its next report lists nothing, and is
// replicated again when a report lists it.
func TestReregisterDropsReplicas(t *testing.T) {
	e := newTestEnv(t, Config{})
	rep, under := e.replicatedOnTwo("/rereg")
	e.register("n1", 100)
	e.fullReport("n1")
	if !under(1) {
		t.Fatal("not under-replicated after n1 registered again and reported nothing")
	}
	e.fullReport("n1", rep)
	if !under(0) {
		t.Fatal("not replicated again after n1's report with it")
	}
}

// TestSweepBuiltInBackground: a node with more than sweepBuildMin replicas
// has each pass's list built in the background, a chunk per hold of the
// lock, while its replicas are reported and deleted (as incremental
// reports do, under the lock) between and during the holds. Every pass
// checks each replica held and untouched from the heartbeat that takes
// the list to the pass's end, and only held ones; the build lets go of
// the lock between chunks; a full report or a new term abandons the list
// being built.
func TestSweepBuiltInBackground(t *testing.T) {
	defer func(m, c int) { sweepBuildMin, sweepBuildChunk = m, c }(sweepBuildMin, sweepBuildChunk)
	sweepBuildMin, sweepBuildChunk = 50, 7
	const limit = 40
	f := &fsSoft{}
	f.mu.Lock()
	f.reset(1, time.Now(), time.Minute)
	n := f.node("n1")
	initial := func(gs uint64) map[uint64]softReplica {
		reps := map[uint64]softReplica{}
		for id := uint64(1); id <= 300; id++ {
			reps[id] = softReplica{gs: gs}
		}
		return reps
	}
	reps := initial(1)
	n.setReplicas(reps, countReplicas(reps))
	f.mu.Unlock()

	// The mutator: one report or delete per hold of the lock, as
	// incremental reports make them. touched and partial are under f.mu.
	touched := map[uint64]bool{}
	partial := false
	stop := make(chan struct{})
	mutatorDone := make(chan struct{})
	go func() {
		defer close(mutatorDone)
		rng := rand.New(rand.NewPCG(9, 10))
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.mu.Lock()
			if b := n.next; b != nil && !b.done && len(b.ids) > 0 && len(b.ids) < len(n.replicas)-sweepBuildChunk {
				partial = true
			}
			id := uint64(1 + rng.IntN(400))
			touched[id] = true
			if rng.IntN(2) == 0 {
				f.deleteReplica(n, id)
			} else {
				f.setReplica(n, id, softReplica{gs: 2})
				n.markRecheck(id)
			}
			f.mu.Unlock()
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-mutatorDone }()

	deadline := time.Now().Add(30 * time.Second)
	var held map[uint64]softReplica
	seen := map[uint64]bool{}
	passes := 0
	for passes < 40 {
		if time.Now().After(deadline) {
			t.Fatalf("%d passes in 30 s", passes)
		}
		f.mu.Lock()
		starts := n.sweepAt >= len(n.sweep) && n.next != nil && n.next.done
		if starts {
			held, seen = maps.Clone(n.replicas), map[uint64]bool{}
			clear(touched)
		}
		checks := f.takeChecksLocked(n, limit)
		for _, c := range checks {
			if _, ok := n.replicas[c.id]; !ok {
				f.mu.Unlock()
				t.Fatalf("pass %d: checked %d, not held", passes, c.id)
			}
			seen[c.id] = true
		}
		ended := held != nil && n.sweepAt >= len(n.sweep)
		if ended {
			for id := range held {
				if _, still := n.replicas[id]; still && !touched[id] && !seen[id] {
					f.mu.Unlock()
					t.Fatalf("pass %d: replica %d, held throughout, not checked", passes, id)
				}
			}
			held = nil
			passes++
			switch passes % 10 {
			case 4: // a full report while the next list is being built
				if n.next == nil {
					f.mu.Unlock()
					t.Fatalf("pass %d ended with no next list being built", passes)
				}
				b := n.next
				reps := initial(3)
				n.setReplicas(reps, countReplicas(reps))
				if !b.stop || n.next != nil {
					f.mu.Unlock()
					t.Fatalf("a full report left the list being built in use")
				}
			case 9: // a new term
				b := n.next
				f.reset(uint64(2+passes), time.Now(), time.Minute)
				if b == nil || !b.stop {
					f.mu.Unlock()
					t.Fatalf("a new term left the list being built in use")
				}
				n = f.node("n1")
				reps := initial(4)
				n.setReplicas(reps, countReplicas(reps))
			}
		}
		f.mu.Unlock()
		for range 20 { // heartbeats come apart: the mutator and the build run between them
			runtime.Gosched()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n.stopBuild()
	if !partial {
		t.Fatal("no list was ever seen part-built: the build does not let go of the lock between chunks")
	}
}
