package blocks

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// CheckIndexes checks the holder and cachers indexes against the nodes'
// replicas and cache state (holders.go), for tests and debugging: it
// walks all of the soft state under its lock.
func (m *Manager) CheckIndexes() error {
	f := m.locked()
	defer f.mu.Unlock()
	return errors.Join(f.checkHolderIndex(true), f.checkCacherIndex())
}

// checkHolderIndex checks the holder index against the nodes' replicas
// (holders.go): every replica is listed, and every incoming one once
// indexed (indexed: no report is midway through being indexed); with no
// report being installed, every listed node holds its block; no node is
// listed twice; and holdersOf yields exactly the nodes that hold the
// block.
func (f *fsSoft) checkHolderIndex(indexed bool) error {
	listed := map[uint64][]int32{}
	for id, h := range f.holders.inline {
		if h == (holderSet{}) {
			return fmt.Errorf("block %d: an empty inline set kept", id)
		}
		for _, x := range h {
			if x != 0 {
				listed[id] = append(listed[id], x)
			}
		}
	}
	for id, more := range f.holders.more {
		if len(more) == 0 {
			return fmt.Errorf("block %d: an empty overflow kept", id)
		}
		if _, ok := f.holders.inline[id]; !ok {
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

// checkCacherIndex checks the cachers index against the nodes' cache
// state: a node whose report lists a block cached, or with a command for
// it pending, is listed under it, and a listed node has one or the other.
func (f *fsSoft) checkCacherIndex() error {
	for _, n := range f.byIndex {
		for _, ids := range [][]uint64{slices.Collect(maps.Keys(n.cache.cached)), slices.Collect(maps.Keys(n.cache.pending))} {
			for _, id := range ids {
				if !slices.Contains(slices.Collect(f.cachers.each(id)), n.index+1) {
					return fmt.Errorf("node %s caches block %d, not listed", n.id, id)
				}
			}
		}
	}
	for id := range f.cachers.inline {
		for x := range f.cachers.each(id) {
			n := f.byIndex[x-1]
			if _, pending := n.cache.pending[id]; !pending && !n.cache.has(id) {
				return fmt.Errorf("node %s listed as caching block %d: neither cached nor pending", n.id, id)
			}
		}
	}
	return nil
}
