package main

import (
	"context"
	"fmt"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// journalConfigJSON is coord journal config --json.
type journalConfigJSON struct {
	EventsPerSegment   uint64 `json:"events_per_segment"`
	SegmentBytes       uint64 `json:"segment_bytes"`
	SessionIdleTimeout string `json:"session_idle_timeout"`
	MaxSegments        uint64 `json:"max_segments"`
	MaxEvents          uint64 `json:"max_events"`
	Held               bool   `json:"held"`
	LogFormat          uint32 `json:"log_format"`
	AppliedIndex       uint64 `json:"applied_index"`
	MemberID           string `json:"member_id"`
}

func writeJournalConfig(cmd *cobra.Command, asJSON bool, c client.JournalConfig) error {
	w := cmd.OutOrStdout()
	if asJSON {
		return writeJSON(w, journalConfigJSON{c.EventsPerSegment, c.SegmentBytes, c.SessionIdleTimeout.String(), c.MaxSegments, c.MaxEvents,
			c.Held, c.LogFormat, c.AppliedIndex, c.MemberID})
	}
	held := "yes (coord journal config set changes them)"
	if !c.Held {
		held = "no: each leader replicates its own flags (log format 11 holds them)"
	}
	t := newTable(w)
	fmt.Fprintf(t, "events per segment\t%d\nsegment bytes\t%d\nsession idle timeout\t%s\nmax segments\t%s\nmax events\t%s\nheld by the cluster\t%s\nlog format\t%d\napplied index\t%d\nmember\t%s\n",
		c.EventsPerSegment, c.SegmentBytes, c.SessionIdleTimeout, bound(c.MaxSegments, c.Held), bound(c.MaxEvents, c.Held), held, c.LogFormat, c.AppliedIndex, orDash(c.MemberID))
	return t.Flush()
}

// bound prints a trim bound: 0 is none; before the cluster holds its
// settings the bounds are each leader's own flags.
func bound(v uint64, held bool) string {
	switch {
	case !held:
		return "-"
	case v == 0:
		return "none"
	}
	return fmt.Sprint(v)
}

func newJournalConfigCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the journal settings the cluster replicates",
		Long: `Show the journal settings the cluster replicates, as the leader has applied
them: segment rolling (events per segment, segment bytes), the client
session idle timeout, and the automatic trim bounds (max segments, max
events; "none" for no bound).

From log format 11 on the cluster holds them ("held by the cluster: yes"):
the first leader at format 11 seeded them from its flags
(--journal-events-per-segment, --journal-segment-bytes,
--session-idle-timeout, --journal-max-segments, --journal-max-events), and
only "coord journal config set" changes them; a coordinator given other
values in those flags says so in coord status. Before format 11 each leader
replicates its own flags and trims by its own bounds.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				cfg, err := c.Journal().Config(ctx)
				if err != nil {
					return err
				}
				return writeJournalConfig(cmd, o.json, cfg)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	cmd.AddCommand(newJournalConfigSetCmd())
	return cmd
}

func newJournalConfigSetCmd() *cobra.Command {
	var o *clientOpts
	var eps, segBytes, maxSegs, maxEvents uint64
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "set [--events-per-segment N] [--segment-bytes N] [--session-idle-timeout D] [--max-segments N] [--max-events N]",
		Short: "Change the journal settings the cluster holds",
		Long: `Change the journal settings the cluster holds (log format 11: every voter
upgraded; FailedPrecondition LOG_FORMAT before). Only the settings given
change; the others keep their values. It is a replicated command, answered
once applied, and prints the settings then. A change of the segment
thresholds applies from the next event on: the open segment seals at the
first event that brings it to the new bound or finds it past it.

Bounds: events per segment 1..1073741824, segment bytes 1..1099511627776,
session idle timeout whole seconds up to 720h (0: sessions expire only
beyond the session bound), max segments 0..1048576, max events
0..1099511627776 (0: no bound).`,
		Example: `  coord journal config set --events-per-segment 4096 --max-segments 256
  coord journal config set --session-idle-timeout 2h`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var s client.JournalSettings
			check := func(name string, v, lo, hi uint64) (*uint64, error) {
				if !f.Changed(name) {
					return nil, nil
				}
				if v < lo || v > hi {
					return nil, usageErrorf("--%s %d: want %d..%d", name, v, lo, hi)
				}
				return &v, nil
			}
			var err error
			if s.EventsPerSegment, err = check("events-per-segment", eps, 1, fsm.MaxEventsPerSegment); err != nil {
				return err
			}
			if s.SegmentBytes, err = check("segment-bytes", segBytes, 1, fsm.MaxSegmentBytes); err != nil {
				return err
			}
			if s.MaxSegments, err = check("max-segments", maxSegs, 0, fsm.MaxTrimSegments); err != nil {
				return err
			}
			if s.MaxEvents, err = check("max-events", maxEvents, 0, fsm.MaxTrimEvents); err != nil {
				return err
			}
			if f.Changed("session-idle-timeout") {
				if idle < 0 || idle > fsm.MaxSessionIdleTimeout || idle%time.Second != 0 {
					return usageErrorf("--session-idle-timeout %s: want whole seconds, 0..%s", idle, fsm.MaxSessionIdleTimeout)
				}
				s.SessionIdleTimeout = &idle
			}
			if s == (client.JournalSettings{}) {
				return usageErrorf("give at least one setting to change (see --help)")
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				cfg, err := c.Journal().SetConfig(ctx, s)
				if err != nil {
					return err
				}
				return writeJournalConfig(cmd, o.json, cfg)
			})
		}),
	}
	fs := cmd.Flags()
	fs.Uint64Var(&eps, "events-per-segment", 0, "roll a segment after this many events")
	fs.Uint64Var(&segBytes, "segment-bytes", 0, "roll a segment after this many event bytes (type + payload)")
	fs.DurationVar(&idle, "session-idle-timeout", 0, "forget a client session unused for this long (whole seconds; 0: only beyond the session bound)")
	fs.Uint64Var(&maxSegs, "max-segments", 0, "trim the oldest expired segments beyond this many automatically (0: no bound)")
	fs.Uint64Var(&maxEvents, "max-events", 0, "trim the oldest expired segments while more events than this are retained (0: no bound)")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
