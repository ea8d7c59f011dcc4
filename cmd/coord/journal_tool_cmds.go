package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/journal/export"
	"github.com/spf13/cobra"
)

// The journal tool (the cephfs-journal-tool role): export, inspect, import
// and filtered event listing. The file format is journal/export/doc.go.

const readPage = 5000

// progress prints a progress line on stderr when it is a terminal.
type progress struct {
	w     io.Writer
	tty   bool
	total uint64
	last  time.Time
}

func newProgress(cmd *cobra.Command, total uint64) *progress {
	p := &progress{w: cmd.ErrOrStderr(), total: total}
	if f, ok := p.w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(done uint64) {
	if !p.tty || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r%d/%d events", done, p.total)
}

func (p *progress) end() {
	if p.tty {
		fmt.Fprintf(p.w, "\r%d/%d events\n", p.total, p.total)
	}
}

func newExportCmd() *cobra.Command {
	var (
		o        *clientOpts
		out      string
		from, to uint64
	)
	cmd := &cobra.Command{
		Use:   "export --out FILE [--from SEQ] [--to SEQ]",
		Short: "Write retained events to a checksummed export file",
		Long: `Write the retained events from --from (default: the trimmed pos) to --to
(default: the safe pos when the command starts) to FILE in the export format
(a header, one CRC32C-checked record per event, a trailer; see
journal/export/doc.go). The file is written to FILE.tmp, fsynced and renamed,
so FILE is never a partial export. A range that can hold nothing (--from
after --to, --from past the safe pos, --to below the trimmed pos) is refused
and writes no file; --from below the trimmed pos is refused too.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("--out FILE is required")
			}
			if from != 0 && to != 0 && from > to {
				return usageErrorf("--from %d is after --to %d", from, to)
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				p, err := c.Journal().Positions(ctx)
				if err != nil {
					return err
				}
				lo, hi := max(from, p.TrimmedPos), p.SafePos
				if to != 0 {
					hi = min(hi, to)
				}
				if from != 0 && from < p.TrimmedPos {
					return fmt.Errorf("--from %d is below the trimmed pos %d", from, p.TrimmedPos)
				}
				if to != 0 && to < p.TrimmedPos {
					return fmt.Errorf("--to %d is below the trimmed pos %d: nothing retained to export", to, p.TrimmedPos)
				}
				if from > p.SafePos {
					return fmt.Errorf("--from %d is past the safe pos %d: nothing to export", from, p.SafePos)
				}
				h := export.Header{ClusterID: st.ClusterID, Source: st.ResponderID, Created: time.Now()}
				if hi >= lo {
					h.FirstSeq, h.LastSeq, h.EventCount = lo, hi, hi-lo+1
				}
				n, err := writeExport(ctx, cmd, c, out, h)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						File     string `json:"file"`
						Events   uint64 `json:"events"`
						FirstSeq uint64 `json:"first_seq"`
						LastSeq  uint64 `json:"last_seq"`
					}{out, n, h.FirstSeq, h.LastSeq})
				}
				if n == 0 {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "exported 0 events (the journal retains none) to %s\n", out)
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "exported %d events (%d..%d) to %s\n", n, h.FirstSeq, h.LastSeq, out)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "export file to write")
	cmd.Flags().Uint64Var(&from, "from", 0, "first seq (default: the trimmed pos)")
	cmd.Flags().Uint64Var(&to, "to", 0, "last seq (default: the safe pos)")
	o = addClientFlags(cmd, 10*time.Minute, clientTimeoutHelp)
	return cmd
}

func writeExport(ctx context.Context, cmd *cobra.Command, c *client.Client, out string, h export.Header) (uint64, error) {
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // no-op after the rename
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := export.NewWriter(bw, h)
	if err != nil {
		f.Close()
		return 0, err
	}
	prog := newProgress(cmd, h.EventCount)
	var n uint64
	if h.EventCount > 0 {
		err = c.Journal().ReadRange(ctx, h.FirstSeq, h.LastSeq, func(e client.StoredEvent) error {
			n++
			prog.update(n)
			return w.Write(export.Event{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientID: e.ClientID, RequestSeq: e.RequestSeq, Index: e.Index})
		}, client.WithPageSize(readPage))
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync() // the export is durable before it takes the final name
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	prog.end()
	return n, os.Rename(tmp, out)
}

func newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Check an export file: framing, checksums, seq continuity",
		Long: `Read a whole export file and report its header, record count, seq range,
every damaged range (with its byte offsets and the last good seq before it)
and "integrity OK" or "integrity DAMAGED". Exits 1 when damaged. Needs no
cluster.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			rep := export.Inspect(bufio.NewReaderSize(f, 1<<20))
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), rep.String())
			}
			if rep.Integrity != export.IntegrityOK {
				return errors.New("export is damaged")
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newImportCmd() *cobra.Command {
	var (
		o     *clientOpts
		force bool
	)
	cmd := &cobra.Command{
		Use:   "import FILE [--force]",
		Short: "Load an export file into an empty journal",
		Long: `Load the events of an export file, with their seqs, client ids and request
seqs, into the cluster's journal. The file is inspected in full first: a
damaged file is refused before anything changes. The journal must be empty
and the export must come from this cluster (same cluster id), unless
--force, which replaces the journal's contents and drops every client's
exactly-once session (a client's next write fails SESSION_EXPIRED, and the
SDK starts a new session).`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			file := args[0]
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			if rep := export.Inspect(bufio.NewReaderSize(f, 1<<20)); rep.Integrity != export.IntegrityOK {
				fmt.Fprintln(cmd.ErrOrStderr(), rep.String())
				return damagedImportError(file, rep)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				n, next, err := importFile(ctx, cmd, c, f, force)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Events  uint64 `json:"events"`
						NextSeq uint64 `json:"next_seq"`
					}{n, next})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %d events; next seq %d\n", n, next)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace a non-empty journal, and accept an export of another cluster")
	o = addClientFlags(cmd, 10*time.Minute, clientTimeoutHelp)
	return cmd
}

