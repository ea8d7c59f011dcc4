package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc/codes"
)

// Future is the outcome of an asynchronous Submit.
type Future struct {
	done chan struct{}
	seqs []uint64
	err  error
}

// Done is closed once the events are safe or failed for good.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait returns the assigned seqs once the events are safe.
func (f *Future) Wait(ctx context.Context) ([]uint64, error) {
	select {
	case <-f.done:
		return f.seqs, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// submitted is one request on the append stream.
type submitted struct {
	req *pb.AppendRequest
	f   *Future
}

// appender owns the client's append stream: requests are sent in submit
// order, answered in order, and resent with the same request seq on a new
// stream (to the new leader) when a stream breaks, so each is applied once.
type appender struct {
	c        *Client
	mu       sync.Mutex
	queue    []*submitted // not yet sent on the current stream
	flight   []*submitted // sent, awaiting an answer, in order
	wake     chan struct{}
	running  bool
	answered atomic.Uint64 // answers received, over all streams
}

func newAppender(c *Client) *appender {
	return &appender{c: c, wake: make(chan struct{}, 1)}
}

// Submit hands events to the journal without waiting for them to be safe
// (the MDLog submit_entry): requests from one client keep their order, up to
// MaxOutstanding stay in flight on one stream (beyond that Submit waits for
// a slot), and the future resolves when they are safe. If the cluster no
// longer holds the client's session, the futures of the submissions it
// refused fail with ErrSessionExpired (Append would send such a request
// again; a stream may already carry later ones, whose order a resend
// would break) and later submissions go to a new session. A client idle
// for half the cluster's session idle timeout (log format 9) starts a new
// session before its next request, so idleness alone never fails one.
func (j *Journal) Submit(events ...Event) *Future {
	f := &Future{done: make(chan struct{})}
	if len(events) == 0 {
		f.err = fmt.Errorf("%w: submit needs at least one event", ErrInvalidArgument)
		close(f.done)
		return f
	}
	pbEvents := make([]*pb.Event, len(events))
	for i, e := range events {
		pbEvents[i] = &pb.Event{Type: e.Type, Payload: e.Payload}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*j.c.cfg.AttemptTimeout)
	err := j.checkAppendSize(ctx, pbEvents) // before it takes a request seq
	cancel()
	if err != nil {
		f.err = err
		close(f.done)
		return f
	}
	s := j.c.session
	// Blocks while MaxOutstanding submissions are unanswered (backpressure);
	// opening the session (the first Submit's, or after an expiry) waits
	// for the cluster at most a few attempts' time.
	t, err := s.begin(context.Background(), 4*j.c.cfg.AttemptTimeout)
	if err != nil {
		f.err = err
		close(f.done)
		return f
	}
	req := &pb.AppendRequest{ClientId: t.id, RequestSeq: t.seq, AckedSeq: t.acked, SessionEstablished: t.established, Events: pbEvents}
	a := j.c.appender
	a.mu.Lock()
	a.queue = append(a.queue, &submitted{req: req, f: f})
	if !a.running {
		a.running = true
		go a.run()
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return f
}

// Flush hands everything submitted so far to the stream now. Submissions
// are proposed continuously, so Flush only has to wait for the send queue.
func (j *Journal) Flush(ctx context.Context) error {
	a := j.c.appender
	for {
		a.mu.Lock()
		empty := len(a.queue) == 0
		a.mu.Unlock()
		if empty {
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WaitForSafe returns once every event submitted before the call is safe
// (or failed for good); with nothing outstanding it returns at once.
func (j *Journal) WaitForSafe(ctx context.Context) error {
	a := j.c.appender
	a.mu.Lock()
	var last *Future
	if n := len(a.queue); n > 0 {
		last = a.queue[n-1].f
	} else if n := len(a.flight); n > 0 {
		last = a.flight[n-1].f
	}
	a.mu.Unlock()
	if last == nil {
		return nil
	}
	// Answers arrive in order: the last one submitted is the last answered.
	_, err := last.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

func (a *appender) finish(s *submitted, seqs []uint64, err error) {
	s.f.seqs, s.f.err = seqs, err
	if err == nil {
		a.c.session.kept(s.req.ClientId)
	} else {
		a.c.session.failed(s.req.ClientId, err)
	}
	a.c.session.end(s.req.RequestSeq)
	close(s.f.done)
}

// run keeps a stream open while anything is outstanding.
func (a *appender) run() {
	backoff := 20 * time.Millisecond
	for {
		a.mu.Lock()
		if len(a.queue) == 0 && len(a.flight) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		// Everything unanswered is sent again, in order, on the new stream.
		a.queue = append(a.flight, a.queue...)
		a.flight = nil
		a.mu.Unlock()
		before := a.answered.Load()
		err := a.stream()
		if a.answered.Load() != before {
			backoff = 20 * time.Millisecond // the stream made progress
		}
		if errors.Is(err, ErrClosed) {
			a.failAll(err)
			return
		}
		if err != nil {
			a.c.setLeader("")
			time.Sleep(backoff) // reconnect backoff (not a test synchronisation)
			if backoff *= 2; backoff > a.c.cfg.MaxBackoff {
				backoff = a.c.cfg.MaxBackoff
			}
		}
	}
}

func (a *appender) failAll(err error) {
	a.mu.Lock()
	all := append(a.flight, a.queue...)
	a.flight, a.queue, a.running = nil, nil, false
	a.mu.Unlock()
	for _, s := range all {
		a.finish(s, nil, err)
	}
}

// stream runs one AppendStream to the leader until it breaks or nothing is
// outstanding; it returns nil when idle.
func (a *appender) stream() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, cc, err := a.c.target(ctx, routeOnlyLeader) // append streams are served by the leader only
	if err != nil {
		return err
	}
	st, err := pb.NewJournalClient(cc).AppendStream(ctx)
	if err != nil {
		return fromStatus(err)
	}
	recvErr := make(chan error, 1)
	go func() { recvErr <- a.receive(st) }()
	for {
		a.mu.Lock()
		batch := a.queue
		a.queue = nil
		a.flight = append(a.flight, batch...)
		idle := len(a.flight) == 0
		a.mu.Unlock()
		if idle {
			st.CloseSend()
			return <-recvErr
		}
		for _, s := range batch {
			if err := st.Send(s.req); err != nil {
				return fromStatus(<-recvErr)
			}
		}
		select {
		case <-a.wake:
		case err := <-recvErr:
			return err
		}
	}
}

// receive matches answers to in-flight requests, in order.
func (a *appender) receive(st pb.Journal_AppendStreamClient) error {
	for {
		resp, err := st.Recv()
		if err != nil {
			a.mu.Lock()
			idle := len(a.flight) == 0 // queued ones go on the next stream
			a.mu.Unlock()
			if idle {
				return nil
			}
			if err := fromStatus(err); err != nil {
				return err
			}
			return ErrUnavailable
		}
		a.mu.Lock()
		if len(a.flight) == 0 || a.flight[0].req.RequestSeq != resp.RequestSeq {
			a.mu.Unlock()
			return fmt.Errorf("logbook: append stream answered request %d out of order", resp.RequestSeq)
		}
		s := a.flight[0]
		a.flight = a.flight[1:]
		a.mu.Unlock()
		a.answered.Add(1)
		if resp.Code != 0 {
			e := &Error{Code: codes.Code(resp.Code), Message: resp.Message, Reason: resp.Reason}
			if retryable(e) {
				// Unknown outcome or lost leadership: resend it (same seq)
				// on a fresh stream, ahead of everything after it.
				a.mu.Lock()
				a.flight = append([]*submitted{s}, a.flight...)
				a.mu.Unlock()
				return e
			}
			a.finish(s, nil, e)
			continue
		}
		seqs := make([]uint64, resp.Count)
		for i := range seqs {
			seqs[i] = resp.FirstSeq + uint64(i)
		}
		a.finish(s, seqs, nil)
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}
