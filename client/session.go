package client

import "sync"

// session issues request seqs and tracks which are still unanswered, so
// every request can tell the FSM which results it may forget (acked_seq).
type session struct {
	id          string
	mu          sync.Mutex
	last        uint64
	outstanding map[uint64]struct{}
}

func newSession(id string) *session {
	return &session{id: id, outstanding: map[uint64]struct{}{}}
}

// begin issues the next seq and returns it with the current acked seq:
// every seq at or below it has been answered.
func (s *session) begin() (seq, acked uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	seq = s.last
	s.outstanding[seq] = struct{}{}
	acked = seq - 1
	for o := range s.outstanding {
		if o <= acked {
			acked = o - 1
		}
	}
	return seq, acked
}

// end marks seq answered (successfully or for good).
func (s *session) end(seq uint64) {
	s.mu.Lock()
	delete(s.outstanding, seq)
	s.mu.Unlock()
}
