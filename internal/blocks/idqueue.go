package blocks

// idQueue is a set of block ids that hands them out in the order they were
// added, each once: the replication check's dirty blocks and a node's
// rechecks. An id taken stays in the set until done, so an add meanwhile
// does not queue it again (its coming check sees the change). Oldest first
// bounds an id's wait by the ids queued before it, where taking a bounded
// number from a map would leave some waiting indefinitely.
type idQueue struct {
	set   map[uint64]struct{}
	order []uint64 // the ids not taken yet, oldest first
}

// add queues id unless it is in the set already.
func (q *idQueue) add(id uint64) {
	if _, in := q.set[id]; in {
		return
	}
	if q.set == nil {
		q.set = map[uint64]struct{}{}
	}
	q.set[id] = struct{}{}
	q.order = append(q.order, id)
}

// take returns up to n ids, oldest first, off the queue (not out of the
// set).
func (q *idQueue) take(n int) []uint64 {
	n = min(n, len(q.order))
	ids := q.order[:n:n]
	// The taken head is left behind: the next add that outgrows the
	// array copies only what is still queued.
	if q.order = q.order[n:]; len(q.order) == 0 {
		q.order = nil
	}
	return ids
}

// has reports whether id is in the set.
func (q *idQueue) has(id uint64) bool {
	_, in := q.set[id]
	return in
}

// done takes id out of the set.
func (q *idQueue) done(id uint64) { delete(q.set, id) }
