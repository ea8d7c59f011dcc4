package coordserver

import "iter"

// The leader's block → holders index, the analogue of HDFS's BlocksMap:
// for every block, the nodes that reported a replica of it this term, so
// that judging a block (its good replicas, a transfer's source, the other
// holders to recheck) costs its replicas, not a pass over every node.
//
// Invariant (TestHolderIndex, checkHolderIndex in the tests): a node whose
// replicas hold block id, or whose full report being installed does
// (incoming), is listed under id; once no report is being installed, a
// listed node holds it. Readers go through holdersOf, which looks each
// listed node's replica up, so a node listed ahead of its report's swap
// is skipped until then.

// holderSet lists up to four holders of a block inline, each as its
// node's index + 1 (0: a free slot); a block with more keeps the rest in
// fsSoft.moreHolders. The inline sets hold no pointer, so the collector
// does not scan their map; the index costs ~55 bytes a block (measured
// with three holders each).
type holderSet [4]int32

// holder is one node holding a replica of a block.
type holder struct {
	id      string
	node    *nodeSoft
	replica softReplica
}

// indexHolder lists node n under block id.
func (f *fsSoft) indexHolder(id uint64, n *nodeSoft) {
	x := n.index + 1
	h := f.holders[id]
	free := -1
	for i, y := range h {
		switch {
		case y == x:
			return
		case y == 0 && free < 0:
			free = i
		}
	}
	more := f.moreHolders[id]
	for _, y := range more {
		if y == x {
			return
		}
	}
	if free >= 0 {
		h[free] = x
		f.holders[id] = h
		return
	}
	f.moreHolders[id] = append(more, x)
}

// unindexHolder takes node n off block id's holders unless it still holds
// a replica of it, reported or in the full report it is installing.
func (f *fsSoft) unindexHolder(id uint64, n *nodeSoft) {
	if _, ok := n.replicas[id]; ok {
		return
	}
	if _, ok := n.incoming[id]; ok {
		return
	}
	x := n.index + 1
	h, ok := f.holders[id]
	if !ok {
		return
	}
	more := f.moreHolders[id]
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
				// A new slice: holdersOf may be walking the old one.
				more = append(append(make([]int32, 0, len(more)-1), more[:i]...), more[i+1:]...)
				break
			}
		}
	}
	switch {
	case len(more) > 0:
		f.moreHolders[id] = more
	case f.moreHolders[id] != nil:
		delete(f.moreHolders, id)
	}
	if h == (holderSet{}) {
		delete(f.holders, id)
	} else {
		f.holders[id] = h
	}
}

// holdersOf yields the nodes holding a replica of block id, with it. The
// caller may change the index while it walks (drop a replica it yielded).
func (f *fsSoft) holdersOf(id uint64) iter.Seq[holder] {
	return func(yield func(holder) bool) {
		h, more := f.holders[id], f.moreHolders[id]
		for _, x := range h {
			if x != 0 && !f.yieldHolder(id, x, yield) {
				return
			}
		}
		for _, x := range more {
			if !f.yieldHolder(id, x, yield) {
				return
			}
		}
	}
}

func (f *fsSoft) yieldHolder(id uint64, x int32, yield func(holder) bool) bool {
	n := f.byIndex[x-1]
	r, ok := n.replicas[id]
	return !ok || yield(holder{id: n.id, node: n, replica: r})
}

// setReplica records node n's replica of block id (an incremental
// report).
func (f *fsSoft) setReplica(n *nodeSoft, id uint64, r softReplica) {
	n.replicas[id] = r
	f.indexHolder(id, n)
}

// deleteReplica forgets node n's replica of block id.
func (f *fsSoft) deleteReplica(n *nodeSoft, id uint64) {
	delete(n.replicas, id)
	f.unindexHolder(id, n)
}
