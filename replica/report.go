package replica

import (
	"slices"
	"sync"
)

// BlockReport returns the full block report of a pool, one entry per
// volume (failed volumes flagged, with no replicas): FINALIZED, RBW and RWR
// replicas as themselves, RUR as its original, never TEMPORARY (design §R6.1).
func (d *Dataset) BlockReport(bpid string) ([]StorageBlockReport, error) {
	var out []StorageBlockReport
	err := d.view("block-report", bpid, 0, func(p *blockPool, _ *replica) error {
		out = make([]StorageBlockReport, len(d.vols))
		for i, v := range d.vols {
			out[i] = StorageBlockReport{StorageID: v.storageID, StorageType: v.typ, Failed: v.failed}
		}
		counts := make([]int, len(d.vols))
		for _, r := range p.replicas {
			counts[r.vol.idx]++
		}
		for i := range out {
			out[i].Replicas = make([]ReportedReplica, 0, counts[i])
		}
		for _, r := range p.replicas {
			if r.state == StateTemporary {
				continue
			}
			out[r.vol.idx].Replicas = append(out[r.vol.idx].Replicas, r.reported())
		}
		return nil
	})
	return out, err
}

// ChangeKind is the kind of an incremental block report entry.
type ChangeKind uint8

const (
	ChangeReceiving ChangeKind = iota + 1 // RECEIVING_BLOCK: createRbw, append, recoverAppend
	ChangeReceived                        // RECEIVED_BLOCK: finalized (finalize, recoverClose, recovery)
	ChangeDeleted                         // DELETED_BLOCK: files deleted (or moved to trash)
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeReceiving:
		return "RECEIVING"
	case ChangeReceived:
		return "RECEIVED"
	case ChangeDeleted:
		return "DELETED"
	}
	return "?"
}

// Change is one incremental block report entry.
type Change struct {
	Kind      ChangeKind
	Pool      string
	StorageID string
	Replica   ReportedReplica
}

// Subscription receives every Change published after Subscribe, in order.
// It never blocks the dataset: changes queue until drained, up to
// Config.ChangeQueueLimit; past it the queue is dropped and Drain reports
// overflow (the consumer should send a full block report instead).
type Subscription struct {
	d        *Dataset
	mu       sync.Mutex
	pending  []Change
	overflow bool
	ready    chan struct{}
	closed   bool
}

// Subscribe starts a subscription to incremental changes.
func (d *Dataset) Subscribe() *Subscription {
	s := &Subscription{d: d, ready: make(chan struct{}, 1)}
	d.subMu.Lock()
	d.subs[s] = struct{}{}
	d.subMu.Unlock()
	return s
}

// Ready receives a value when changes are pending (level-triggered: drain
// after every receive).
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Drain returns and clears the pending changes; overflowed is true if
// changes were dropped since the last Drain.
func (s *Subscription) Drain() (changes []Change, overflowed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changes, overflowed = s.pending, s.overflow
	s.pending, s.overflow = nil, false
	return changes, overflowed
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.d.subMu.Lock()
	delete(s.d.subs, s)
	s.closeLocked()
	s.d.subMu.Unlock()
}

func (s *Subscription) closeLocked() {
	s.mu.Lock()
	s.closed = true
	s.pending = nil
	s.mu.Unlock()
}

func (s *Subscription) push(c Change, limit int) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if len(s.pending) >= limit {
		s.pending, s.overflow = nil, true
	} else {
		s.pending = append(s.pending, c)
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// publish sends c to every subscription. Called with d.mu held (read or
// write) so changes of one replica are published in order.
func (d *Dataset) publish(c Change) {
	d.subMu.Lock()
	for s := range d.subs {
		s.push(c, d.cfg.ChangeQueueLimit)
	}
	d.subMu.Unlock()
}

// CacheReport lists the ids of bpid's replicas held in locked memory, in
// increasing order (HDFS's cache report: the coordinator compares it with
// the cache directives it sent).
func (d *Dataset) CacheReport(bpid string) ([]uint64, error) {
	var ids []uint64
	err := d.view("cache-report", bpid, 0, func(p *blockPool, _ *replica) error {
		for id, r := range p.replicas {
			if r.cached != nil {
				ids = append(ids, id)
			}
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}
