package blocks

import (
	"cmp"
	"context"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// TestHolderIndex drives the index through random incremental changes,
// drops and full-report installs (index ahead, swap, then forget the
// dropped) on up to nine nodes over a few blocks — so that blocks often
// have more than four holders — checking it after every step.
func TestHolderIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := &fsSoft{}
	f.reset(1, time.Now(), time.Minute)
	overflowed := false
	for step := 0; step < 20000; step++ {
		n := f.node(nodeID(1 + rng.IntN(9)))
		id := uint64(1 + rng.IntN(12))
		switch k := rng.IntN(10); {
		case k < 4:
			f.setReplica(n, id, softReplica{gs: uint64(step)})
		case k < 7:
			f.deleteReplica(n, id)
		case k < 8:
			f.dropReplicaLocked(n, id, 1, 0)
		default:
			// A full report: indexed ahead, with incremental changes
			// in between, swapped in, then the dropped ones forgotten.
			reps := map[uint64]softReplica{}
			for range rng.IntN(8) {
				reps[uint64(1+rng.IntN(12))] = softReplica{gs: uint64(step)}
			}
			n.incoming = reps
			for bid := range reps {
				f.indexHolder(bid, n)
				if rng.IntN(3) == 0 {
					other := uint64(1 + rng.IntN(12))
					if rng.IntN(2) == 0 {
						f.deleteReplica(n, other)
					} else {
						f.setReplica(n, other, softReplica{gs: 7})
					}
				}
				if err := f.checkHolderIndex(false); err != nil {
					t.Fatalf("step %d, indexing a report: %v", step, err)
				}
			}
			if err := f.checkHolderIndex(true); err != nil {
				t.Fatalf("step %d, before a report's swap: %v", step, err)
			}
			old := n.replicas
			n.setReplicas(reps, countReplicas(reps))
			n.incoming = nil
			for bid := range old {
				if _, ok := reps[bid]; !ok {
					f.unindexHolder(bid, n)
				}
			}
		}
		if err := f.checkHolderIndex(true); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		overflowed = overflowed || len(f.holders.more) > 0
	}
	if !overflowed {
		t.Fatal("no block had more than four holders: the overflow went untested")
	}
}

// TestCacherIndex drives the cachers index through random cache reports,
// cache and uncache commands, expiries and dead nodes on up to nine
// nodes, checking it after every step.
func TestCacherIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := &fsSoft{}
	f.reset(1, time.Now(), time.Minute)
	for step := 0; step < 20000; step++ {
		n := f.node(nodeID(1 + rng.IntN(9)))
		id := uint64(1 + rng.IntN(12))
		switch k := rng.IntN(10); {
		case k < 3:
			r := CacheReport{Capacity: 1 << 30}
			for range rng.IntN(6) {
				r.BlockIDs = append(r.BlockIDs, uint64(1+rng.IntN(12)))
			}
			f.setCacheReport(n, r)
		case k < 7:
			f.queueCache(n, &fsmpb.BlockRef{Id: id, NumBytes: 1}, rng.IntN(2) == 0)
		case k < 9:
			if _, ok := n.cache.pending[id]; ok {
				delete(n.cache.pending, id)
				f.unindexCacher(id, n)
			}
		default:
			f.forgetCache(n)
		}
		if err := f.checkCacherIndex(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// TestHolderIndexReports: full and incremental reports from three nodes
// at once (a node's incremental reports racing its full ones), and one
// node registering again, leave the leader's holder index exact (every
// replica listed, every listed node holding it).
func TestHolderIndexReports(t *testing.T) {
	// Small chunks: a node's incremental reports land between the
	// chunks of its full report's indexing.
	e := newTestEnv(t, Config{LookupChunk: 16})
	for i := 1; i <= 3; i++ {
		e.register(nodeID(i), uint64(i*100))
	}
	var wg sync.WaitGroup
	replica := func(rng *rand.Rand) Replica {
		return Replica{BlockID: 1 + rng.Uint64N(3000), GS: 1, NumBytes: 1, State: lr.ReplicaFinalized}
	}
	for i := 1; i <= 3; i++ {
		node := nodeID(i)
		wg.Add(2)
		go func() { // full reports
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for range 6 {
				var reps []Replica
				for range 2000 {
					reps = append(reps, replica(rng))
				}
				if err := e.m.BlockReport(context.Background(), node, []StorageReplicas{{StorageID: "s1", Replicas: reps}}); err != nil {
					t.Errorf("full report of %s: %v", node, err)
					return
				}
			}
		}()
		go func() { // incremental reports of the same node meanwhile
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 10))
			for range 25 {
				var changes []Change
				for range 200 {
					changes = append(changes, Change{StorageID: "s1", Deleted: rng.IntN(2) == 0, Replica: replica(rng)})
				}
				if err := e.m.IncrementalReport(node, changes); err != nil {
					t.Errorf("incremental report of %s: %v", node, err)
					return
				}
			}
		}()
	}
	// Meanwhile, at every hold of the lock, each replica is listed.
	done := make(chan struct{})
	checked := make(chan int)
	go func() {
		n := 0
		defer func() { checked <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			f := e.m.locked()
			for _, node := range f.byIndex {
				for id := range node.replicas {
					if !slices.ContainsFunc(slices.Collect(f.holdersOf(id)), func(h holder) bool { return h.node == node }) {
						t.Errorf("check %d: node %s holds block %d, not listed", n, node.id, id)
						f.mu.Unlock()
						return
					}
				}
			}
			f.mu.Unlock()
			n++
		}
	}()
	wg.Wait()
	close(done)
	if n := <-checked; n == 0 {
		t.Error("the index was never checked while the reports ran")
	}
	if t.Failed() {
		return
	}
	check := func(when string) {
		f := e.m.locked()
		defer f.mu.Unlock()
		if err := f.checkHolderIndex(true); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(f.holders.inline) == 0 {
			t.Fatalf("%s: the index is empty", when)
		}
	}
	check("after the reports")
	e.register("n1", 100)
	check("after n1 registered again")
}