// importFile streams the export in chunks bounded by count and bytes.
func importFile(ctx context.Context, cmd *cobra.Command, c *client.Client, r io.Reader, force bool) (uint64, uint64, error) {
	rd, err := export.NewReader(bufio.NewReaderSize(r, 1<<20))
	if err != nil {
		return 0, 0, err
	}
	h := rd.Header()
	if h.EventCount == 0 {
		return 0, 0, errors.New("the export holds no events")
	}
	prog := newProgress(cmd, h.EventCount)
	var chunk []client.StoredEvent
	var n, next uint64
	size := 0
	first := true
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		nx, err := c.Journal().ImportChunk(ctx, chunk, first, force, h.ClusterID)
		if err != nil && !first && errors.Is(err, client.ErrFailedPrecondition) {
			// A retried chunk that had committed: the journal already
			// continues past it.
			if p, perr := c.Journal().Positions(ctx); perr == nil && p.SafePos == chunk[len(chunk)-1].Seq {
				nx, err = p.SafePos+1, nil
			}
		}
		if err != nil {
			return err
		}
		n += uint64(len(chunk))
		next, first, chunk, size = nx, false, chunk[:0], 0
		prog.update(n)
		return nil
	}
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, next, err
		}
		if size+len(e.Payload)+len(e.Type) > 2<<20 || len(chunk) >= 5000 {
			if err := flush(); err != nil {
				return n, next, err
			}
		}
		chunk = append(chunk, client.StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientID: e.ClientID, RequestSeq: e.RequestSeq, Index: e.Index})
		size += len(e.Payload) + len(e.Type) + 64
	}
	if err := flush(); err != nil {
		return n, next, err
	}
	prog.end()
	return n, next, nil
}

func newEventsCmd() *cobra.Command {
	var (
		o        *clientOpts
		types    string
		rangeArg string
	)
	cmd := &cobra.Command{
		Use:   "events [--type T[,T...]] [--range A..B]",
		Short: "List events filtered by type and seq range",
		Long: `List the retained events of the given types (default: all) in the seq range
A..B (either end may be left out: 5.. or ..9; default: everything retained).
One line per event; with --json, JSON Lines like journal tail. A range that
starts below the trimmed pos, or one with only an end that lies below it,
is refused (OutOfRange, with the earliest seq retained), as journal read
refuses it: those events are gone, and listing only the rest (or nothing)
would look like a complete answer.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			lo, hi, err := parseRange(rangeArg)
			if err != nil {
				return err
			}
			want := map[string]bool{}
			for _, t := range strings.Split(types, ",") {
				if t = strings.TrimSpace(t); t != "" {
					want[t] = true
				}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				p, err := c.Journal().Positions(ctx)
				if err != nil {
					return err
				}
				switch {
				case lo == 0 && hi < p.TrimmedPos:
					// Only an end given, and it is trimmed: every event
					// asked for is gone. Reading from it gets the server's
					// OutOfRange with the earliest retained seq.
					lo = hi
				case lo == 0: // no start given: from the earliest retained
					lo = p.TrimmedPos
				}
				hi = min(hi, p.SafePos)
				w := bufio.NewWriter(cmd.OutOrStdout())
				defer w.Flush()
				if lo > hi || hi == 0 {
					return nil
				}
				return c.Journal().ReadRange(ctx, lo, hi, func(e client.StoredEvent) error {
					if len(want) > 0 && !want[e.Type] {
						return nil
					}
					return printEventLine(w, e, o.json)
				}, client.WithPageSize(readPage))
			})
		}),
	}
	cmd.Flags().StringVar(&types, "type", "", "event types to list, comma-separated (default: all)")
	cmd.Flags().StringVar(&rangeArg, "range", "", "seq range A..B, inclusive")
	o = addClientFlags(cmd, time.Minute, clientTimeoutHelp)
	return cmd
}

// parseRange parses "A..B", "A..", "..B" or "" (everything); lo is 0 when
// no start is given.
func parseRange(s string) (uint64, uint64, error) {
	if s == "" {
		return 0, ^uint64(0), nil
	}
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, usageErrorf("--range %q: want A..B", s)
	}
	lo, hi := uint64(0), ^uint64(0)
	var err error
	if a != "" {
		if lo, err = parseSeq("--range start", a); err != nil {
			return 0, 0, err
		}
	}
	if b != "" {
		if hi, err = parseSeq("--range end", b); err != nil {
			return 0, 0, err
		}
	}
	if lo > hi {
		return 0, 0, usageErrorf("--range %q: start after end", s)
	}
	return lo, hi, nil
}

// damagedImportError is import's one-line refusal of a damaged file: where
// the first damage is and how much there is (the whole report went to
// stderr before it).
func damagedImportError(file string, rep export.Report) error {
	if len(rep.Damaged) == 0 { // only the header or trailer disagrees
		return fmt.Errorf("refusing damaged export %s (integrity DAMAGED); nothing was imported", file)
	}
	d := rep.Damaged[0]
	return fmt.Errorf("refusing damaged export %s: %d damaged range(s), the first at offset %d after seq %d: %s; nothing was imported",
		file, len(rep.Damaged), d.StartOffset, d.AfterSeq, d.Reason)
}
