package client

import (
	"context"
	"errors"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSessionAckedSeq(t *testing.T) {
	s := newSession("c")
	begin := func() (uint64, uint64) {
		tk, err := s.begin(context.Background())
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
	s := newSession("c")
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
	tk, _ := s.begin(context.Background())
	if tk.id != "c.3" || tk.established || tk.acked != tk.seq-1 {
		t.Fatalf("the request after: %+v", tk)
	}
}
