package client

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cannotOpen is the open of a cluster before log format 7.
func cannotOpen(context.Context, string) (string, time.Duration, error) {
	return "", 0, errCannotOpenSessions
}

// opener opens sessions base@1, base@2 ... and counts the opens; the
// cluster keeps them unused for idle.
type opener struct {
	mu    sync.Mutex
	n     int
	fail  error
	bases []string
	idle  time.Duration
}

func (o *opener) open(_ context.Context, base string) (string, time.Duration, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return "", 0, o.fail
	}
	o.n++
	o.bases = append(o.bases, base)
	return base + "@" + strconv.Itoa(o.n), o.idle, nil
}

func TestSessionAckedSeq(t *testing.T) {
	t.Parallel()
	s := newSession("c", cannotOpen)
	defer func() {
		if _, ok := s.openedID(); ok {
			t.Error("a session the cluster could not open is one Close would end")
		}
	}()
	begin := func() (uint64, uint64) {
		tk, err := s.begin(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return tk.seq, tk.acked
	}
	s1, a1 := begin()
	s2, a2 := begin()
	if s1 != 1 || a1 != 0 || s2 != 2 || a2 != 0 {
		t.Fatalf("got (%d,%d) (%d,%d)", s1, a1, s2, a2)
	}
	s.end(2)
	// 1 is still outstanding: nothing may be forgotten yet.
	if s3, a3 := begin(); s3 != 3 || a3 != 0 {
		t.Fatalf("got (%d,%d)", s3, a3)
	}
	s.end(1)
	s.end(3)
	if s4, a4 := begin(); s4 != 4 || a4 != 3 {
		t.Fatalf("got (%d,%d)", s4, a4)
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	st := status.New(codes.Unavailable, "not the leader")
	st, _ = st.WithDetails(&errdetails.ErrorInfo{Domain: pb.ErrorDomain, Reason: pb.ReasonNotLeader,
		Metadata: map[string]string{pb.MetaLeaderID: "c2", pb.MetaLeaderAddr: "127.0.0.1:7101", pb.MetaClusterID: "x"}})
	err := fromStatus(st.Err())
	var e *Error
	if !errors.As(err, &e) || e.LeaderID != "c2" || e.LeaderAddr != "127.0.0.1:7101" || e.ClusterID != "x" {
		t.Fatalf("details lost: %#v", err)
	}
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoLeader) {
		t.Fatal("sentinel matching")
	}
	if !retryable(err) {
		t.Fatal("not-leader must be retryable")
	}
	if retryable(fromStatus(status.Error(codes.InvalidArgument, "bad"))) {
		t.Fatal("invalid argument must not be retried")
	}
	if !errors.Is(fromStatus(status.Error(codes.OutOfRange, "trimmed")), ErrOutOfRange) {
		t.Fatal("out of range")
	}
}

// TestSessionRunExpiry: a request refused as expired at its first and only
// attempt is sent again once, in a new session (a new client id, not yet
// established); one refused after several attempts is not (an earlier
// attempt may have been applied) and the caller gets ErrSessionExpired;
// either way the next request uses the new session.
func TestSessionRunExpiry(t *testing.T) {
	t.Parallel()
	s := newSession("c", cannotOpen)
	expired := &Error{Code: codes.FailedPrecondition, Reason: pb.ReasonSessionExpired}
	var got []ticket
	if err := s.run(context.Background(), func(tk ticket) (bool, int, error) {
		got = append(got, tk)
		return true, 1, nil
	}); err != nil || len(got) != 1 || got[0].id != "c" || got[0].established {
		t.Fatalf("first request: %v, %+v", err, got)
	}
	got = nil
	err := s.run(context.Background(), func(tk ticket) (bool, int, error) {
		got = append(got, tk)
		if len(got) == 1 {
			return false, 1, expired
		}
		return true, 1, nil
	})
	if err != nil || len(got) != 2 || got[0].id != "c" || !got[0].established || got[1].id != "c.2" || got[1].established || got[1].seq <= got[0].seq {
		t.Fatalf("refused at once: %v, %+v", err, got)
	}
	got = nil
	err = s.run(context.Background(), func(tk ticket) (bool, int, error) {
		got = append(got, tk)
		return false, 3, expired
	})
	if !errors.Is(err, ErrSessionExpired) || !errors.Is(err, ErrFailedPrecondition) || len(got) != 1 || got[0].id != "c.2" || !got[0].established {
		t.Fatalf("refused after retries: %v, %+v", err, got)
	}
	tk, _ := s.begin(context.Background(), 0)
	if tk.id != "c.3" || tk.established || tk.acked != tk.seq-1 {
		t.Fatalf("the request after: %+v", tk)
	}
}

// TestSessionOpen: on a cluster that opens sessions (log format 7) the
// first request waits for one open, however many start at once, and every
// request is established from the first on; an expired session is
// replaced by a new open (a request refused at its first attempt goes
// again in it); a failed open fails the request without using a seq or
// keeping its slot, and the next request opens again. The session Close
// ends is the open one, none after an expiry until the next open.
func TestSessionOpen(t *testing.T) {
	t.Parallel()
	o := &opener{}
	s := newSession("c", o.open)
	var wg sync.WaitGroup
	tickets := make(chan ticket, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.run(context.Background(), func(tk ticket) (bool, int, error) {
				tickets <- tk
				return true, 1, nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(tickets)
	for tk := range tickets {
		if tk.id != "c@1" || !tk.established {
			t.Fatalf("ticket %+v: want session c@1, established", tk)
		}
	}
	if o.n != 1 {
		t.Fatalf("%d opens for 50 concurrent first requests, want 1", o.n)
	}
	expired := &Error{Code: codes.FailedPrecondition, Reason: pb.ReasonSessionExpired}
	var got []ticket
	err := s.run(context.Background(), func(tk ticket) (bool, int, error) {
		got = append(got, tk)
		if len(got) == 1 {
			return false, 1, expired
		}
		return true, 1, nil
	})
	if err != nil || len(got) != 2 || got[0].id != "c@1" || got[1].id != "c@2" || !got[1].established || got[1].seq <= got[0].seq || o.n != 2 {
		t.Fatalf("refused at once: %v, %+v, %d opens", err, got, o.n)
	}
	if id, ok := s.openedID(); !ok || id != "c@2" {
		t.Fatalf("the session Close would end: %q, %v; want c@2", id, ok)
	}
	s.expired("c@2")
	if _, ok := s.openedID(); ok {
		t.Fatal("an expired session is still the one Close would end")
	}
	o.fail = &Error{Code: codes.Unavailable, Reason: pb.ReasonNoLeader}
	before := s.last
	err = s.run(context.Background(), func(tk ticket) (bool, int, error) {
		t.Fatal("a request was sent without an open session")
		return false, 0, nil
	})
	if !errors.Is(err, ErrUnavailable) || s.last != before || len(s.slots) != 0 {
		t.Fatalf("failed open: %v, seq %d -> %d, %d slots held", err, before, s.last, len(s.slots))
	}
	o.fail = nil
	tk, err := s.begin(context.Background(), time.Second)
	if err != nil || tk.id != "c@3" || !tk.established {
		t.Fatalf("after the failed open: %v, %+v", err, tk)
	}
	long := newSession(strings.Repeat("x", 200), o.open)
	if _, err := long.begin(context.Background(), 0); err != nil || len(o.bases[len(o.bases)-1]) != maxSessionBaseBytes {
		t.Fatalf("a long client id opens with its first %d bytes: %v, %q", maxSessionBaseBytes, err, o.bases)
	}
}

// TestSessionRenewedWhenIdle: on a cluster that forgets sessions unused
// for an idle timeout (log format 9), a request begun after the session
// sat unused for more than half of it goes in a new session, opened first
// (so it is not refused, which a Submit could not resend); one begun
// sooner, or while another request of the session is unanswered, stays in
// the session; with no timeout (0) the session is kept however long idle.
func TestSessionRenewedWhenIdle(t *testing.T) {
	t.Parallel()
	o := &opener{idle: 10 * time.Second}
	s := newSession("c", o.open)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	request := func() ticket {
		t.Helper()
		tk, err := s.begin(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		s.end(tk.seq)
		return tk
	}
	if tk := request(); tk.id != "c@1" || !tk.established {
		t.Fatalf("first request: %+v", tk)
	}
	now = now.Add(5 * time.Second) // exactly half: kept
	if tk := request(); tk.id != "c@1" {
		t.Fatalf("after 5 s idle: %+v", tk)
	}
	now = now.Add(5*time.Second + time.Millisecond)
	tk := request()
	if tk.id != "c@2" || !tk.established || o.n != 2 {
		t.Fatalf("after 5.001 s idle: %+v, %d opens", tk, o.n)
	}
	if id, ok := s.openedID(); !ok || id != "c@2" {
		t.Fatalf("the session Close would end: %q, %v", id, ok)
	}
	// A request outstanding keeps the session in use.
	held, err := s.begin(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	tk, err = s.begin(context.Background(), 0)
	if err != nil || tk.id != "c@2" || tk.acked != held.seq-1 {
		t.Fatalf("with a request outstanding: %+v, %v", tk, err)
	}
	s.end(tk.seq)
	s.end(held.seq)
	// No timeout: never renewed.
	o.idle = 0
	now = now.Add(time.Hour)
	if tk := request(); tk.id != "c@3" {
		t.Fatalf("renewal after an hour idle: %+v", tk)
	}
	now = now.Add(1000 * time.Hour)
	if tk := request(); tk.id != "c@3" || o.n != 3 {
		t.Fatalf("with no idle timeout: %+v, %d opens", tk, o.n)
	}
}

// TestAttemptContext: an attempt is bounded by AttemptTimeout unless the
// caller's own deadline comes first, in which case the caller's context is
// the attempt's as it is.
func TestAttemptContext(t *testing.T) {
	t.Parallel()
	c := &Client{cfg: Config{AttemptTimeout: time.Second}}

	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	actx, acancel := c.attemptContext(short)
	acancel()
	if actx != short {
		t.Fatal("a caller deadline before the attempt timeout: want the caller's context")
	}
	if short.Err() != nil {
		t.Fatal("the attempt's cancel must not cancel the caller's context")
	}

	for _, parent := range []context.Context{context.Background(), func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		t.Cleanup(cancel)
		return ctx
	}()} {
		before := time.Now()
		actx, acancel := c.attemptContext(parent)
		dl, ok := actx.Deadline()
		if actx == parent || !ok || dl.Before(before.Add(time.Second)) || dl.After(time.Now().Add(time.Second)) {
			t.Fatalf("no caller deadline or a later one: want a deadline one attempt timeout away, got %v (%v)", dl, ok)
		}
		acancel()
		if actx.Err() == nil || parent.Err() != nil {
			t.Fatal("the attempt's cancel ends the attempt's context only")
		}
	}
}

// TestLocalRefusals: arguments the SDK refuses before any call, with the
// sentinel and one "logbook: " prefix (the sentinel's).
func TestLocalRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := &Journal{}
	_, err1 := j.Append(ctx)
	_, _, err2 := j.Read(ctx, 1, -1)
	for i, c := range []struct {
		err  error
		want string
	}{
		{err1, "logbook: invalid argument: append needs at least one event"},
		{err2, "logbook: invalid argument: max -1: want 0 (the server's default) or more"},
	} {
		if !errors.Is(c.err, ErrInvalidArgument) || c.err.Error() != c.want {
			t.Errorf("%d: got %v, want %q (matching ErrInvalidArgument)", i, c.err, c.want)
		}
	}
}
