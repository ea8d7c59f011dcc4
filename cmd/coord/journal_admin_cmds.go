package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
)

// parseSeq parses a positional SEQ argument: a positive integer.
func parseSeq(what, s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, usageErrorf("%s %q: want a positive integer", what, s)
	}
	return n, nil
}

// checkSeqFlag rejects an explicit --NAME 0 (0 is only the unset default).
func checkSeqFlag(cmd *cobra.Command, name string, v uint64) error {
	if cmd.Flags().Changed(name) && v == 0 {
		return usageErrorf("--%s 0: want a positive seq", name)
	}
	return nil
}

// checkConsumerName rejects a name the cluster would refuse.
func checkConsumerName(name string) error {
	if !fsm.ValidConsumerName(name) {
		return usageErrorf("consumer name %q: want 1-128 of [A-Za-z0-9._-], starting alphanumeric", name)
	}
	return nil
}

func newPositionsCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "positions",
		Short: "Show the journal positions, as the leader sees them",
		Long: `Show the journal positions as the answering member sees them (the client
asks the leader):

  write pos      leader: last seq handed to Raft (safe pos plus events in
                 flight); follower: its safe pos
  safe pos       last seq committed by a quorum and applied (readable)
  expire pos     first seq not known to be expired: every seq below it lies
                 in an expired segment (or was trimmed)
  trimmed pos    earliest seq still retained; everything below was trimmed
  events         retained events; segments: retained segments
  applied index  Raft index applied by that member
  warning        a health warning, e.g. "behind on trimming: 9/4 segments"
  log format     the replicated log format (Raft entry envelope version;
                 raised by the leader once every voter reads the new one)
  paused         yes while the leader's submit path is paused (journal
                 pause): appends wait until journal resume

Always trimmed pos <= expire pos <= safe pos + 1.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				p, err := c.Journal().Positions(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, toPositionsJSON(p))
				}
				t := newTable(w)
				fmt.Fprintf(t, "write pos\t%d\nsafe pos\t%d\nexpire pos\t%d\ntrimmed pos\t%d\nevents\t%d\nsegments\t%d\napplied index\t%d\nmember\t%s\nwarning\t%s\nlog format\t%d\npaused\t%s\n",
					p.WritePos, p.SafePos, p.ExpirePos, p.TrimmedPos, p.EventCount, p.SegmentCount, p.AppliedIndex, orDash(p.MemberID), orDash(p.Warning), p.LogFormat, yesNo(p.Paused))
				return t.Flush()
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newSegmentsCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "segments",
		Short: "List the retained journal segments, oldest first",
		Long: `List the retained journal segments, oldest first, with their seq and Raft
index ranges. A segment is open (still taking events), sealed, expiring
(every consumer acked past it; waiting for a snapshot to cover it) or
expired (trim may drop it).`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				segs, err := c.Journal().Segments(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, struct {
						Segments []segmentJSON `json:"segments"`
					}{toSegmentsJSON(segs)})
				}
				return writeSegments(w, segs)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

// consumerCmd builds consumers register and ack: both print one consumer.
func consumerCmd(cmd *cobra.Command, call func(ctx context.Context, cs *client.Consumers, args []string) (client.Consumer, error), done string, check func(cmd *cobra.Command, args []string) error) *cobra.Command {
	var o *clientOpts
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return err
		}
		return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
			info, err := call(ctx, c.Journal().Consumers(), args)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(cmd.OutOrStdout(), toConsumerJSON(info))
			}
			return writeConsumer(cmd.OutOrStdout(), done, info)
		})
	})
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newConsumersCmd() *cobra.Command {
	var from uint64
	register := consumerCmd(&cobra.Command{
		Use:   "register NAME [--from SEQ]",
		Short: "Register a durable consumer; it holds back trim until it acks",
		Long: `Register a durable consumer. Until it acknowledges past a segment, trim
