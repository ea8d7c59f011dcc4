package replica

import (
	"context"
	"time"
)

// throttle paces work to a rate (units per second); rate 0 is unlimited.
type throttle struct {
	rate  float64
	start time.Time
	used  float64
	stop  <-chan struct{}
}

func newThrottle(rate float64, stop <-chan struct{}) *throttle {
	return &throttle{rate: rate, start: time.Now(), stop: stop}
}

// wait accounts n units and sleeps until they are due.
func (t *throttle) wait(ctx context.Context, n int64) error {
	if t == nil || t.rate <= 0 {
		return ctx.Err()
	}
	t.used += float64(n)
	due := t.start.Add(time.Duration(t.used / t.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.stop:
			return context.Canceled
		}
	}
	return ctx.Err()
}
