package client

import (
	"context"
	"errors"
	"fmt"
)

// defaultPage is how many events ReadRange asks for per Read.
const defaultPage = 1000

// WithPageSize sets how many events ReadRange asks for per Read (default
// 1000; the server serves at most 10,000, and fewer if they would take a
// reply past its size bound). Read ignores it.
func WithPageSize(n int) ReadOption {
	return func(o *readOptions) { o.page = n }
}

// SkipTrimmed lets ReadRange go on when the events it is to read next are
// no longer retained (trimmed before or while it reads): it continues
// from the trimmed pos the leader reports, and the trimmed events are
// skipped. Without it ReadRange fails with ErrOutOfRange. Read ignores it.
func SkipTrimmed() ReadOption {
	return func(o *readOptions) { o.skipTrim = true }
}

// ReadRange calls fn with every event from seq from through seq to, in
// order and each once, reading page by page (Read, from the seq after each
// page's last event on), so it holds one page at a time, whatever the
// range's size and its events' sizes; from 0 is seq 1. With to 0 it reads
// to the end of the journal: until a page ends at the serving member's
// safe pos (ReadEndSafePos; so it may include events appended while it
// reads).
// With to > 0 a journal that ends before to fails the read. An error from
// fn ends the read and is returned as it is. The options are Read's, plus
// WithPageSize and SkipTrimmed.
func (j *Journal) ReadRange(ctx context.Context, from, to uint64, fn func(StoredEvent) error, opts ...ReadOption) error {
	o := readOpts(opts)
	page := o.page
	if page <= 0 {
		page = defaultPage
	}
	if from == 0 {
		from = 1
	}
	for to == 0 || from <= to {
		evs, info, err := j.Read(ctx, from, page, opts...)
		if errors.Is(err, ErrOutOfRange) && o.skipTrim {
			if p, perr := j.Positions(ctx); perr == nil && p.TrimmedPos > from {
				from = p.TrimmedPos // trimmed before or while reading
				continue
			}
		}
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			if to == 0 {
				return nil
			}
			return fmt.Errorf("logbook: journal ended at seq %d, before %d", from-1, to)
		}
		for _, e := range evs {
			if to != 0 && e.Seq > to {
				return nil
			}
			if e.Seq != from {
				return fmt.Errorf("logbook: read from %d returned seq %d", from, e.Seq)
			}
			if err := fn(e); err != nil {
				return err
			}
			from++
		}
		if to == 0 && (info.End == ReadEndSafePos || from >= info.NextSeq) {
			return nil
		}
	}
	return nil
}