keeps that segment. The consumer starts as having consumed everything below
--from (default: everything up to the current safe pos). --from must lie in
the retained journal (trimmed pos through safe pos + 1).`,
		Args: cobra.ExactArgs(1),
	}, func(ctx context.Context, cs *client.Consumers, args []string) (client.Consumer, error) {
		return cs.Register(ctx, args[0], from)
	}, "registered", func(cmd *cobra.Command, args []string) error {
		if err := checkConsumerName(args[0]); err != nil {
			return err
		}
		return checkSeqFlag(cmd, "from", from)
	})
	register.Flags().Uint64Var(&from, "from", 0, "first seq the consumer has not consumed yet (default: safe pos + 1)")

	ack := consumerCmd(&cobra.Command{
		Use:   "ack NAME SEQ",
		Short: "Record that a consumer has consumed everything up to SEQ",
		Long: `Record that consumer NAME has consumed every event up to and including SEQ.
Acks only move forward, and SEQ may not pass the safe pos (OutOfRange).`,
		Args: cobra.ExactArgs(2),
	}, func(ctx context.Context, cs *client.Consumers, args []string) (client.Consumer, error) {
		seq, _ := strconv.ParseUint(args[1], 10, 64)
		return cs.Ack(ctx, args[0], seq)
	}, "acked", func(_ *cobra.Command, args []string) error {
		if err := checkConsumerName(args[0]); err != nil {
			return err
		}
		_, err := parseSeq("SEQ", args[1])
		return err
	})

	var lo *clientOpts
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the consumers with their acked seq and lag",
		Long:    `List the consumers with their acked seq and lag (safe pos minus acked seq).`,
		Args:    cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return lo.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				list, err := c.Journal().Consumers().List(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if lo.json {
					out := make([]consumerJSON, 0, len(list))
					for _, ci := range list {
						out = append(out, toConsumerJSON(ci))
					}
					return writeJSON(w, struct {
						Consumers []consumerJSON `json:"consumers"`
					}{out})
				}
				return writeConsumers(w, list)
			})
		}),
	}
	lo = addClientFlags(ls, 10*time.Second, clientTimeoutHelp)

	var ro *clientOpts
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a consumer (it no longer holds back trim)",
		Args:    cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkConsumerName(name); err != nil {
				return err
			}
			return ro.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Journal().Consumers().Remove(ctx, name); err != nil {
					return err
				}
				if ro.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Removed string `json:"removed"`
					}{name})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed consumer %s\n", name)
				return err
			})
		}),
	}
	ro = addClientFlags(rm, 10*time.Second, clientTimeoutHelp)

	c := groupCmd("consumers", "Manage durable consumers, which hold back trim until they ack", register, ack, ls, rm)
	c.Long = `Durable consumers track how far a reader has consumed the journal. A
segment expires (and trim may drop it) only once every consumer has acked
past it and a snapshot covers it; with no consumers, a sealed segment expires
as soon as a snapshot covers it.`
	return c
}

func newTrimCmd() *cobra.Command {
	var (
		o  *clientOpts
		to uint64
	)
	cmd := &cobra.Command{
		Use:   "trim [--to SEQ]",
		Short: "Drop expired segments now, oldest first",
		Long: `Drop expired segments now, oldest first: whole segments every consumer has
acked past and a snapshot covers (the leader takes a snapshot first when
needed). The open segment is never dropped. With --to, only segments that
end below SEQ go. Prints the new trimmed pos (the earliest retained seq) and
how many segments were dropped; 0 dropped is not an error.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := checkSeqFlag(cmd, "to", to); err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				pos, n, err := c.Journal().Trim(ctx, to)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						TrimmedPos      uint64 `json:"trimmed_pos"`
						SegmentsTrimmed uint64 `json:"segments_trimmed"`
					}{pos, n})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "trimmed %d segments; trimmed pos is %d\n", n, pos)
				return err
			})
		}),
	}
	cmd.Flags().Uint64Var(&to, "to", 0, "trim only segments that end below this seq (default: as far as allowed)")
	o = addClientFlags(cmd, 30*time.Second, clientTimeoutHelp)
	return cmd
}

func newResetCmd() *cobra.Command {
	var (
		o   *clientOpts
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "reset --yes",
		Short: "Drop every retained event (seqs continue after the old end)",
		Long: `Drop every retained event, whatever the consumers have acked; seqs continue
after the old end, and every consumer is moved past it. This cannot be
undone: give --yes to confirm. Prints the new trimmed pos (the next seq).`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usageErrorf("reset drops every retained event and cannot be undone; give --yes to confirm")
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				pos, err := c.Journal().Reset(ctx, true)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						TrimmedPos uint64 `json:"trimmed_pos"`
					}{pos})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "journal reset: every retained event dropped; trimmed pos is %d\n", pos)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm dropping every retained event")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

