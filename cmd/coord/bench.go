package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/rusage"
	"github.com/spf13/cobra"
)

// maxBenchSamples bounds the latency samples kept over all clients; beyond
// it each client keeps a uniform reservoir sample of its own calls.
const maxBenchSamples = 2_000_000

type benchOptions struct {
	clients int
	// conns is how many SDK clients (each its own connections and
	// session) the clients share round-robin, as etcd's benchmark --conns;
	// 0 means one per client.
	conns    int
	size     int
	batch    int
	duration time.Duration
	warmup   time.Duration
	// stream > 0: submit asynchronously on the append stream, keeping up
	// to stream submissions in flight per client.
	stream int
	// cpuProfile: write the load generator's CPU profile here.
	cpuProfile string
	// spread: SDK client i is given only endpoint i mod n and sends its
	// appends there (client.Config.SpreadOverMembers); followers forward
	// them to the leader.
	spread bool
	// timeline: also report each second of the measured duration.
	timeline bool
}

func (b benchOptions) validate() error {
	switch {
	case b.clients < 1 || b.clients > 4096:
		return usageErrorf("--clients %d: want 1..4096", b.clients)
	case b.conns < 0 || b.conns > b.clients:
		return usageErrorf("--conns %d: want 0..--clients (%d)", b.conns, b.clients)
	case b.size < 0:
		return usageErrorf("--size %d: want >= 0", b.size)
	case b.batch < 1:
		return usageErrorf("--batch %d: want >= 1", b.batch)
	case b.duration <= 0:
		return usageErrorf("--duration %s: want > 0", b.duration)
	case b.warmup < 0:
		return usageErrorf("--warmup %s: want >= 0", b.warmup)
	case b.stream < 0 || b.stream > 4096:
		return usageErrorf("--stream %d: want 0..4096", b.stream)
	}
	return nil
}

// benchResult is the JSON shape of coord bench journal.
type benchResult struct {
	firstErr     error   // reported on stderr, not in the JSON
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
	// Timeline is each second of the measured duration (--timeline).
	Timeline []timelineSecond `json:"timeline,omitempty"`
	// ReplayAtStart is each coordinator's startup replay, as coord status
	// shows it, by member id: how fast it rebuilt its state when it last
	// started (absent for a member that started empty).
	ReplayAtStart map[string]*replayJSON `json:"replay_at_start,omitempty"`
	members       []*pb.MemberStatus
}

// addReplays asks the cluster for its members' startup replays (coord
// status's "replay at start") for the report; best effort.
func (r *benchResult) addReplays(ctx context.Context, cfg client.Config) {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return
	}
	r.members = st.Members
	for _, m := range st.Members {
		if j := toReplayJSON(m.GetStartupReplay()); j != nil {
			if r.ReplayAtStart == nil {
				r.ReplayAtStart = map[string]*replayJSON{}
			}
			r.ReplayAtStart[m.GetId()] = j
		}
	}
}

// reservoir keeps at most cap samples, a uniform sample of all added.
type reservoir struct {
	samples []time.Duration
	seen    int64
	cap     int
	rng     *rand.Rand
}

func (r *reservoir) add(d time.Duration) {
	r.seen++
	if len(r.samples) < r.cap {
		r.samples = append(r.samples, d)
		return
	}
	if j := r.rng.Int64N(r.seen); j < int64(r.cap) {
		r.samples[j] = d
	}
}

// percentile is the nearest-rank percentile (0 < p <= 1) of sorted samples,
// in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// benchWorker is one client's loop state.
type benchWorker struct {
	ops, errs int64
	firstErr  error
	lat       reservoir
	timeline  bool
	seconds   int // of the measured duration, rounded up
	tl        timeline
}

// done counts a successful call that started at or after the measured
// start t0 and ended at t1, no later than the end.
func (w *benchWorker) done(measureStart, t0, t1 time.Time) {
	w.ops++
	w.lat.add(t1.Sub(t0))
	if w.timeline {
		// A call that ends at the very end belongs to the last second.
		w.tl.add(min(int(t1.Sub(measureStart)/time.Second), w.seconds-1), t1.Sub(t0))
	}
}

