package coordserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// forwardInFlight is how many forwarded batches a follower keeps awaiting
// the leader's answer. Two let a batch form while the last one commits:
// one in flight made a follower's batch wait out the last one's commit,
// and more (3 to 32) gave the same appends/s while moving latency from the
// followers' clients to the leader's (docs/benchmarks.md, "What the
// settings are worth").
const forwardInFlight = 2

// forwarder is a follower's way to the leader: the current ForwardStream,
// and the leaders known to lack it.
type forwarder struct {
	s *Server

	mu     sync.Mutex
	stream *fwdStream
	unary  map[string]bool // leader addresses that answered Unimplemented
	prev   chan struct{}   // the last unary forward's end, to keep them in order
	// changed is closed (and replaced) whenever the leader changes: a call
	// forwarded to a leader that is gone ends then, not at its deadline.
	changed chan struct{}
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, unary: make(map[string]bool), changed: make(chan struct{})}
}

// leaderChange returns a channel closed at the next leader change.
func (f *forwarder) leaderChange() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// close ends the current stream (its batches fail).
func (f *forwarder) close() {
	f.mu.Lock()
	st := f.stream
	f.stream = nil
	f.mu.Unlock()
	if st != nil {
		st.fail(status.Error(codes.Unavailable, "forwarder closed"))
	}
}

// leaderChanged fails the stream to a leader that is no longer the leader
// (id: the new one, "" for none known): a leader cut off by a partition
// never answers, and the forward batcher must not wait out the apply
// timeout on its batches before it forwards to the new one. Their clients
// retry; a batch the old leader did commit is answered from its session.
//
// It ends the calls forwarded one by one (forwardOrHandle) too, and
// forgets which leaders lacked ForwardStream: a leader restarted on
// a newer build (a rolling upgrade) changes the leadership too.
func (f *forwarder) leaderChanged(id string) {
	f.mu.Lock()
	st := f.stream
	clear(f.unary)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if st != nil && st.leaderID != id {
		st.fail(status.Errorf(codes.Unavailable, "forward to leader %s: the leader changed", st.addr))
	}
}

// forwardSink sends batches to the leader at addr. Start runs on the
// forward batcher's loop, one batch at a time in queue order.
type forwardSink struct {
	f    *forwarder
	id   string // the leader's member id
	addr string
}

func (fs forwardSink) Start(ops []*fsmpb.AppendOp) func() ([]fsm.Result, error) {
	f := fs.f
	st, err := f.streamTo(fs.id, fs.addr)
	if err != nil {
		return func() ([]fsm.Result, error) { return nil, err }
	}
	if st == nil {
		return f.unaryForward(fs.addr, ops)
	}
	ch := st.send(ops)
	timeout := f.s.cfg.ApplyTimeout
	return func() ([]fsm.Result, error) {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case a := <-ch:
			return a.results, a.err
		case <-t.C:
			// The leader holds the batch too long: give up on the stream
			// (every batch on it fails, their clients retry; the next
			// batch opens a new one).
			err := status.Errorf(codes.Unavailable, "forward to leader %s: no answer in %v", fs.addr, timeout)
			st.fail(err)
			return nil, err
		}
	}
}

// streamTo returns the stream to the leader at addr, opening it (and
// letting the stream to a previous leader finish) as needed; nil, nil when
// that leader is known to lack ForwardStream. Only the forward batcher's
// loop calls it. Opening waits for the connection at most ApplyTimeout.
func (f *forwarder) streamTo(id, addr string) (*fwdStream, error) {
	f.mu.Lock()
	old, unary := f.stream, f.unary[addr]
	if old != nil && old.leaderID == id && old.addr == addr && !old.broken() {
		f.mu.Unlock()
		return old, nil
	}
	f.stream = nil
	f.mu.Unlock()
	if old != nil {
		// A new leader (or a broken stream): the old stream's batches
		// still get their answers; it ends after them.
		old.closeSend()
	}
	if unary {
		return nil, nil
	}
	conn, err := f.s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(f.s.ctx)
	slow := time.AfterFunc(f.s.cfg.ApplyTimeout, cancel)
	cs, err := clusterpb.NewPeerClient(conn).ForwardStream(ctx)
	if !slow.Stop() || err != nil {
		cancel()
		if err == nil || ctx.Err() != nil {
			err = status.Errorf(codes.Unavailable, "forward to leader %s: no stream within %v (%v)", addr, f.s.cfg.ApplyTimeout, err)
		}
		return nil, err
	}
	st := &fwdStream{f: f, leaderID: id, addr: addr, cs: cs, cancel: cancel}
	f.mu.Lock()
	f.stream = st
	f.mu.Unlock()
	go st.receive()
	return st, nil
}

