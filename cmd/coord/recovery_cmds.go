package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// recoveryAttemptJSON is one attempt of a block recovery: a
// logbook.recovery.started event.
type recoveryAttemptJSON struct {
	RecoveryID uint64 `json:"recovery_id"`
	Attempt    uint32 `json:"attempt"`
	Primary    string `json:"primary"`
	Reason     string `json:"reason"`
	StartedAt  string `json:"started_at"`
	Deadline   string `json:"deadline"`
	Seq        uint64 `json:"seq"`
}

// recoveryJSON is every recovery of one block, rebuilt from the journal.
type recoveryJSON struct {
	BlockID  uint64                `json:"block_id"`
	Path     string                `json:"path"`
	OldGS    uint64                `json:"old_gs"`
	Attempts []recoveryAttemptJSON `json:"attempts"`
	// Set once a commit was accepted.
	Committed    bool     `json:"committed"`
	RecoveryID   uint64   `json:"recovery_id,omitempty"`
	NewGS        uint64   `json:"new_gs,omitempty"`
	Length       uint64   `json:"length,omitempty"`
	Participants []string `json:"participants,omitempty"`
	Deleted      bool     `json:"deleted,omitempty"`
	FileClosed   bool     `json:"file_closed,omitempty"`
	CommittedAt  string   `json:"committed_at,omitempty"`
}

// rfcTime is t in UTC as RFC 3339 with nanoseconds; "" for the zero time.
func rfcTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// collectRecoveries is every recovery in the retained journal, one record
// per block, in the order the blocks were first recovered. Events below
// trimmed_pos are gone, so are their recoveries.
func collectRecoveries(ctx context.Context, c *client.Client) ([]*recoveryJSON, error) {
	hs, err := c.Journal().Recoveries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*recoveryJSON, 0, len(hs))
	for _, h := range hs {
		out = append(out, toRecoveryJSON(h))
	}
	return out, nil
}

func toRecoveryJSON(h client.RecoveryHistory) *recoveryJSON {
	r := &recoveryJSON{BlockID: h.BlockID, Path: h.Path, OldGS: h.OldGS, Attempts: []recoveryAttemptJSON{}}
	for _, e := range h.Attempts {
		a := e.Attempt
		r.Attempts = append(r.Attempts, recoveryAttemptJSON{
			RecoveryID: a.ID, Attempt: a.Attempt, Primary: a.Primary, Reason: a.Reason,
			StartedAt: rfcTime(e.Time), Deadline: rfcTime(a.Deadline), Seq: e.Seq,
		})
	}
	if e := h.Committed; e != nil {
		cm := e.Commit
		r.Committed, r.RecoveryID, r.NewGS, r.Length = true, cm.RecoveryID, cm.NewGS, cm.Length
		r.Participants = append([]string(nil), cm.Participants...)
		r.Deleted, r.FileClosed = cm.Deleted, cm.FileClosed
		r.CommittedAt = rfcTime(e.Time)
	}
	return r
}

// writeRecoveries prints coord recovery ls.
func writeRecoveries(w io.Writer, recs []*recoveryJSON) error {
	t := newTable(w)
	fmt.Fprintln(t, "BLOCK\tPATH\tATTEMPTS\tPRIMARY\tOUTCOME")
	for _, r := range recs {
		primary := "-" // its attempts were trimmed, its commit was not
		if n := len(r.Attempts); n > 0 {
			primary = r.Attempts[n-1].Primary
		}
		fmt.Fprintf(t, "%d\t%s\t%d\t%s\t%s\n", r.BlockID, r.Path, len(r.Attempts), primary, outcome(r))
	}
	return t.Flush()
}

// writeRecovery prints coord recovery show.
func writeRecovery(w io.Writer, r *recoveryJSON) {
	fmt.Fprintf(w, "block %d of %s (GS %d before recovery)\n", r.BlockID, r.Path, r.OldGS)
	for _, a := range r.Attempts {
		fmt.Fprintf(w, "  attempt %d: recovery id %d, primary %s, started %s, deadline %s (%s)\n", a.Attempt, a.RecoveryID, a.Primary, a.StartedAt, a.Deadline, a.Reason)
	}
	fmt.Fprintf(w, "  outcome: %s\n", outcome(r))
	if r.Committed && !r.Deleted {
		fmt.Fprintf(w, "  participants: %s\n", strings.Join(r.Participants, ", "))
	}
}

func newRecoveryCmd() *cobra.Command {
	var lo, so *clientOpts
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List every block recovery in the retained journal",
		Long: `List every block recovery found in the retained journal (the
logbook.recovery.* audit events): the block, its file, how many attempts
it took, the last primary, and the outcome (the committed length and GS, or
still running).`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return lo.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				recs, err := collectRecoveries(ctx, c)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if lo.json {
					return writeJSON(w, struct {
						Recoveries []*recoveryJSON `json:"recoveries"`
					}{recs})
				}
				return writeRecoveries(w, recs)
			})
		}),
	}
	lo = addClientFlags(ls, 30*time.Second, clientTimeoutHelp)
	show := &cobra.Command{
		Use:   "show BLOCK_ID",
		Short: "Show one block's recoveries: every attempt, primary, participants, chosen length",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usageErrorf("block id %q: want a decimal number", args[0])
			}
			return so.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				recs, err := collectRecoveries(ctx, c)
				if err != nil {
					return err
				}
				var r *recoveryJSON
				for _, x := range recs {
					if x.BlockID == id {
						r = x
					}
				}
				if r == nil {
					return fmt.Errorf("%w: no recovery of block %d in the retained journal", client.ErrNotFound, id)
				}
				w := cmd.OutOrStdout()
				if so.json {
					return writeJSON(w, r)
				}
				writeRecovery(w, r)
				return nil
			})
		}),
	}
	so = addClientFlags(show, 30*time.Second, clientTimeoutHelp)
	return groupCmd("recovery", "Inspect block recoveries (from the journal's audit events)", ls, show)
}

func outcome(r *recoveryJSON) string {
	switch {
	case !r.Committed:
		return "in progress"
	case r.Deleted:
		return fmt.Sprintf("committed by recovery %d: block deleted (no replica had data)", r.RecoveryID)
	default:
		closed := ""
		if r.FileClosed {
			closed = ", file closed"
		}
		return fmt.Sprintf("committed by recovery %d: length %d, GS %d, %d replicas%s", r.RecoveryID, r.Length, r.NewGS, len(r.Participants), closed)
	}
}