// TestTargetPicker: the B-tree picker hands out the same targets as
// sorting every live node for each block (the way the monitor picked them
// before: eligible nodes by id, stably sorted by targeted count, then free
// space descending, the first need taken), over random nodes with tied
// free space, holders, deletions and sizes.
func TestTargetPicker(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		f := &fsSoft{}
		f.reset(1, time.Now(), time.Minute)
		var live []string
		for i := range 2 + rng.IntN(30) {
			n := f.node(nodeID(i + 1))
			n.free = uint64(rng.IntN(4)) * 100
			live = append(live, n.id)
		}
		slices.Sort(live)
		targeted := map[string]int{}
		for _, id := range live {
			if rng.IntN(3) == 0 {
				targeted[id] = rng.IntN(3)
			}
		}
		want := maps.Clone(targeted)
		p := newTargetPicker(f, live, targeted)
		for blk := range uint64(50) {
			var holders []string
			for range rng.IntN(4) {
				holders = append(holders, live[rng.IntN(len(live))])
			}
			if rng.IntN(5) == 0 {
				n := f.nodes[live[rng.IntN(len(live))]]
				n.invalidating = map[uint64]struct{}{blk: {}}
			}
			size, need := uint64(rng.IntN(350)), rng.IntN(4)
			var ref []string
			for _, nid := range live {
				_, deleting := f.nodes[nid].invalidating[blk]
				if !slices.Contains(holders, nid) && !deleting && f.nodes[nid].free >= size {
					ref = append(ref, nid)
				}
			}
			slices.SortStableFunc(ref, func(x, y string) int {
				return cmp.Or(cmp.Compare(want[x], want[y]), cmp.Compare(f.nodes[y].free, f.nodes[x].free))
			})
			ref = ref[:max(0, min(len(ref), need))]
			for _, id := range ref {
				want[id]++
			}
			if got := p.pick(blk, holders, size, need); !slices.Equal(got, ref) {
				t.Fatalf("round %d, block %d (need %d, size %d, holders %v): picked %v, want %v", round, blk, need, size, holders, got, ref)
			}
		}
	}
}

// benchSoftState fills a leader's soft state: LOGBOOK_BENCH_NODES live
// nodes (default 100) with free space, and blocks 1..blocks(nodes) with a
// FINALIZED replica (GS 1, 1 MiB) on each of replicas consecutive nodes,
// round robin. It returns the manager and the number of blocks.
func benchSoftState(b *testing.B, blocks func(nodes int) int, replicas int) (*Manager, int) {
	nodes := 100
	if v, err := strconv.Atoi(os.Getenv("LOGBOOK_BENCH_NODES")); err == nil && v >= 3 {
		nodes = v
	}
	m := newTestEnv(b, Config{}).m
	now := time.Now()
	f := m.locked()
	defer f.mu.Unlock()
	for i := range nodes {
		n := f.node(nodeID(i + 1))
		n.lastHeartbeat, n.free = now, 1<<40
	}
	nb := blocks(nodes)
	for i := range nb {
		for k := range replicas {
			f.setReplica(f.nodes[nodeID(1+(i+k)%nodes)], uint64(i+1), softReplica{storage: "s1", gs: 1, numBytes: 1 << 20, state: lr.ReplicaFinalized})
		}
	}
	return m, nb
}

