// Package poll waits for a condition with a deadline: what tests and
// tools use instead of sleeping for a guessed time.
package poll

import (
	"context"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it returns true (Until returns
// nil) or ctx ends (Until returns ctx's error).
func Until(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Within is Until with a timeout instead of a context; it reports whether
// cond became true in time.
func Within(timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return Until(ctx, cond) == nil
}
