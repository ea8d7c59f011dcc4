package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/rusage"
)

// maxJournalSamples bounds the latency samples kept over all clients;
// beyond it each client keeps a uniform reservoir sample of its own calls.
const maxJournalSamples = 2_000_000

// JournalConfig is the journal append workload (coord bench journal).
type JournalConfig struct {
	// Client is the cluster: its Endpoints at least.
	Client client.Config
	// Clients is how many concurrent clients append, each in a loop.
	Clients int
	// Conns is how many SDK clients (each its own connections and
	// session) the clients share round-robin, as etcd's benchmark --conns;
	// 0 means one per client.
	Conns int
	// Size is the payload bytes per event, Batch the events per call.
	Size  int
	Batch int
	// Duration is the measured duration, after an unmeasured Warmup.
	Duration time.Duration
	Warmup   time.Duration
	// Stream > 0: submit asynchronously on the append stream, keeping up
	// to Stream submissions in flight per client (0: unary Append calls).
	Stream int
	// Spread: SDK client i is given only endpoint i mod n and sends its
	// appends there (client.Config.SpreadOverMembers); followers forward
	// them to the leader.
	Spread bool
	// Timeline: also report each second of the measured duration.
	Timeline bool
	// CallTimeout bounds connecting and each Append call, its retries
	// included. The whole run is bounded by Warmup + Duration +
	// 2·CallTimeout.
	CallTimeout time.Duration
}

// DefaultJournalConfig is coord bench journal's defaults (no Client).
func DefaultJournalConfig() JournalConfig {
	return JournalConfig{Clients: 8, Size: 256, Batch: 1, Duration: 10 * time.Second, Warmup: time.Second, CallTimeout: 5 * time.Second}
}

// Validate refuses a config out of range with a *ConfigError. It does not
// check Client: connecting does.
func (c JournalConfig) Validate() error {
	switch {
	case c.Clients < 1 || c.Clients > 4096:
		return configErrorf("--clients %d: want 1..4096", c.Clients)
	case c.Conns < 0 || c.Conns > c.Clients:
		return configErrorf("--conns %d: want 0..--clients (%d)", c.Conns, c.Clients)
	case c.Size < 0:
		return configErrorf("--size %d: want >= 0", c.Size)
	case c.Batch < 1:
		return configErrorf("--batch %d: want >= 1", c.Batch)
	case c.Duration <= 0:
		return configErrorf("--duration %s: want > 0", c.Duration)
	case c.Warmup < 0:
		return configErrorf("--warmup %s: want >= 0", c.Warmup)
	case c.Stream < 0 || c.Stream > 4096:
		return configErrorf("--stream %d: want 0..4096", c.Stream)
	case c.CallTimeout <= 0:
		return configErrorf("--timeout %s: want a positive duration", c.CallTimeout)
	}
	return nil
}

// JournalResult is the figures of a journal run; its JSON is coord bench
// journal's (which adds the members' replay_at_start).
type JournalResult struct {
	// FirstErr is the first failed call measured (Errors counts them).
	FirstErr     error   `json:"-"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p999_ms"`
	Errors       int64   `json:"errors"`
	EventsPerSec float64 `json:"events_per_sec"`
	Clients      int     `json:"clients"`
	Conns        int     `json:"conns"`
	Spread       bool    `json:"spread"`
	Size         int     `json:"size"`
	Batch        int     `json:"batch"`
	DurationS    float64 `json:"duration_s"`
	Ops          int64   `json:"ops"`
	// CPUS is the load generator's own CPU time (user + system) over the
	// measured duration, and CPUUsPerOp the same per successful call: the
	// generator shares the machine with the cluster in coord dev runs.
	CPUS       float64 `json:"cpu_s"`
	CPUUsPerOp float64 `json:"cpu_us_per_op"`
	// Timeline is each second of the measured duration (Timeline).
	Timeline []TimelineSecond `json:"timeline,omitempty"`
}

// journalWorker is one client's loop state.
type journalWorker struct {
	ops, errs int64
	firstErr  error
	lat       reservoir
	timeline  bool
	seconds   int // of the measured duration, rounded up
	tl        timeline
}

// done counts a successful call that started at or after the measured
// start t0 and ended at t1, no later than the end.
func (w *journalWorker) done(measureStart, t0, t1 time.Time) {
	w.ops++
	w.lat.add(t1.Sub(t0))
	if w.timeline {
		// A call that ends at the very end belongs to the last second.
		w.tl.add(min(int(t1.Sub(measureStart)/time.Second), w.seconds-1), t1.Sub(t0))
	}
}