// runBench appends with opts.clients concurrent clients spread round-robin
// over opts.conns client.Clients (one each when conns is 0), for the warmup
// and then the measured duration. Calls that start during the warmup, and
// successful calls that finish after the end, are not counted.
func runBench(ctx context.Context, cfg client.Config, opts benchOptions, callTimeout time.Duration) (benchResult, error) {
	if opts.conns == 0 {
		opts.conns = opts.clients
	}
	clients := make([]*client.Client, opts.conns)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	setup, cancel := context.WithTimeout(ctx, callTimeout)
	errs := make([]error, opts.conns)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			if opts.spread {
				c.Endpoints = []string{cfg.Endpoints[i%len(cfg.Endpoints)]}
				c.SpreadOverMembers = true
			}
			clients[i], errs[i] = client.New(setup, c)
		}()
	}
	wg.Wait()
	cancel()
	for _, err := range errs {
		if err != nil {
			return benchResult{}, fmt.Errorf("connect: %w", err) // the first is enough: they share a cause
		}
	}

	payload := make([]byte, opts.size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	events := make([]client.Event, opts.batch)
	for i := range events {
		events[i] = client.Event{Type: "bench", Payload: payload}
	}
	measureStart := time.Now().Add(opts.warmup)
	end := measureStart.Add(opts.duration)
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
	workers := make([]*benchWorker, opts.clients)
	perClient := max(1, maxBenchSamples/opts.clients)
	seconds := int((opts.duration + time.Second - 1) / time.Second)
	for i := range workers {
		c := clients[i%len(clients)]
		w := &benchWorker{lat: reservoir{cap: perClient, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}, timeline: opts.timeline, seconds: seconds}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if opts.stream > 0 {
				w.streamLoop(ctx, c, events, measureStart, end, opts.stream)
			} else {
				w.loop(ctx, c, events, measureStart, end, callTimeout)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return benchResult{}, err
	}
	cpu := rusage.ProcessCPU() - <-cpuAtStart

	res := benchResult{Clients: opts.clients, Conns: opts.conns, Spread: opts.spread, Size: opts.size, Batch: opts.batch, DurationS: opts.duration.Seconds()}
	var all []time.Duration
	var tls []timeline
	for _, w := range workers {
		tls = append(tls, w.tl)
		res.Ops += w.ops
		res.Errors += w.errs
		if w.firstErr != nil && res.firstErr == nil {
			res.firstErr = w.firstErr
		}
		all = append(all, w.lat.samples...)
	}
	slices.Sort(all)
	res.OpsPerSec = float64(res.Ops) / opts.duration.Seconds()
	res.CPUS = cpu.Seconds()
	if res.Ops > 0 {
		res.CPUUsPerOp = float64(cpu.Microseconds()) / float64(res.Ops)
	}
	res.EventsPerSec = res.OpsPerSec * float64(opts.batch)
	res.P50Ms = percentile(all, 0.50)
	res.P99Ms = percentile(all, 0.99)
	res.P999Ms = percentile(all, 0.999)
	if opts.timeline {
		res.Timeline = mergeTimelines(tls, seconds)
	}
	return res, nil
}

func (w *benchWorker) loop(ctx context.Context, c *client.Client, events []client.Event, measureStart, end time.Time, callTimeout time.Duration) {
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

func newBenchCmd() *cobra.Command {
	var (
		o    *clientOpts
		opts benchOptions
	)
	journal := &cobra.Command{
		Use:   "journal",
		Short: "Measure append throughput and latency",
		Long: `Append --size-byte events (--batch per call) from --clients concurrent
clients, each with its own SDK client (or spread round-robin over --conns
SDK clients, as etcd's benchmark does), for --warmup and then --duration.
By default every SDK client sends its appends to the leader; with --spread
SDK client i sends them to endpoint i mod n, so the clients are spread over
the members and followers forward their share to the leader. Errors are
counted, not fatal. Prints calls per second, latency percentiles of
successful calls (ms), the error count, and this process's own CPU time
over the measured duration (the load generator's share of the machine);
with --timeline also each second of the measured duration: calls ended in
it, and their p50, p99 and maximum latency (to within 25%, from
logarithmic buckets), to show stalls. Then, as coord status does, each
coordinator's replay at its last start (events/s restoring its snapshot and
applying the log after it, until caught up): restart a coordinator holding
the journal to measure it. Exit 1 when no call succeeded.`,
		Example: `  coord bench journal --clients 16 --size 256 --duration 10s --json`,
		Args:    cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), opts.warmup+opts.duration+2*o.timeout)
			defer cancel()
			if opts.cpuProfile != "" {
				stop, err := startCPUProfile(opts.cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			res, err := runBench(ctx, cfg, opts, o.timeout)
			if err == nil && res.firstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench: %d errors; first: %v\n", res.Errors, res.firstErr)
			}
			if err != nil {
				return o.explain(err)
			}
			res.addReplays(ctx, cfg)
			w := cmd.OutOrStdout()
			if o.json {
				err = writeJSON(w, res)
			} else {
				t := newTable(w)
				fmt.Fprintf(t, "clients\t%d\nsize\t%d B\nbatch\t%d\nduration\t%s\nops\t%d\nops/s\t%.1f\nevents/s\t%.1f\np50\t%.3f ms\np99\t%.3f ms\np99.9\t%.3f ms\nerrors\t%d\nclient CPU\t%.2f s (%.1f µs per call)\n",
					res.Clients, res.Size, res.Batch, opts.duration, res.Ops, res.OpsPerSec, res.EventsPerSec, res.P50Ms, res.P99Ms, res.P999Ms, res.Errors, res.CPUS, res.CPUUsPerOp)
				if len(res.Timeline) > 0 {
					fmt.Fprintf(t, "\nsecond\tops\tp50 ms\tp99 ms\tmax ms\n")
					for _, s := range res.Timeline {
						fmt.Fprintf(t, "%d\t%d\t%.3f\t%.3f\t%.3f\n", s.Second, s.Ops, s.P50Ms, s.P99Ms, s.MaxMs)
					}
				}
				err = t.Flush()
				writeReplays(w, res.members)
			}
			if err != nil {
				return err
			}
			if res.Ops == 0 {
				return fmt.Errorf("no append succeeded (%d errors)", res.Errors)
			}
			return nil
		}),
	}
	fs := journal.Flags()
	fs.IntVar(&opts.clients, "clients", 8, "concurrent clients, each with its own connection and session unless --conns is set")
	fs.IntVar(&opts.conns, "conns", 0, "SDK clients (connections and sessions) the clients share round-robin, like etcd's benchmark --conns (0: one per client)")
	fs.IntVar(&opts.size, "size", 256, "payload bytes per event")
	fs.IntVar(&opts.batch, "batch", 1, "events per Append call")
	fs.DurationVar(&opts.duration, "duration", 10*time.Second, "measured duration")
	fs.DurationVar(&opts.warmup, "warmup", time.Second, "unmeasured warmup before the measured duration")
	fs.StringVar(&opts.cpuProfile, "cpuprofile", "", "write the benchmark client's own CPU profile to this file (go tool pprof)")
	fs.BoolVar(&opts.spread, "spread", false, "spread the clients over the members: SDK client i (see --conns) sends its appends to endpoint i mod n, which forwards them to the leader unless it is the leader (default: every SDK client sends to the leader)")
	fs.BoolVar(&opts.timeline, "timeline", false, "also report each second of the measured duration: calls, p50, p99 and maximum latency")
	fs.IntVar(&opts.stream, "stream", 0, "submit on the streaming append with this many submissions in flight per client (0: unary Append calls)")
	o = addClientFlags(journal, 5*time.Second, "deadline for connecting and for each Append call, its retries included")
	bench := groupCmd("bench", "Benchmark a running cluster", journal, newBenchTailCmd(), newBenchWriteCmd(), newBenchRecoveryCmd())
	var gcPercent int
	bench.PersistentFlags().IntVar(&gcPercent, "gc-percent", benchGCPercent, "garbage-collection target of this load generator, as GOGC (see coord serve --help); GOGC in the environment wins")
	bench.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.Root().PersistentPreRunE(cmd, args); err != nil {
			return err
		}
		return setGCPercent(gcPercent)
	}
	return bench
}

// benchGCPercent is the load generator's garbage-collection target. A
// generator's live heap is a few MB (its connections and callers), so at
// Go's default of 100 it collects many times a second, and each collection
// takes a quarter of the machine's Ps for marking and scans every caller's
// stack: CPU taken from the cluster it measures when both share a machine.
// At 400, 100 clients spread over a coord dev cluster cost the generator
// 29-31 µs of CPU per append instead of 40-47 (docs/benchmarks.md, "What
// the settings are worth"). bench/etcd-vs-logbook.sh runs etcd's load
// generator with the same GOGC.
const benchGCPercent = 400

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// streamLoop keeps up to window submissions in flight on the client's
// append stream; an op's latency runs from Submit to safe.
func (w *benchWorker) streamLoop(ctx context.Context, c *client.Client, events []client.Event, measureStart, end time.Time, window int) {
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
