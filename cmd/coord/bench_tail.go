package main

import (
	"fmt"

	"github.com/logbookhq/logbook/bench"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// newBenchTailCmd measures how fast Tail streams deliver events
// (bench.RunTail).
func newBenchTailCmd() *cobra.Command {
	var (
		o   *clientOpts
		cfg = bench.DefaultTailConfig()
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
			if err := benchUsage(cfg.Validate()); err != nil {
				return err
			}
			ccfg, err := o.config()
			if err != nil {
				return err
			}
			cfg.Client, cfg.Timeout = ccfg, o.timeout
			res, err := bench.RunTail(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "followers %d, events %d: slowest follower %.0f events/s, all followers %.0f events/s\n",
				res.Followers, res.Events, res.MinPerFollowerEPS, res.TotalEPS)
			return err
		}),
	}
	cmd.Flags().IntVar(&cfg.Followers, "followers", cfg.Followers, "concurrent tail consumers")
	cmd.Flags().IntVar(&cfg.Events, "events", cfg.Events, "events to append and then tail")
	cmd.Flags().IntVar(&cfg.Size, "size", cfg.Size, "payload bytes per event")
	o = addClientFlags(cmd, cfg.Timeout, "deadline for the whole benchmark")
	return cmd
}