// RunJournal appends with cfg.Clients concurrent clients spread
// round-robin over cfg.Conns client.Clients (one each when Conns is 0),
// for the warmup and then the measured duration. Calls that start during
// the warmup, and successful calls that finish after the end, are not
// counted; failed calls are counted, not fatal. It fails when cfg is
// invalid, when a client cannot connect, or when ctx ends.
func RunJournal(ctx context.Context, cfg JournalConfig) (JournalResult, error) {
	if err := cfg.Validate(); err != nil {
		return JournalResult{}, err
	}
	ctx, cancelRun := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration+2*cfg.CallTimeout)
	defer cancelRun()
	if cfg.Conns == 0 {
		cfg.Conns = cfg.Clients
	}
	clients := make([]*client.Client, cfg.Conns)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	setup, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	errs := make([]error, cfg.Conns)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg.Client
			if cfg.Spread && len(c.Endpoints) > 0 {
				c.Endpoints = []string{cfg.Client.Endpoints[i%len(cfg.Client.Endpoints)]}
				c.SpreadOverMembers = true
			}
			clients[i], errs[i] = client.New(setup, c)
		}()
	}
	wg.Wait()
	cancel()
	for _, err := range errs {
		if err != nil {
			return JournalResult{}, fmt.Errorf("connect: %w", err) // the first is enough: they share a cause
		}
	}

	payload := make([]byte, cfg.Size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	events := make([]client.Event, cfg.Batch)
	for i := range events {
		events[i] = client.Event{Type: "bench", Payload: payload}
	}
	measureStart := time.Now().Add(cfg.Warmup)
	end := measureStart.Add(cfg.Duration)
	cpuAtStart := make(chan time.Duration, 1)
	go func() {
		t := time.NewTimer(time.Until(measureStart))
		defer t.Stop()
		select {
		case <-t.C:
			cpuAtStart <- rusage.ProcessCPU()
		case <-ctx.Done():
			cpuAtStart <- 0
		}
	}()
	workers := make([]*journalWorker, cfg.Clients)
	perClient := max(1, maxJournalSamples/cfg.Clients)
	seconds := int((cfg.Duration + time.Second - 1) / time.Second)
	for i := range workers {
		c := clients[i%len(clients)]
		w := &journalWorker{lat: reservoir{cap: perClient, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}, timeline: cfg.Timeline, seconds: seconds}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Stream > 0 {
				w.streamLoop(ctx, c, events, measureStart, end, cfg.Stream)
			} else {
				w.loop(ctx, c, events, measureStart, end, cfg.CallTimeout)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return JournalResult{}, err
	}
	cpu := rusage.ProcessCPU() - <-cpuAtStart

	res := JournalResult{Clients: cfg.Clients, Conns: cfg.Conns, Spread: cfg.Spread, Size: cfg.Size, Batch: cfg.Batch, DurationS: cfg.Duration.Seconds()}
	var all []time.Duration
	var tls []timeline
	for _, w := range workers {
		tls = append(tls, w.tl)
		res.Ops += w.ops
		res.Errors += w.errs
		if w.firstErr != nil && res.FirstErr == nil {
			res.FirstErr = w.firstErr
		}
		all = append(all, w.lat.samples...)
	}
	slices.Sort(all)
	res.OpsPerSec = float64(res.Ops) / cfg.Duration.Seconds()
	res.CPUS = cpu.Seconds()
	if res.Ops > 0 {
		res.CPUUsPerOp = float64(cpu.Microseconds()) / float64(res.Ops)
	}
	res.EventsPerSec = res.OpsPerSec * float64(cfg.Batch)
	res.P50Ms = percentile(all, 0.50)
	res.P99Ms = percentile(all, 0.99)
	res.P999Ms = percentile(all, 0.999)
	if cfg.Timeline {
		res.Timeline = mergeTimelines(tls, seconds)
	}
	return res, nil
}

// loop makes unary Append calls until the end.
func (w *journalWorker) loop(ctx context.Context, c *client.Client, events []client.Event, measureStart, end time.Time, callTimeout time.Duration) {
	for {
		t0 := time.Now()
		if !t0.Before(end) || ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := c.Journal().Append(cctx, events...)
		cancel()
		t1 := time.Now()
		measured := !t0.Before(measureStart)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if measured {
				w.errs++
				if w.firstErr == nil {
					w.firstErr = err
				}
			}
			// A short pause keeps a persistent failure from spinning.
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		if measured && !t1.After(end) {
			w.done(measureStart, t0, t1)
		}
	}
}

// streamLoop keeps up to window submissions in flight on the client's
// append stream; an op's latency runs from Submit to safe.
func (w *journalWorker) streamLoop(ctx context.Context, c *client.Client, events []client.Event, measureStart, end time.Time, window int) {
	type sub struct {
		f  *client.Future
		t0 time.Time
	}
	var inflight []sub
	settle := func(s sub) {
		_, err := s.f.Wait(ctx)
		t1 := time.Now()
		measured := !s.t0.Before(measureStart)
		switch {
		case err != nil && ctx.Err() == nil && measured:
			w.errs++
			if w.firstErr == nil {
				w.firstErr = err
			}
		case err == nil && measured && !t1.After(end):
			w.done(measureStart, s.t0, t1)
		}
	}
	for time.Now().Before(end) && ctx.Err() == nil {
		if len(inflight) >= window {
			settle(inflight[0])
			inflight = inflight[1:]
		}
		inflight = append(inflight, sub{c.Journal().Submit(events...), time.Now()})
	}
	for _, s := range inflight {
		settle(s)
	}
}
