package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

var errTailBenchDone = errors.New("tail bench: done")

// newBenchTailCmd measures how fast Tail streams deliver events.
func newBenchTailCmd() *cobra.Command {
	var (
		o         *clientOpts
		followers int
		events    int
		size      int
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Measure tail throughput to several followers of the stream",
		Long: `Append --events events of --size bytes (on the streaming append), then start
--followers tail consumers, each its own SDK client, reading from the first
of those events to the last. Prints events per second per follower and in
total.`,
		Example: `  coord bench tail --followers 10 --events 200000 --json`,
		Args:    cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if followers < 1 || followers > 1024 || events < 1 || size < 0 {
				return usageErrorf("want --followers 1..1024, --events >= 1, --size >= 0")
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			c, err := client.New(ctx, cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			// A consumer holds the benchmark's events against automatic trim
			// until every follower has read them.
			name := fmt.Sprintf("bench-tail-%d", time.Now().UnixNano())
			if _, err := c.Journal().Consumers().Register(ctx, name, 0); err != nil {
				return fmt.Errorf("register the holding consumer: %w", err)
			}
			defer c.Journal().Consumers().Remove(context.WithoutCancel(ctx), name)
			payload := make([]byte, size)
			var first, last uint64
			var futs []*client.Future
			for i := 0; i < events; i++ {
				futs = append(futs, c.Journal().Submit(client.Event{Type: "bench-tail", Payload: payload}))
			}
			for i, f := range futs {
				seqs, err := f.Wait(ctx)
				if err != nil {
					return fmt.Errorf("append: %w", err)
				}
				if i == 0 {
					first = seqs[0]
				}
				last = seqs[0]
			}
			var wg sync.WaitGroup
			rates := make([]float64, followers)
			errs := make([]error, followers)
			start := time.Now()
			for i := 0; i < followers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fc, err := client.New(ctx, cfg)
					if err != nil {
						errs[i] = err
						return
					}
					defer fc.Close()
					t0 := time.Now()
					err = fc.Journal().Tail(ctx, first, func(e client.StoredEvent) error {
						if e.Seq >= last {
							return errTailBenchDone
						}
						return nil
					})
					if !errors.Is(err, errTailBenchDone) {
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
					return err // followers fail alike: the first says why
				}
			}
			minRate := rates[0]
			for _, r := range rates {
				minRate = min(minRate, r)
			}
			total := float64(last-first+1) * float64(followers) / elapsed.Seconds()
			if o.json {
				return writeJSON(cmd.OutOrStdout(), struct {
					Followers         int     `json:"followers"`
					Events            uint64  `json:"events"`
					Size              int     `json:"size"`
					MinPerFollowerEPS float64 `json:"min_events_per_sec_per_follower"`
					TotalEPS          float64 `json:"total_events_per_sec"`
				}{followers, last - first + 1, size, minRate, total})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "followers %d, events %d: slowest follower %.0f events/s, all followers %.0f events/s\n",
				followers, last-first+1, minRate, total)
			return err
		}),
	}
	cmd.Flags().IntVar(&followers, "followers", 1, "concurrent tail consumers")
	cmd.Flags().IntVar(&events, "events", 100000, "events to append and then tail")
	cmd.Flags().IntVar(&size, "size", 256, "payload bytes per event")
	o = addClientFlags(cmd, 5*time.Minute, "deadline for the whole benchmark")
	return cmd
}
