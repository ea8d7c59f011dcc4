package fsm

// removalFeedLen is how many removed block ids the feed keeps. A reader
// that falls further behind learns that it missed some (complete false).
const removalFeedLen = 1 << 16

// blockRemovals is a bounded feed of the block ids the state machine
// removed (a file deleted, a block abandoned, an empty last block dropped
// by recovery), for the leader, which has their replicas invalidated at
// once, as HDFS queues a deleted file's replicas for invalidation when the
// file goes rather than waiting for the nodes' next reports. It is this
// member's bookkeeping, not state: not hashed, not in snapshots, and a
// restore empties it. Written under the FSM's write lock, read under its
// read lock.
type blockRemovals struct {
	ring []uint64 // allocated at the first removal
	// next is the feed position of the next removal (removals ever);
	// floor is the first position still readable (a restore raises it).
	next, floor uint64
}

func (r *blockRemovals) add(id uint64) {
	if r.ring == nil {
		r.ring = make([]uint64, removalFeedLen)
	}
	r.ring[r.next%removalFeedLen] = id
	r.next++
}

// since returns the ids removed at feed positions from onwards (at most
// limit), the position after the last one returned, and whether nothing
// between from and that position was lost (overwritten or restored away).
func (r *blockRemovals) since(from uint64, limit int) (ids []uint64, next uint64, complete bool) {
	if r == nil {
		return nil, from, true
	}
	complete = true
	lo := max(r.floor, r.next-min(r.next, removalFeedLen))
	if from < lo {
		from, complete = lo, false
	}
	if from > r.next { // a cursor from before a restore that emptied the feed
		from = r.next
	}
	n := min(r.next-from, uint64(max(limit, 0)))
	ids = make([]uint64, 0, n)
	for p := from; p < from+n; p++ {
		ids = append(ids, r.ring[p%removalFeedLen])
	}
	return ids, from + n, complete
}

// RemovedBlocks reads the removal feed: the ids of blocks removed at feed
// positions from onwards (at most limit), the position to read from next,
// and false if some removals after from were lost to the feed's bound or
// to a restore (the caller must then find their replicas another way).
func (s *State) RemovedBlocks(from uint64, limit int) (ids []uint64, next uint64, complete bool) {
	return s.ns.removals.since(from, limit)
}

// RemovalFeedEnd is the feed position of the next removal: a reader that
// starts there sees the removals from now on.
func (s *State) RemovalFeedEnd() uint64 {
	if s.ns.removals == nil {
		return 0
	}
	return s.ns.removals.next
}