// tailTimeout is the --timeout default of journal tail without --follow.
const tailTimeout = 10 * time.Second

// errTailDone stops a non-following tail once it reached its end.
var errTailDone = errors.New("tail done")

func newTailCmd() *cobra.Command {
	var (
		o      *clientOpts
		from   uint64
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "tail [--from N] [--follow]",
		Short: "Print events from a seq on, and with --follow keep printing new ones",
		Long: `Print every event from seq --from on, in order and without gaps, one line
per event: seq, type, client id and payload, tab-separated (payloads cut as
in journal read). With --json each event is one JSON object per line (JSON
Lines), shaped like the events of journal read.

Without --follow, tail stops at the safe pos it saw when it started. With
--follow it keeps printing new events, across leader changes and member
failures, until Ctrl-C or --timeout, and then exits 0. A --from past the
safe pos prints nothing yet: tail says on stderr that it is waiting for
that seq (without --follow, that there is nothing to print).

--timeout is the deadline for the whole command; 0 means none. It defaults
to 10s without --follow and to 0 (run until Ctrl-C) with --follow.

--from defaults to the trimmed pos, the earliest seq retained. An explicit
--from below it (events already trimmed) fails with OutOfRange, naming the
earliest retained seq.`,
		Example: `  coord journal tail
  coord journal tail --from 100 --follow --json`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := checkSeqFlag(cmd, "from", from); err != nil {
				return err
			}
			if !cmd.Flags().Changed("timeout") && !follow {
				o.timeout = tailTimeout
			}
			parent := cmd.Context()
			if follow {
				ctx, stop := signalContext(parent)
				defer stop()
				parent = ctx
			}
			return o.withClientContext(parent, func(ctx context.Context, c *client.Client) error {
				end := uint64(0) // last seq to print; 0: follow
				// Following from an explicit seq needs no positions: a
				// failure to get them only loses the waiting line.
				p, err := c.Journal().Positions(ctx)
				if err != nil && (from == 0 || !follow) {
					return err
				}
				if err == nil {
					if from == 0 {
						from = p.TrimmedPos
					}
					switch {
					case from > p.SafePos && follow:
						// Nothing to print yet: say so rather than wait silently.
						fmt.Fprintf(cmd.ErrOrStderr(), "tail: waiting for seq %d (the safe pos is %d)\n", from, p.SafePos)
					case from > p.SafePos:
						fmt.Fprintf(cmd.ErrOrStderr(), "tail: nothing at or after seq %d (the safe pos is %d)\n", from, p.SafePos)
						return nil
					case !follow && from < p.TrimmedPos:
						// As the member would answer; checked here too in
						// case the tail goes to a member that lags behind.
						return &client.Error{Code: codes.OutOfRange,
							Message: fmt.Sprintf("tail: seq %d is no longer retained; earliest is %d", from, p.TrimmedPos)}
					case !follow:
						end = p.SafePos
					}
				}
				w := cmd.OutOrStdout()
				err = c.Journal().Tail(ctx, from, func(e client.StoredEvent) error {
					err := printEventLine(w, e, o.json)
					if err == nil && end != 0 && e.Seq >= end {
						err = errTailDone
					}
					return err
				})
				switch {
				case errors.Is(err, errTailDone):
					return nil
				case follow && ctx.Err() != nil:
					return nil // Ctrl-C or --timeout: the way a follow ends
				}
				return err
			})
		}),
	}
	fs := cmd.Flags()
	fs.Uint64Var(&from, "from", 0, "first seq to print (default: the trimmed pos)")
	fs.BoolVar(&follow, "follow", false, "keep printing new events until Ctrl-C or --timeout")
	o = addClientFlags(cmd, 0, "deadline for the whole command, retries included; 0: none (default 10s without --follow, none with --follow)")
	o.zeroTimeout = true
	return cmd
}

// printEventLine prints one event: a tab-separated line, or a JSON Lines
// object shaped like journal read's events.
func printEventLine(w io.Writer, e client.StoredEvent, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(toEventJSON(e))
	}
	_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", e.Seq, tablePayload([]byte(e.Type)), e.ClientID, tablePayload(e.Payload))
	return err
}