func fixed(n int) func(int) int { return func(int) int { return n } }

// completeBlock is block id as the benchmarks' state machine would have
// it: COMPLETE at GS 1, 1 MiB.
func completeBlock(id uint64) *fsmpb.BlockRecord {
	return &fsmpb.BlockRecord{Id: id, Gs: 1, NumBytes: 1 << 20, State: fsmpb.BlockState_BLOCK_STATE_COMPLETE, Path: "/b"}
}

// BenchmarkCheckBlocks: the replication monitor judging 100,000 blocks
// of three replicas each (benchSoftState) per op, in holds of lookupChunk,
// as a cycle does (the soft state only: no state machine lookups). Before
// the holder index each block's check looked at every node.
func BenchmarkCheckBlocks(b *testing.B) {
	m, blocks := benchSoftState(b, fixed(100_000), 3)
	cfg, now := m.cfg, time.Now()
	infos := make([]blockInfo, blocks)
	for i := range infos {
		infos[i] = blockInfo{block: completeBlock(uint64(i + 1)), replication: 3}
	}
	b.ResetTimer()
	for b.Loop() {
		for chunk := range slices.Chunk(infos, m.lookupChunk()) {
			f := m.locked()
			for _, info := range chunk {
				m.checkBlockLocked(f, info, now, cfg)
			}
			f.mu.Unlock()
		}
	}
	b.StopTimer()
	f := m.locked()
	defer f.mu.Unlock()
	if len(f.repl.needed) != 0 || len(f.repl.missing) != 0 {
		b.Fatalf("%d blocks needed, %d missing: want all replicated", len(f.repl.needed), len(f.repl.missing))
	}
}

// BenchmarkCheckCache: the cache monitor judging 10,000 blocks of a
// directive wanting two cached replicas, each held by three nodes
// (benchSoftState) and cached on two of them already (so nothing
// changes), in one hold of the lock, as a cycle does. Before the holder
// and cachers indexes each block's check looked at every node.
func BenchmarkCheckCache(b *testing.B) {
	m, blocks := benchSoftState(b, fixed(10_000), 3)
	cfg, now := m.cfg, time.Now()
	f := m.locked()
	nodes := len(f.nodes)
	f.mu.Unlock()
	cached := make([]CacheReport, nodes)
	for i := range cached {
		cached[i] = CacheReport{Capacity: 1 << 40}
	}
	for i := range blocks {
		for k := range 2 {
			r := &cached[(i+k)%nodes]
			r.BlockIDs = append(r.BlockIDs, uint64(i+1))
		}
	}
	f = m.locked()
	for i, r := range cached {
		f.setCacheReport(f.nodes[nodeID(i+1)], r)
	}
	f.mu.Unlock()
	b.ResetTimer()
	for b.Loop() {
		f := m.locked()
		for i := range blocks {
			m.checkCacheLocked(f, uint64(i+1), cacheTarget{block: completeBlock(uint64(i + 1)), want: 2}, now, cfg)
		}
		f.mu.Unlock()
	}
	b.StopTimer()
	f = m.locked()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if len(n.cache.pending) != 0 {
			b.Fatalf("node %s has %d cache commands: want none", n.id, len(n.cache.pending))
		}
	}
}

// BenchmarkScheduleTransfers: one replication cycle's scheduling of
// ReplicationStreams × nodes / 2 blocks with two good replicas of three
// wanted (benchSoftState): a target picked per block.
func BenchmarkScheduleTransfers(b *testing.B) {
	// Every block finds a source with a stream free.
	m, blocks := benchSoftState(b, func(nodes int) int { return DefaultConfig().ReplicationStreams * nodes / 2 }, 2)
	cfg, now := m.cfg, time.Now()
	recs := map[string]*fsmpb.NodeRecord{}
	ids := make([]uint64, blocks)
	infos := map[uint64]blockInfo{}
	f := m.locked()
	for id := range f.nodes {
		recs[id] = &fsmpb.NodeRecord{Id: id, GrpcAddr: "127.0.0.1:1"}
	}
	for i := range ids {
		id := uint64(i + 1)
		ids[i] = id
		infos[id] = blockInfo{block: completeBlock(id), replication: 3}
		f.repl.needed[id] = 2
	}
	f.mu.Unlock()
	b.ResetTimer()
	for b.Loop() {
		f := m.locked()
		clear(f.repl.pending)
		for _, n := range f.nodes {
			n.transfers = nil
		}
		m.scheduleTransfersLocked(f, ids, recs, infos, now, cfg)
		if len(f.repl.pending) != blocks {
			b.Fatalf("%d transfers scheduled, want %d", len(f.repl.pending), blocks)
		}
		f.mu.Unlock()
	}
}
