package client

import (
	"context"
	"errors"
	"strconv"
	"sync"
)

// session issues request seqs and tracks which are still unanswered, so
// every request can tell the FSM which results it may forget (acked_seq).
type session struct {
	base string
	mu   sync.Mutex
	// id is the client id requests carry: base, then base.2, base.3 ...
	// after the cluster answered that it no longer holds the session.
	id  string
	gen int
	// established is set once the state machine kept an answer of id:
	// from then on its requests say so (session_established), and the
	// cluster refuses them if it lost the session (ErrSessionExpired)
	// instead of applying a retry a second time.
	established bool
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

// maxClientIDBytes is the longest client id the coordinators take.
const maxClientIDBytes = 128

// MaxOutstanding is how many requests one client keeps in flight at most;
// beyond it Append and Submit wait for a slot.
const MaxOutstanding = 2048

func newSession(id string) *session {
	return &session{base: id, id: id, gen: 1, outstanding: map[uint64]struct{}{}, low: 1, slots: make(chan struct{}, MaxOutstanding)}
}

// ticket is one request's place in the session: every attempt of the
// request carries the same.
type ticket struct {
	id          string
	seq, acked  uint64
	established bool
}

// begin waits for a slot, issues the next seq and returns it with the
// current acked seq (every seq at or below it has been answered) and the
// session's id.
func (s *session) begin(ctx context.Context) (ticket, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ticket{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	s.outstanding[s.last] = struct{}{}
	if len(s.outstanding) == 1 {
		s.low = s.last
	}
	return ticket{id: s.id, seq: s.last, acked: s.low - 1, established: s.established}, nil
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

// kept records that the state machine kept the answer of a request of
// session id (a successful append, a namespace op that wrote its audit
// event).
func (s *session) kept(id string) {
	s.mu.Lock()
	if id == s.id {
		s.established = true
	}
	s.mu.Unlock()
}

// run makes one request in the session: send gets a ticket and makes
// every attempt with it (the retries of Client.do), reporting how many it
// made and whether the state machine kept the answer. A request refused at
// its first and only attempt because the cluster no longer holds the
// session (ErrSessionExpired) was applied nowhere: it is sent once more,
// in the new session, so a client idle while its session was evicted sees
// no error. One refused after earlier attempts may have been applied by
// one of them: the caller gets ErrSessionExpired.
func (s *session) run(ctx context.Context, send func(t ticket) (kept bool, attempts int, err error)) error {
	for try := 0; ; try++ {
		t, err := s.begin(ctx)
		if err != nil {
			return err
		}
		kept, attempts, err := send(t)
		s.end(t.seq)
		if err == nil {
			if kept {
				s.kept(t.id)
			}
			return nil
		}
		s.failed(t.id, err)
		if try == 0 && attempts == 1 && errors.Is(err, ErrSessionExpired) {
			continue
		}
		return err
	}
}

// failed looks at a request's final error: an expired session starts a
// new one.
func (s *session) failed(id string, err error) {
	if errors.Is(err, ErrSessionExpired) {
		s.expired(id)
	}
}

// expired starts a new session after the cluster answered that it no
// longer holds session id (evicted, or replaced by a forced import): later
// requests carry a new client id; those begun under id keep it, and their
// retries fail the same way. Seqs go on rising, so the outstanding ones
// still bound acked_seq.
func (s *session) expired(id string) {
	s.mu.Lock()
	if id == s.id {
		s.gen++
		suffix := "." + strconv.Itoa(s.gen)
		s.id = s.base[:min(len(s.base), maxClientIDBytes-len(suffix))] + suffix
		s.established = false
	}
	s.mu.Unlock()
}
