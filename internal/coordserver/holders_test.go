package coordserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// checkHolderIndex checks the holder index against the nodes' replicas
// (holders.go): every replica is listed, and every incoming one once
// indexed (indexed: no report is midway through being indexed); with no
// report being installed, every listed node holds its block; no node is
// listed twice; and holdersOf yields exactly the nodes that hold the
// block.
func (f *fsSoft) checkHolderIndex(indexed bool) error {
	listed := map[uint64][]int32{}
	for id, h := range f.holders {
		if h == (holderSet{}) {
			return fmt.Errorf("block %d: an empty inline set kept", id)
		}
		for _, x := range h {
			if x != 0 {
				listed[id] = append(listed[id], x)
			}
		}
	}
	for id, more := range f.moreHolders {
		if len(more) == 0 {
			return fmt.Errorf("block %d: an empty overflow kept", id)
		}
		if _, ok := f.holders[id]; !ok {
			return fmt.Errorf("block %d: overflow %v without an inline set", id, more)
		}
		listed[id] = append(listed[id], more...)
	}
	installing := false
	for i, n := range f.byIndex {
		if n.index != int32(i) || f.nodes[n.id] != n {
			return fmt.Errorf("node %q at index %d has index %d", n.id, i, n.index)
		}
		installing = installing || n.incoming != nil
		for k, reps := range []map[uint64]softReplica{n.replicas, n.incoming} {
			if k == 1 && !indexed {
				break
			}
			for id := range reps {
				if !slices.Contains(listed[id], n.index+1) {
					return fmt.Errorf("node %s holds block %d, not listed (%v)", n.id, id, listed[id])
				}
			}
		}
	}
	for id, xs := range listed {
		if len(slices.Compact(slices.Sorted(slices.Values(xs)))) != len(xs) {
			return fmt.Errorf("block %d: a node listed twice: %v", id, xs)
		}
		var want []string
		for _, x := range xs {
			n := f.byIndex[x-1]
			_, held := n.replicas[id]
			if !held && !installing {
				return fmt.Errorf("node %s listed under block %d it does not hold", n.id, id)
			}
			if held {
				want = append(want, n.id)
			}
		}
		var got []string
		for h := range f.holdersOf(id) {
			if h.replica != f.nodes[h.id].replicas[id] {
				return fmt.Errorf("block %d on %s: yielded %+v", id, h.id, h.replica)
			}
			got = append(got, h.id)
		}
		if slices.Sort(want); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			return fmt.Errorf("block %d: holdersOf yielded %v, want %v", id, got, want)
		}
	}
	return nil
}

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
			n.setReplicas(reps)
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
		overflowed = overflowed || len(f.moreHolders) > 0
	}
	if !overflowed {
		t.Fatal("no block had more than four holders: the overflow went untested")
	}
}

// TestHolderIndexReports: full and incremental reports from three nodes
// at once (a node's incremental reports racing its full ones), and one
// node registering again, leave the leader's holder index exact (every
// replica listed, every listed node holding it).
func TestHolderIndexReports(t *testing.T) {
	// Small chunks: a node's incremental reports land between the
	// chunks of its full report's indexing.
	defer func(n int) { lookupChunk = n }(lookupChunk)
	lookupChunk = 16
	e := newFSEnv(t, func(int, *Config) {})
	e.registerNodes(3)
	var wg sync.WaitGroup
	replica := func(rng *rand.Rand) *pb.ReportedReplica {
		return &pb.ReportedReplica{BlockId: 1 + rng.Uint64N(3000), Gs: 1, NumBytes: 1, State: pb.ReplicaState_REPLICA_STATE_FINALIZED}
	}
	for i := 1; i <= 3; i++ {
		node := nodeID(i)
		wg.Add(2)
		go func() { // full reports
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for range 6 {
				var reps []*pb.ReportedReplica
				for range 2000 {
					reps = append(reps, replica(rng))
				}
				if _, err := e.nl.BlockReport(context.Background(), &pb.NodeBlockReportRequest{NodeId: node, Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}}); err != nil {
					t.Errorf("full report of %s: %v", node, err)
					return
				}
			}
		}()
		go func() { // incremental reports of the same node meanwhile
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 10))
			for range 25 {
				var changes []*pb.IncrementalChange
				for range 200 {
					c := &pb.IncrementalChange{StorageId: "s1", Change: pb.ReplicaChange_REPLICA_CHANGE_RECEIVED, Replica: replica(rng)}
					if rng.IntN(2) == 0 {
						c.Change = pb.ReplicaChange_REPLICA_CHANGE_DELETED
					}
					changes = append(changes, c)
				}
				if _, err := e.nl.IncrementalReport(context.Background(), &pb.NodeIncrementalReportRequest{NodeId: node, Changes: changes}); err != nil {
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
			f := e.tc.server(e.tc.waitLeader()).fsLocked()
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
		f := e.tc.server(e.tc.waitLeader()).fsLocked()
		defer f.mu.Unlock()
		if err := f.checkHolderIndex(true); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(f.holders) == 0 {
			t.Fatalf("%s: the index is empty", when)
		}
	}
	check("after the reports")
	e.reregister("n1")
	check("after n1 registered again")
}

// BenchmarkCheckBlocks: the replication monitor judging blocks of three
// replicas each, spread over LOGBOOK_BENCH_NODES live nodes (default 100),
// 100,000 blocks per op in holds of lookupChunk, as a cycle does (the
// soft state only: no state machine lookups). Before the holder index
// each block's check looked at every node.
func BenchmarkCheckBlocks(b *testing.B) {
	nodes := 100
	if v, err := strconv.Atoi(os.Getenv("LOGBOOK_BENCH_NODES")); err == nil && v >= 3 {
		nodes = v
	}
	const blocks = 100_000
	tc := newTestCluster(b, 1)
	s := tc.server(tc.waitLeader())
	cfg := s.fsCfg()
	now := time.Now()
	infos := make([]blockInfo, blocks)
	f := s.fsLocked()
	for i := range nodes {
		f.node(nodeID(i + 1)).lastHeartbeat = now
	}
	for i := range infos {
		id := uint64(i + 1)
		infos[i] = blockInfo{block: &pb.BlockRecord{Id: id, Gs: 1, NumBytes: 1 << 20, State: pb.BlockState_BLOCK_STATE_COMPLETE}, replication: 3}
		for k := range 3 {
			f.setReplica(f.nodes[nodeID(1+(i+k)%nodes)], id, softReplica{storage: "s1", gs: 1, numBytes: 1 << 20, state: pb.ReplicaState_REPLICA_STATE_FINALIZED})
		}
	}
	f.mu.Unlock()
	b.ResetTimer()
	for b.Loop() {
		for chunk := range slices.Chunk(infos, lookupChunk) {
			f := s.fsLocked()
			for _, info := range chunk {
				s.checkBlockLocked(f, info, now, cfg)
			}
			f.mu.Unlock()
		}
	}
	b.StopTimer()
	f = s.fsLocked()
	defer f.mu.Unlock()
	if len(f.repl.needed) != 0 || len(f.repl.missing) != 0 {
		b.Fatalf("%d blocks needed, %d missing: want all replicated", len(f.repl.needed), len(f.repl.missing))
	}
}
