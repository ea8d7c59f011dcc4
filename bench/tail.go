package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
)

// TailConfig is the tail workload (coord bench tail).
type TailConfig struct {
	// Client is the cluster: its Endpoints at least.
	Client client.Config
	// Followers is how many tail consumers read the events, each its own
	// SDK client.
	Followers int
	// Events is how many events of Size payload bytes are appended first.
	Events int
	Size   int
	// Timeout bounds the whole run.
	Timeout time.Duration
}

// DefaultTailConfig is coord bench tail's defaults (no Client).
func DefaultTailConfig() TailConfig {
	return TailConfig{Followers: 1, Events: 100000, Size: 256, Timeout: 5 * time.Minute}
}

// Validate refuses a config out of range with a *ConfigError. It does not
// check Client: connecting does.
func (c TailConfig) Validate() error {
	switch {
	case c.Followers < 1 || c.Followers > 1024 || c.Events < 1 || c.Size < 0:
		return configErrorf("want --followers 1..1024, --events >= 1, --size >= 0")
	case c.Timeout <= 0:
		return configErrorf("--timeout %s: want a positive duration", c.Timeout)
	}
	return nil
}

// TailResult is the figures of a tail run; its JSON is coord bench tail's.
type TailResult struct {
	Followers int    `json:"followers"`
	Events    uint64 `json:"events"`
	Size      int    `json:"size"`
	// MinPerFollowerEPS is the slowest follower's events per second,
	// TotalEPS all followers' events over the time until the last was done.
	MinPerFollowerEPS float64 `json:"min_events_per_sec_per_follower"`
	TotalEPS          float64 `json:"total_events_per_sec"`
}

var errTailDone = errors.New("tail bench: done")

// RunTail appends cfg.Events events (on the streaming append), then starts
// cfg.Followers tail consumers, each its own SDK client, reading from the
// first of those events to the last, and measures how fast they deliver.
// A consumer holds the events against automatic trim until every follower
// has read them. Any failure ends the run with an error.
func RunTail(ctx context.Context, cfg TailConfig) (TailResult, error) {
	if err := cfg.Validate(); err != nil {
		return TailResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c, err := client.New(ctx, cfg.Client)
	if err != nil {
		return TailResult{}, err
	}
	defer c.Close()
	name := fmt.Sprintf("bench-tail-%d", time.Now().UnixNano())
	if _, err := c.Journal().Consumers().Register(ctx, name, 0); err != nil {
		return TailResult{}, fmt.Errorf("register the holding consumer: %w", err)
	}
	defer c.Journal().Consumers().Remove(context.WithoutCancel(ctx), name)
	payload := make([]byte, cfg.Size)
	var first, last uint64
	var futs []*client.Future
	for i := 0; i < cfg.Events; i++ {
		futs = append(futs, c.Journal().Submit(client.Event{Type: "bench-tail", Payload: payload}))
	}
	for i, f := range futs {
		seqs, err := f.Wait(ctx)
		if err != nil {
			return TailResult{}, fmt.Errorf("append: %w", err)
		}
		if i == 0 {
			first = seqs[0]
		}
		last = seqs[0]
	}
	var wg sync.WaitGroup
	rates := make([]float64, cfg.Followers)
	errs := make([]error, cfg.Followers)
	start := time.Now()
	for i := 0; i < cfg.Followers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc, err := client.New(ctx, cfg.Client)
			if err != nil {
				errs[i] = err
				return
			}
			defer fc.Close()
			t0 := time.Now()
			err = fc.Journal().Tail(ctx, first, func(e client.StoredEvent) error {
				if e.Seq >= last {
					return errTailDone
				}
				return nil
			})
			if !errors.Is(err, errTailDone) {
				errs[i] = err
				return
			}
			rates[i] = float64(last-first+1) / time.Since(t0).Seconds()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return TailResult{}, err // followers fail alike: the first says why
		}
	}
	minRate := rates[0]
	for _, r := range rates {
		minRate = min(minRate, r)
	}
	events := last - first + 1
	return TailResult{Followers: cfg.Followers, Events: events, Size: cfg.Size, MinPerFollowerEPS: minRate,
		TotalEPS: float64(events) * float64(cfg.Followers) / elapsed.Seconds()}, nil
}
