package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// session issues request seqs and tracks which are still unanswered, so
// every request can tell the FSM which results it may forget (acked_seq).
//
// Before its first request the session is opened on the cluster
// (OpenSession, log format 7): the cluster names it "<base>@<index>", a
// name no other open gets, and every request says session_established from
// the first on — so a retry the cluster can no longer answer from the
// session (evicted, or dropped by a forced import) is refused with
// SESSION_EXPIRED, never applied a second time, and a client restarted with
// the same ClientID does not meet the results of its previous run. A
// cluster older than format 7 answers LOG_FORMAT (or does not know the
// call): the session is then base itself, and established once the cluster
// kept an answer of it, as before format 7. From log format 9 the cluster
// forgets a session unused for its idle timeout, which the open answers: a
// session unused for half of it is replaced by a new open before the next
// request.
type session struct {
	base string
	// open asks the cluster to open a session for base and returns its id
	// and how long the cluster keeps a session unused (0: not by time).
	open func(ctx context.Context, base string) (string, time.Duration, error)
	// now is the clock idleness is measured by (time.Now; tests set it).
	now func() time.Time
	// openMu makes concurrent requests wait for one open.
	openMu sync.Mutex
	mu     sync.Mutex
	// id is the client id requests carry: the opened session's, or (on a
	// cluster before log format 7) base, then base.2, base.3 ... after the
	// cluster answered that it no longer holds the session.
	id string
	// ready: id is opened, or the cluster cannot open sessions (then id
	// is base, or base.N after expiries).
	ready bool
	gen   int
	// established is set once the cluster holds session id for sure (it
	// opened it, or kept an answer of it): from then on its requests say
	// so (session_established), and the cluster refuses them if it lost
	// the session (ErrSessionExpired) instead of applying a retry a
	// second time.
	established bool
	// opened: id is a session the cluster opened (OpenSession), which
	// Close ends.
	opened bool
	// idle is how long the cluster keeps the opened session unused (log
	// format 9; 0: not by time), and active when the session was last used
	// (a request begun or answered). A session idle for half of idle is
	// not used again: the next request opens a new one, so it is not
	// refused with SESSION_EXPIRED — which a Submit could not resend.
	idle        time.Duration
	active      time.Time
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

// maxSessionBaseBytes is the longest client id an open may name
// (fsm.MaxSessionBaseBytes): the opened session's id, "<base>@<index>",
// must fit maxClientIDBytes.
const maxSessionBaseBytes = maxClientIDBytes - len("@18446744073709551615")

// MaxOutstanding is how many requests one client keeps in flight at most;
// beyond it Append and Submit wait for a slot.
const MaxOutstanding = 2048

func newSession(id string, open func(ctx context.Context, base string) (string, time.Duration, error)) *session {
	return &session{base: id, open: open, now: time.Now, id: id, gen: 1, outstanding: map[uint64]struct{}{}, low: 1, slots: make(chan struct{}, MaxOutstanding)}
}

// ticket is one request's place in the session: every attempt of the
// request carries the same.
type ticket struct {
	id          string
	seq, acked  uint64
	established bool
}

// begin waits for a slot and for the session to be open (opening it; the
// open is bounded by openTimeout when it is > 0, else by ctx), then issues
// the next seq and returns it with the current acked seq (every seq at or
// below it has been answered) and the session's id.
func (s *session) begin(ctx context.Context, openTimeout time.Duration) (ticket, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ticket{}, ctx.Err()
	}
	for {
		s.mu.Lock()
		if s.ready && s.opened && s.idle > 0 && len(s.outstanding) == 0 && s.now().Sub(s.active) > s.idle/2 {
			// Idle for half the cluster's timeout, nothing left to
			// retry in it: start a new session (the old one expires).
			s.ready, s.established, s.opened = false, false, false
		}
		if s.ready {
			s.active = s.now()
			s.last++
			s.outstanding[s.last] = struct{}{}
			if len(s.outstanding) == 1 {
				s.low = s.last
			}
			t := ticket{id: s.id, seq: s.last, acked: s.low - 1, established: s.established}
			s.mu.Unlock()
			return t, nil
		}
		s.mu.Unlock()
		if err := s.openSession(ctx, openTimeout); err != nil {
			<-s.slots
			return ticket{}, err
		}
	}
}

// openSession opens a session on the cluster unless one is open.
func (s *session) openSession(ctx context.Context, timeout time.Duration) error {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	ready, base := s.ready, s.base[:min(len(s.base), maxSessionBaseBytes)]
	s.mu.Unlock()
	if ready {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	id, idle, err := s.open(ctx, base)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.id, s.ready, s.established, s.opened = id, true, true, true
		s.idle, s.active = idle, s.now()
	case errors.Is(err, errCannotOpenSessions):
		s.ready = true
	default:
		return err
	}
	return nil
}

// openedID is the id of the session the cluster opened for this client,
// if one is open.
func (s *session) openedID() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.opened
}

// end marks seq answered (successfully or for good) and frees its slot.
func (s *session) end(seq uint64) {
	s.mu.Lock()
	delete(s.outstanding, seq)
	s.active = s.now()
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
		t, err := s.begin(ctx, 0)
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
// longer holds session id (evicted, or replaced by a forced import): the
// next request opens one (or, on a cluster before log format 7, carries a
// new client id: base.2, base.3 ...). Requests begun under id keep it, and
// their retries fail the same way. Seqs go on rising, so the outstanding
// ones still bound acked_seq.
func (s *session) expired(id string) {
	s.mu.Lock()
	if id == s.id {
		s.gen++
		suffix := "." + strconv.Itoa(s.gen)
		s.id = s.base[:min(len(s.base), maxClientIDBytes-len(suffix))] + suffix
		s.ready, s.established, s.opened = false, false, false
	}
	s.mu.Unlock()
}

// errCannotOpenSessions: the cluster cannot open sessions (log format
// before 7, or a build without OpenSession).
var errCannotOpenSessions = errors.New("logbook: the cluster cannot open sessions")

// openSession asks the cluster (its leader, or with SpreadOverMembers the
// next endpoint, which forwards it) to open a session for base, and
// returns its id and the cluster's session idle timeout.
func (c *Client) openSession(ctx context.Context, base string) (string, time.Duration, error) {
	var resp *pb.OpenSessionResponse
	err := c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewJournalClient(cc).OpenSession(ctx, &pb.OpenSessionRequest{ClientId: base})
		return err
	})
	var e *Error
	if errors.As(err, &e) && (e.Code == codes.Unimplemented || e.Code == codes.FailedPrecondition && e.Reason == pb.ReasonLogFormat) {
		return "", 0, fmt.Errorf("%w: %v", errCannotOpenSessions, err)
	}
	if err != nil {
		return "", 0, err
	}
	return resp.SessionId, time.Duration(resp.IdleTimeoutSeconds) * time.Second, nil
}

// closeSession asks the cluster to end session id (log format 8). A
// cluster before format 8, or a build without CloseSession, keeps the
// session until it evicts it: not an error.
func (c *Client) closeSession(ctx context.Context, id string) error {
	err := c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewJournalClient(cc).CloseSession(ctx, &pb.CloseSessionRequest{SessionId: id})
		return err
	})
	var e *Error
	if errors.As(err, &e) && (e.Code == codes.Unimplemented || e.Code == codes.FailedPrecondition && e.Reason == pb.ReasonLogFormat) {
		return nil
	}
	return err
}
