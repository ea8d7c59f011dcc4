package blocks

import "iter"

// The leader's block → holders index, the analogue of HDFS's BlocksMap:
// for every block, the nodes that reported a replica of it this term, so
// that judging a block (its good replicas, a transfer's source, the other
// holders to recheck) costs its replicas, not a pass over every node. A
// second index of the same kind lists the nodes caching each block
// (cache.go).
//
// Invariant (TestHolderIndex, checkHolderIndex in the tests): a node whose
// replicas hold block id, or whose full report being installed does
// (incoming), is listed under id; once no report is being installed, a
// listed node holds it. Readers go through holdersOf, which looks each
// listed node's replica up, so a node listed ahead of its report's swap
// is skipped until then.

// nodeSet maps block ids to sets of nodes, each node as its index in
// fsSoft.byIndex + 1: up to four inline (holderSet; 0 is a free slot),
// the rest of a block's in more. The inline sets hold no pointer, so the
// collector does not scan their map; the holder index costs ~55 bytes a
// block (measured with three holders each).
type nodeSet struct {
	inline map[uint64]holderSet
	more   map[uint64][]int32
}

type holderSet [4]int32

func newNodeSet() nodeSet {
	return nodeSet{inline: map[uint64]holderSet{}, more: map[uint64][]int32{}}
}

// add puts node x in block id's set.
func (s nodeSet) add(id uint64, x int32) {
	h := s.inline[id]
	free := -1
	for i, y := range h {
		switch {
		case y == x:
			return
		case y == 0 && free < 0:
			free = i
		}
	}
	more := s.more[id]
	for _, y := range more {
		if y == x {
			return
		}
	}
	if free >= 0 {
		h[free] = x
		s.inline[id] = h
		return
	}
	s.more[id] = append(more, x)
}

// remove takes node x out of block id's set.
func (s nodeSet) remove(id uint64, x int32) {
	h, ok := s.inline[id]
	if !ok {
		return
	}
	more := s.more[id]
	found := false
	for i, y := range h {
		if y == x {
			h[i], found = 0, true
			if len(more) > 0 {
				h[i] = more[len(more)-1]
				more = more[:len(more)-1]
			}
			break
		}
	}
	if !found {
		for i, y := range more {
			if y == x {
				// A new slice: each may be walking the old one.
				more = append(append(make([]int32, 0, len(more)-1), more[:i]...), more[i+1:]...)
				break
			}
		}
	}
	switch {
	case len(more) > 0:
		s.more[id] = more
	case s.more[id] != nil:
		delete(s.more, id)
	}
	if h == (holderSet{}) {
		delete(s.inline, id)
	} else {
		s.inline[id] = h
	}
}

// each yields the nodes in block id's set. The caller may remove nodes
// while it walks.
func (s nodeSet) each(id uint64) iter.Seq[int32] {
	return func(yield func(int32) bool) {
		h, more := s.inline[id], s.more[id]
		for _, x := range h {
			if x != 0 && !yield(x) {
				return
			}
		}
		for _, x := range more {
			if !yield(x) {
				return
			}
		}
	}
}

// holder is one node holding a replica of a block.
type holder struct {
	id      string
	node    *nodeSoft
	replica softReplica
}

// indexHolder lists node n under block id.
func (f *fsSoft) indexHolder(id uint64, n *nodeSoft) { f.holders.add(id, n.index+1) }

// unindexHolder takes node n off block id's holders unless it still holds
// a replica of it, reported or in the full report it is installing.
func (f *fsSoft) unindexHolder(id uint64, n *nodeSoft) {
	if _, ok := n.replicas[id]; ok {
		return
	}
	if _, ok := n.incoming[id]; ok {
		return
	}
	f.holders.remove(id, n.index+1)
}

// holdersOf yields the nodes holding a replica of block id, with it. The
// caller may change the index while it walks (drop a replica it yielded).
func (f *fsSoft) holdersOf(id uint64) iter.Seq[holder] {
	return func(yield func(holder) bool) {
		for x := range f.holders.each(id) {
			n := f.byIndex[x-1]
			if r, ok := n.replicas[id]; ok && !yield(holder{id: n.id, node: n, replica: r}) {
				return
			}
		}
	}
}

// setReplica records node n's replica of block id (an incremental
// report).
func (f *fsSoft) setReplica(n *nodeSoft, id uint64, r softReplica) {
	if was, ok := n.replicas[id]; ok {
		n.byState.add(was.state, -1)
	}
	n.byState.add(r.state, 1)
	n.replicas[id] = r
	f.indexHolder(id, n)
}

// deleteReplica forgets node n's replica of block id.
func (f *fsSoft) deleteReplica(n *nodeSoft, id uint64) {
	if was, ok := n.replicas[id]; ok {
		n.byState.add(was.state, -1)
	}
	delete(n.replicas, id)
	f.unindexHolder(id, n)
}
