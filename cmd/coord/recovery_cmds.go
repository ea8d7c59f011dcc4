package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
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

func nanosTime(n int64) string {
	if n == 0 {
		return ""
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}

// collectRecoveries folds the retained journal's recovery events into one
// record per block, in the order the blocks were first recovered. Events
// below trimmed_pos are gone, so are their recoveries.
func collectRecoveries(ctx context.Context, c *client.Client) ([]*recoveryJSON, error) {
	pos, err := c.Journal().Positions(ctx)
	if err != nil {
		return nil, err
	}
	byBlock := map[uint64]*recoveryJSON{}
	var order []uint64
	get := func(id uint64) *recoveryJSON {
		r := byBlock[id]
		if r == nil {
			r = &recoveryJSON{BlockID: id, Attempts: []recoveryAttemptJSON{}}
			byBlock[id] = r
			order = append(order, id)
		}
		return r
	}
	from := pos.TrimmedPos
	for page := 0; page < 1_000_000; page++ {
		evs, info, err := c.Journal().Read(ctx, from, 1000)
		if errors.Is(err, client.ErrOutOfRange) {
			if p, perr := c.Journal().Positions(ctx); perr == nil && p.TrimmedPos > from {
				from = p.TrimmedPos // trimmed while reading
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Type != fsm.EventRecoveryStarted && e.Type != fsm.EventRecoveryCommitted {
				continue
			}
			var ev fsmpb.NamespaceEvent
			if err := proto.Unmarshal(e.Payload, &ev); err != nil {
				return nil, fmt.Errorf("journal event %d (%s): %w", e.Seq, e.Type, err)
			}
			switch e.Type {
			case fsm.EventRecoveryStarted:
				op := ev.GetOp().GetStartRecovery()
				b := ev.GetResult().GetBlock()
				r := get(op.GetBlockId())
				r.Path = op.GetPath()
				if len(r.Attempts) == 0 {
					r.OldGS = b.GetGs()
				}
				rec := b.GetRecovery()
				r.Attempts = append(r.Attempts, recoveryAttemptJSON{
					RecoveryID: rec.GetRecoveryId(), Attempt: rec.GetAttempt(), Primary: rec.GetPrimary(),
					Reason: op.GetReason(), StartedAt: nanosTime(ev.GetUnixNanos()), Deadline: nanosTime(rec.GetDeadlineUnixNanos()), Seq: e.Seq,
				})
			case fsm.EventRecoveryCommitted:
				op := ev.GetOp().GetCommitBlockSync()
				r := get(op.GetBlockId())
				r.Committed, r.RecoveryID, r.NewGS, r.Length = true, op.GetRecoveryId(), op.GetNewGs(), op.GetNewLength()
				r.Participants = append([]string(nil), op.GetTargets()...)
				r.Deleted, r.FileClosed = op.GetDeleteBlock(), ev.GetResult().GetClosed() || op.GetCloseFile()
				r.CommittedAt = nanosTime(ev.GetUnixNanos())
			}
		}
		if len(evs) == 0 || evs[len(evs)-1].Seq+1 >= info.NextSeq {
			break
		}
		from = evs[len(evs)-1].Seq + 1
	}
	out := make([]*recoveryJSON, 0, len(order))
	for _, id := range order {
		out = append(out, byBlock[id])
	}
	return out, nil
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
				t := newTable(w)
				fmt.Fprintln(t, "BLOCK\tPATH\tATTEMPTS\tPRIMARY\tOUTCOME")
				for _, r := range recs {
					last := r.Attempts[len(r.Attempts)-1]
					fmt.Fprintf(t, "%d\t%s\t%d\t%s\t%s\n", r.BlockID, r.Path, len(r.Attempts), last.Primary, outcome(r))
				}
				return t.Flush()
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
				fmt.Fprintf(w, "block %d of %s (GS %d before recovery)\n", r.BlockID, r.Path, r.OldGS)
				for _, a := range r.Attempts {
					fmt.Fprintf(w, "  attempt %d: recovery id %d, primary %s, started %s, deadline %s (%s)\n", a.Attempt, a.RecoveryID, a.Primary, a.StartedAt, a.Deadline, a.Reason)
				}
				fmt.Fprintf(w, "  outcome: %s\n", outcome(r))
				if r.Committed && !r.Deleted {
					fmt.Fprintf(w, "  participants: %s\n", strings.Join(r.Participants, ", "))
				}
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