// unaryForward sends ops in one ForwardAppend RPC once the previous unary
// forward has ended, so batches stay in order with one RPC at a time.
func (f *forwarder) unaryForward(addr string, ops []*fsmpb.AppendOp) func() ([]fsm.Result, error) {
	done := make(chan struct{})
	f.mu.Lock()
	prev := f.prev
	f.prev = done
	f.mu.Unlock()
	return func() ([]fsm.Result, error) {
		defer close(done)
		if prev != nil {
			<-prev
		}
		conn, err := f.s.peers.get(addr)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(f.s.ctx, f.s.cfg.ApplyTimeout)
		defer cancel()
		resp, err := clusterpb.NewPeerClient(conn).ForwardAppend(ctx, &clusterpb.ForwardAppendRequest{Ops: ops})
		if err != nil {
			return nil, err
		}
		return f.s.resultsFromProto(resp.Results), nil
	}
}

type fwdAnswer struct {
	results []fsm.Result
	err     error
}

// fwdStream is one ForwardStream: batches go out in send order and their
// answers come back in the same order, to the waiters queued in that order.
type fwdStream struct {
	f        *forwarder
	leaderID string
	addr     string
	cs       clusterpb.Peer_ForwardStreamClient
	cancel   context.CancelFunc

	mu      sync.Mutex
	waiting []chan fwdAnswer // one per batch sent and not yet answered
	err     error            // set when the stream broke: the waiters got it
}

// send sends a batch (on the forward batcher's loop only: one sender) and
// returns where its answer will come.
func (st *fwdStream) send(ops []*fsmpb.AppendOp) <-chan fwdAnswer {
	ch := make(chan fwdAnswer, 1)
	st.mu.Lock()
	if st.err != nil {
		err := st.err
		st.mu.Unlock()
		ch <- fwdAnswer{err: err}
		return ch
	}
	// Queued before it is sent, so its answer always finds it.
	st.waiting = append(st.waiting, ch)
	st.mu.Unlock()
	if err := st.cs.Send(&clusterpb.ForwardAppendRequest{Ops: ops}); err != nil && !errors.Is(err, io.EOF) {
		// An error of the client's own: the stream is aborted.
		st.fail(status.Errorf(codes.Unavailable, "forward to leader %s: %v", st.addr, err))
	}
	// io.EOF: the stream ended and Recv has the reason; receive fails this
	// batch with it (and remembers a leader without ForwardStream before
	// any batch learns of the failure, so the next one goes unary).
	return ch
}

// receive hands each answer to the oldest waiter until the stream ends.
func (st *fwdStream) receive() {
	for {
		resp, err := st.cs.Recv()
		if err != nil {
			st.fail(st.streamErr(err))
			return
		}
		st.mu.Lock()
		if len(st.waiting) == 0 {
			st.mu.Unlock()
			st.fail(status.Errorf(codes.Internal, "forward to leader %s: an answer for no batch", st.addr))
			return
		}
		ch := st.waiting[0]
		st.waiting[0] = nil
		st.waiting = st.waiting[1:]
		st.mu.Unlock()
		ch <- fwdAnswer{results: st.f.s.resultsFromProto(resp.Results)}
	}
}

// streamErr is what the batches still waiting when the stream ended fail
// with. A leader without ForwardStream is remembered: later batches go by
// ForwardAppend; these ones fail as Unavailable and their clients retry.
func (st *fwdStream) streamErr(err error) error {
	if errors.Is(err, io.EOF) {
		return status.Errorf(codes.Unavailable, "forward to leader %s: stream ended", st.addr)
	}
	if status.Code(err) == codes.Unimplemented {
		st.f.mu.Lock()
		st.f.unary[st.addr] = true
		st.f.mu.Unlock()
		return status.Errorf(codes.Unavailable, "forward to leader %s: it has no ForwardStream (an older build); retry", st.addr)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("forward to leader %s: %v", st.addr, err))
}

// fail ends the stream: every waiting batch gets err, later sends too.
func (st *fwdStream) fail(err error) {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	st.err = err
	waiting := st.waiting
	st.waiting = nil
	st.mu.Unlock()
	st.cancel()
	for _, ch := range waiting {
		ch <- fwdAnswer{err: err}
	}
	st.f.mu.Lock()
	if st.f.stream == st {
		st.f.stream = nil
	}
	st.f.mu.Unlock()
}

func (st *fwdStream) broken() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err != nil
}

// closeSend stops sending; the leader answers what it has and ends the
// stream, and receive ends with it.
func (st *fwdStream) closeSend() {
	// CloseSend shares the send side with send, which only the batcher's
	// loop calls — the loop that is calling this, once per stream (streamTo
	// drops the stream as it closes it).
	_ = st.cs.CloseSend()
}
