package main

import (
	"context"
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
// coordinator's own limit (--max-event-bytes) is usually far lower.
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
		return nil, fmt.Errorf("payload exceeds %d bytes", maxPayloadRead)
	}
	return b, nil
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
exactly once.`,
		Example: `  coord journal append --type demo --payload hello
  echo '{"k":1}' | coord journal append --type put --file -`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if typ == "" {
				return usageErrorf("--type is required")
			}
			data, err := readPayload(cmd, payload, file)
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
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
		maxEvents   int
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "read [--from N] [--max M] [--consistency linearizable|stale]",
		Short: "Read events from a seq on",
		Long: `Read up to --max events from seq --from on (default: the trimmed pos, the
earliest seq retained). An explicit --from below the trimmed pos fails with
OutOfRange, naming the earliest retained seq. Linearizable reads (the
default) see every append acknowledged before; stale reads are answered by
any member from its local state. In JSON a payload that is valid UTF-8 is a
string under "payload", any other under "payload_base64".`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cons, err := parseConsistency(consistency)
			if err != nil {
				return err
			}
			if maxEvents < 1 {
				return usageErrorf("--max %d: want at least 1", maxEvents)
			}
			if err := checkSeqFlag(cmd, "from", from); err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if from == 0 {
					p, err := c.Journal().Positions(ctx)
					if err != nil {
						return err
					}
					from = p.TrimmedPos
				}
				events, _, err := c.Journal().Read(ctx, from, maxEvents, client.WithConsistency(cons))
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					out := make([]eventJSON, len(events))
					for i, e := range events {
						out[i] = toEventJSON(e)
					}
					return writeJSON(w, struct {
						Events []eventJSON `json:"events"`
					}{out})
				}
				t := newTable(w)
				io.WriteString(t, "SEQ\tTYPE\tCLIENT ID\tPAYLOAD\n")
				for _, e := range events {
					fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", e.Seq, tablePayload([]byte(e.Type)), e.ClientID, tablePayload(e.Payload))
				}
				return t.Flush()
			})
		}),
	}
	fs := cmd.Flags()
	fs.Uint64Var(&from, "from", 0, "first seq to read (default: the trimmed pos)")
	fs.IntVar(&maxEvents, "max", 100, "most events to return")
	fs.StringVar(&consistency, "consistency", "linearizable", "linearizable or stale")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
