package main

// coord bench: thin commands over the workloads of package bench. Each
// parses its flags into the workload's Config, runs it and prints the
// Result, as a table or (--json) as the Result's JSON.

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/logbookhq/logbook/bench"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	group := groupCmd("bench", "Benchmark a running cluster", newBenchJournalCmd(), newBenchTailCmd(), newBenchWriteCmd(), newBenchRecoveryCmd())
	var gcPercent int
	group.PersistentFlags().IntVar(&gcPercent, "gc-percent", benchGCPercent, "garbage-collection target of this load generator, as GOGC (see coord serve --help); GOGC in the environment wins")
	group.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.Root().PersistentPreRunE(cmd, args); err != nil {
			return err
		}
		return setGCPercent(gcPercent)
	}
	return group
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

// benchUsage makes a workload config that Validate refused (a
// *bench.ConfigError, whose message names the flag) a usage error.
func benchUsage(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 2, err: err}
}

// benchJournalJSON is the JSON shape of coord bench journal: the
// workload's figures, then the members' startup replays.
type benchJournalJSON struct {
	bench.JournalResult
	// ReplayAtStart is each coordinator's startup replay, as coord status
	// shows it, by member id: how fast it rebuilt its state when it last
	// started (absent for a member that started empty).
	ReplayAtStart map[string]*replayJSON `json:"replay_at_start,omitempty"`
	members       []client.Member
}

// addReplays asks the cluster for its members' startup replays (coord
// status's "replay at start") for the report; best effort.
func (r *benchJournalJSON) addReplays(ctx context.Context, cfg client.Config) {
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
		if j := toReplayJSON(m.StartupReplay); j != nil {
			if r.ReplayAtStart == nil {
				r.ReplayAtStart = map[string]*replayJSON{}
			}
			r.ReplayAtStart[m.ID] = j
		}
	}
}

func newBenchJournalCmd() *cobra.Command {
	var (
		o          *clientOpts
		cfg        = bench.DefaultJournalConfig()
		cpuProfile string
	)
	cmd := &cobra.Command{
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
			if err := benchUsage(cfg.Validate()); err != nil {
				return err
			}
			ccfg, err := o.config()
			if err != nil {
				return err
			}
			cfg.Client, cfg.CallTimeout = ccfg, o.timeout
			ctx, cancel := context.WithTimeout(cmd.Context(), cfg.Warmup+cfg.Duration+2*o.timeout)
			defer cancel()
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			r, err := bench.RunJournal(ctx, cfg)
			if err == nil && r.FirstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench: %d errors; first: %v\n", r.Errors, r.FirstErr)
			}
			if err != nil {
				return o.explain(err)
			}
			res := benchJournalJSON{JournalResult: r}
			res.addReplays(ctx, cfg.Client)
			w := cmd.OutOrStdout()
			if o.json {
				err = writeJSON(w, res)
			} else {
				t := newTable(w)
				fmt.Fprintf(t, "clients\t%d\nsize\t%d B\nbatch\t%d\nduration\t%s\nops\t%d\nops/s\t%.1f\nevents/s\t%.1f\np50\t%.3f ms\np99\t%.3f ms\np99.9\t%.3f ms\nerrors\t%d\nclient CPU\t%.2f s (%.1f µs per call)\n",
					r.Clients, r.Size, r.Batch, cfg.Duration, r.Ops, r.OpsPerSec, r.EventsPerSec, r.P50Ms, r.P99Ms, r.P999Ms, r.Errors, r.CPUS, r.CPUUsPerOp)
				if len(r.Timeline) > 0 {
					fmt.Fprintf(t, "\nsecond\tops\tp50 ms\tp99 ms\tmax ms\n")
					for _, s := range r.Timeline {
						fmt.Fprintf(t, "%d\t%d\t%.3f\t%.3f\t%.3f\n", s.Second, s.Ops, s.P50Ms, s.P99Ms, s.MaxMs)
					}
				}
				err = t.Flush()
				writeReplays(w, res.members)
			}
			if err != nil {
				return err
			}
			if r.Ops == 0 {
				return fmt.Errorf("no append succeeded (%d errors)", r.Errors)
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients, each with its own connection and session unless --conns is set")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "SDK clients (connections and sessions) the clients share round-robin, like etcd's benchmark --conns (0: one per client)")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "payload bytes per event")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "events per Append call")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured duration")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured warmup before the measured duration")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the benchmark client's own CPU profile to this file (go tool pprof)")
	fs.BoolVar(&cfg.Spread, "spread", cfg.Spread, "spread the clients over the members: SDK client i (see --conns) sends its appends to endpoint i mod n, which forwards them to the leader unless it is the leader (default: every SDK client sends to the leader)")
	fs.BoolVar(&cfg.Timeline, "timeline", cfg.Timeline, "also report each second of the measured duration: calls, p50, p99 and maximum latency")
	fs.IntVar(&cfg.Stream, "stream", cfg.Stream, "submit on the streaming append with this many submissions in flight per client (0: unary Append calls)")
	o = addClientFlags(cmd, cfg.CallTimeout, "deadline for connecting and for each Append call, its retries included")
	return cmd
}

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
