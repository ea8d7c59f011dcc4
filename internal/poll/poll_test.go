package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if err := Until(context.Background(), func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("Until = %v after %d calls; want nil after 3", err, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := Until(ctx, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until on a condition that never holds = %v; want the deadline", err)
	}
	if Within(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Within reported a condition that never holds")
	}
	if !Within(time.Second, func() bool { return true }) {
		t.Fatal("Within missed a condition that holds at once")
	}
}
