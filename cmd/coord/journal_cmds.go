package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// maxPayloadRead bounds what journal append reads from a file or stdin; the
// cluster's event cap (coord serve --max-event-bytes) is usually far lower.
const maxPayloadRead = 64 << 20

func newJournalCmd() *cobra.Command {
	c := groupCmd("journal", "Append, read and tail the metadata journal; manage its retention",
		newAppendCmd(), newReadCmd(), newTailCmd(), newPositionsCmd(), newSegmentsCmd(),
		newConsumersCmd(), newTrimCmd(), newResetCmd(),
		newExportCmd(), newInspectCmd(), newImportCmd(), newEventsCmd(),
		newPauseCmd(true), newPauseCmd(false), newVerifyCmd(), newJournalConfigCmd())
	c.Long = `Append, read and tail the metadata journal, and manage its retention.

Every event gets the next seq (1, 2, ...). Events are kept in segments; a
sealed segment expires once every durable consumer has acked past it and a
snapshot covers it, and trim (automatic past the configured limits, or
journal trim) drops expired segments, oldest first. journal positions shows
where the journal stands: safe pos (the last readable seq), expire pos and
trimmed pos (the earliest seq still retained).

  append, read, tail    write and read events
  positions, segments   where the journal stands
  consumers             durable consumers, which hold back trim
  trim, reset           drop expired segments now, or every event
  pause, resume         stop and restart the leader's submit path
  verify                compare every member's state digest at one index
  export, inspect,      the journal tool: checksummed export files, their
  import, events        integrity check, loading one, filtered listing`
	return c
}

// readPayload returns the event payload of journal append: --payload TEXT
// or the contents of --file (- for stdin); exactly one must be given.
func readPayload(cmd *cobra.Command, text, file string) ([]byte, error) {
	hasText, hasFile := cmd.Flags().Changed("payload"), cmd.Flags().Changed("file")
	switch {
	case hasText == hasFile:
		return nil, usageErrorf("give exactly one of --payload and --file")
	case hasText:
		return []byte(text), nil
	}
	var r io.Reader
	if file == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPayloadRead+1))
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	if len(b) > maxPayloadRead {
		return nil, errPayloadTooLarge
	}
	return b, nil
}

// errPayloadTooLarge: journal append read more than maxPayloadRead bytes.
var errPayloadTooLarge = fmt.Errorf("payload of more than %d bytes", maxPayloadRead)

// payloadTooLarge is the error of a payload over maxPayloadRead: it names
// the cluster's event cap, as the SDK would for a smaller one.
func payloadTooLarge(ctx context.Context, c *client.Client) error {
	l, err := c.Journal().Limits(ctx)
	if err != nil || l.MaxEventBytes == 0 {
		return fmt.Errorf("append: %v exceeds the cluster's event cap (%d bytes unless coord serve --max-event-bytes says otherwise)", errPayloadTooLarge, client.DefaultMaxEventBytes)
	}
	return fmt.Errorf("append: %v exceeds the %d-byte cap (coord serve --max-event-bytes)", errPayloadTooLarge, l.MaxEventBytes)
}

func newAppendCmd() *cobra.Command {
	var (
		o                  *clientOpts
		typ, payload, file string
	)
	cmd := &cobra.Command{
		Use:   "append --type T (--payload TEXT | --file F)",
		Short: "Append one event and print its seq once it is safe",
		Long: `Append one event and print its seq once it is safe (committed by a quorum
and applied). The SDK retries through leader changes; a retry is applied
exactly once. A payload over the cluster's event cap (1 MiB by default,
coord serve --max-event-bytes) is refused before it is sent, naming the cap.`,
		Example: `  coord journal append --type demo --payload hello
  echo '{"k":1}' | coord journal append --type put --file -`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if typ == "" {
				return usageErrorf("--type is required")
			}
			data, err := readPayload(cmd, payload, file)
			if err != nil && !errors.Is(err, errPayloadTooLarge) {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err != nil {
					return payloadTooLarge(ctx, c)
				}
				seqs, err := c.Journal().Append(ctx, client.Event{Type: typ, Payload: data})
				if err != nil {
					return err
				}
				if seqs == nil {
					seqs = []uint64{}
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Seqs []uint64 `json:"seqs"`
					}{seqs})
				}
				strs := make([]string, len(seqs))
				for i, s := range seqs {
					strs[i] = strconv.FormatUint(s, 10)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "appended seq %s\n", strings.Join(strs, ", "))
				return err
			})
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&typ, "type", "", "event type (required)")
	fs.StringVar(&payload, "payload", "", "event payload as text")
	fs.StringVar(&file, "file", "", "read the event payload from a file, - for stdin")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func parseConsistency(s string) (client.Consistency, error) {
	switch s {
	case "linearizable":
		return client.Linearizable, nil
	case "stale":
		return client.Stale, nil
	}
	return 0, usageErrorf("--consistency %q: want linearizable or stale", s)
}

func newReadCmd() *cobra.Command {
	var (
		o           *clientOpts
		from        uint64
		maxEvents   uint64
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "read [--from N] [--max M] [--consistency linearizable|stale]",
		Short: "Read events from a seq on, up to the safe pos",
		Long: `Read events from seq --from on (default: the trimmed pos, the earliest seq
retained), in order, until --max events are printed or the range reaches
the safe pos the command saw when it started (with --consistency stale:
the answering member's end). Without --max, or with --max 0, it reads up
to the safe pos. It reads page by page (each reply at most 4 MiB, at most
10,000 events), holding one page in memory whatever the range's size.

An explicit --from below the trimmed pos fails with OutOfRange, naming the
earliest retained seq. Linearizable reads (the default) see every append
acknowledged before; stale reads are answered by any member from its local
state.

Where the range ended is said after the events: in the table form as a
line on stderr ("read: 39 events, seq 1-39; reached the safe pos 39", or
"...; stopped at --max 10; more from seq 11"); in JSON as "next_seq" (the
seq to read from next) and "end": "safe_pos" (nothing more to read now) or
"max" (--max reached; more may follow). In JSON a payload that is valid
UTF-8 is a string under "payload", any other under "payload_base64".`,
		Example: `  coord journal read
  coord journal read --from 100 --max 10 --json`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cons, err := parseConsistency(consistency)
			if err != nil {
				return err
			}
			if err := checkSeqFlag(cmd, "from", from); err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				p, err := c.Journal().Positions(ctx)
				if err != nil {
					return err
				}
				if from == 0 {
					from = p.TrimmedPos
				}
				r := rangeRead{from: from, max: maxEvents, last: p.SafePos, stale: cons == client.Stale}
				return r.run(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr(), o.json, client.WithConsistency(cons))
			})
		}),
	}
	fs := cmd.Flags()
	fs.Uint64Var(&from, "from", 0, "first seq to read (default: the trimmed pos)")
	fs.Uint64Var(&maxEvents, "max", 0, "most events to print (0: no limit, up to the safe pos)")
	fs.StringVar(&consistency, "consistency", "linearizable", "linearizable or stale")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
