package client

import (
	"context"
	"sync"
)

// session issues request seqs and tracks which are still unanswered, so
// every request can tell the FSM which results it may forget (acked_seq).
type session struct {
	id          string
	mu          sync.Mutex
	last        uint64
	outstanding map[uint64]struct{}
	low         uint64 // lowest unanswered seq (last+1 when none)
	// slots bounds the requests outstanding in one session well below the
	// results the state machine keeps per session (fsm.MaxResultsPerSession),
	// so a retry finds its result — unless all sessions together keep more
	// than fsm.MaxKeptResults, when the least recently used lose their
	// oldest and such a retry fails (FailedPrecondition) rather than being
	// applied twice.
	slots chan struct{}
}

// MaxOutstanding is how many requests one client keeps in flight at most;
// beyond it Append and Submit wait for a slot.
const MaxOutstanding = 2048

func newSession(id string) *session {
	return &session{id: id, outstanding: map[uint64]struct{}{}, low: 1, slots: make(chan struct{}, MaxOutstanding)}
}

// begin waits for a slot, issues the next seq and returns it with the
// current acked seq: every seq at or below it has been answered.
func (s *session) begin(ctx context.Context) (seq, acked uint64, err error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	seq = s.last
	s.outstanding[seq] = struct{}{}
	if len(s.outstanding) == 1 {
		s.low = seq
	}
	return seq, s.low - 1, nil
}

// end marks seq answered (successfully or for good) and frees its slot.
func (s *session) end(seq uint64) {
	s.mu.Lock()
	delete(s.outstanding, seq)
	// low is the lowest unanswered seq; answers come mostly in order, so
	// advancing it is O(1) amortised.
	for s.low <= s.last {
		if _, ok := s.outstanding[s.low]; ok {
			break
		}
		s.low++
	}
	s.mu.Unlock()
	<-s.slots
}
