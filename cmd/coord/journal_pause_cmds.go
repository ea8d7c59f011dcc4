package main

import (
	"context"
	"fmt"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// newPauseCmd builds journal pause and journal resume.
func newPauseCmd(pause bool) *cobra.Command {
	var o *clientOpts
	use, short := "resume", "Restart the leader's submit path; queued appends drain in order"
	if pause {
		use, short = "pause", "Stop the leader's submit path: appends wait, in order, nothing is lost"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

This is the current leader's switch (like Ceph's mds_log_pause): a new leader
starts unpaused. journal positions shows "paused" when asked of the leader.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Journal().SetPaused(ctx, pause); err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Paused bool `json:"paused"`
					}{pause})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "journal submit path %sd\n", use)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
