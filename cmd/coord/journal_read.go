package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/logbookhq/logbook/client"
)

// rangeRead is one journal read: the events from seq from on, at most max
// (0: no limit), through seq last (the safe pos when it started) unless
// stale, in which case through the answering member's end.
type rangeRead struct {
	from, max, last uint64
	stale           bool

	printed, next uint64
}

// errRangeDone ends ReadRange once --max events are printed.
var errRangeDone = errors.New("read done")

// tableFlushRows is how many table rows are aligned together: the table
// is flushed so, so that a long read holds no more than that many rows.
const tableFlushRows = 1000

// ends reports why the read stopped, as journal read --json says it:
// "max" if --max was reached short of the safe pos, else "safe_pos".
func (r *rangeRead) end() string {
	if r.max > 0 && r.printed >= r.max && (r.stale || r.next <= r.last) {
		return "max"
	}
	return "safe_pos"
}

// run reads page by page (client ReadRange) and prints each event as it
// comes: a table, flushed every tableFlushRows rows, or one JSON object
// whose "events" array is written event by event.
func (r *rangeRead) run(ctx context.Context, c *client.Client, w, stderr io.Writer, asJSON bool, opts ...client.ReadOption) error {
	r.next = r.from
	if r.max > 0 {
		opts = append(opts, client.WithPageSize(int(min(r.max, 1000))))
	}
	var t *tabwriter.Writer
	if asJSON {
		io.WriteString(w, "{\n  \"events\": [")
	} else {
		t = newTable(w)
		io.WriteString(t, "SEQ\tTYPE\tCLIENT ID\tPAYLOAD\n")
	}
	err := c.Journal().ReadRange(ctx, r.from, 0, func(e client.StoredEvent) error {
		if !r.stale && e.Seq > r.last {
			return errRangeDone
		}
		if asJSON {
			b, err := json.MarshalIndent(toEventJSON(e), "    ", "  ")
			if err != nil {
				return err
			}
			sep := ",\n    "
			if r.printed == 0 {
				sep = "\n    "
			}
			if _, err := fmt.Fprintf(w, "%s%s", sep, b); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", e.Seq, tablePayload([]byte(e.Type)), e.ClientID, tablePayload(e.Payload))
			if (r.printed+1)%tableFlushRows == 0 {
				if err := t.Flush(); err != nil {
					return err
				}
			}
		}
		r.printed++
		r.next = e.Seq + 1
		if r.max > 0 && r.printed >= r.max {
			return errRangeDone
		}
		return nil
	}, opts...)
	if err != nil && !errors.Is(err, errRangeDone) {
		if t != nil {
			t.Flush()
		}
		return err
	}
	if asJSON {
		if r.printed > 0 {
			io.WriteString(w, "\n  ")
		}
		_, err = fmt.Fprintf(w, "],\n  \"next_seq\": %d,\n  \"end\": %q\n}\n", r.next, r.end())
		return err
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, r.summary())
	return nil
}

// summary is the table form's end-of-range line.
func (r *rangeRead) summary() string {
	s := fmt.Sprintf("read: %d events", r.printed)
	if r.printed > 0 {
		s += fmt.Sprintf(", seq %d-%d", r.from, r.next-1)
	}
	switch {
	case r.end() == "max":
		return s + fmt.Sprintf("; stopped at --max %d; more from seq %d", r.max, r.next)
	case r.stale:
		return s + "; reached the answering member's end"
	case r.printed == 0:
		return s + fmt.Sprintf("; nothing at or after seq %d (the safe pos is %d)", r.from, r.last)
	}
	return s + fmt.Sprintf("; reached the safe pos %d", r.last)
}
