package export

import (
	"fmt"
	"io"
)

// Reader reads and verifies an export file, one event at a time. It is
// strict: the first problem ends the read with a *DamageError. A Reader is
// not safe for concurrent use.
type Reader struct {
	w      *window
	h      Header
	off    int64  // offset of the next record
	n      uint64 // records read
	digest uint32 // running CRC32C of the record CRCs
	err    error  // sticky: io.EOF after the trailer, or the first error
	typ    string // last event type returned
	client string // last client id returned
}

// NewReader reads and verifies the header. It returns a *DamageError if the
// header is damaged, an error wrapping ErrUnsupportedVersion if it is intact
// but of another format version, or the underlying reader's error.
func NewReader(r io.Reader) (*Reader, error) {
	w := newWindow(r)
	h, off, err := readHeader(w)
	if err != nil {
		if _, ok := err.(*DamageError); !ok && w.ioErr() != nil {
			err = fmt.Errorf("export: read header: %w", err)
		}
		return nil, err
	}
	w.discard(off)
	return &Reader{w: w, h: h, off: off}, nil
}

// Header returns the verified header.
func (r *Reader) Header() Header { return r.h }

// Next returns the next event. After the last event it verifies the trailer
// and that nothing follows it, then returns io.EOF. Any problem in the file
// is a *DamageError, after which the Reader is done: every later call
// returns the same error. Errors from the underlying reader are returned
// wrapped. The returned event does not alias the Reader's buffers.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) next() (Event, error) {
	f := parseFrame(r.w, r.off)
	if err := r.w.ioErr(); err != nil && f.kind != frameRecord && f.kind != frameTrailer {
		return Event{}, fmt.Errorf("export: read at offset %d: %w", r.off, err)
	}
	switch f.kind {
	case frameEOF:
		return Event{}, r.damage(r.off, "truncated: missing trailer")
	case frameBad:
		return Event{}, r.damage(r.off, f.reason())
	case frameTrailer:
		return Event{}, r.trailer(f)
	}
	if r.n >= r.h.EventCount {
		return Event{}, r.damage(r.off, fmt.Sprintf("unexpected record: header declares %d events (last_seq %d)", r.h.EventCount, r.h.LastSeq))
	}
	if want := r.h.FirstSeq + r.n; f.ev.Seq != want {
		what := "seq gap"
		if f.ev.Seq < want {
			what = "seq out of order"
		}
		return Event{}, r.damage(r.off, fmt.Sprintf("%s: want %d got %d", what, want, f.ev.Seq))
	}
	ev := f.ev
	// Types and client ids repeat from event to event: reuse the strings.
	if string(f.typ) != r.typ {
		r.typ = string(f.typ)
	}
	if string(f.client) != r.client {
		r.client = string(f.client)
	}
	ev.Type, ev.ClientID = r.typ, r.client
	if len(f.pay) > 0 {
		ev.Payload = append([]byte(nil), f.pay...)
	}
	r.digest = digestAdd(r.digest, f.crc)
	r.n++
	r.off += f.size
	r.w.discard(r.off)
	return ev, nil
}

// trailer verifies an intact trailer frame against what was read, and that
// the file ends right after it.
func (r *Reader) trailer(f frame) error {
	switch {
	case r.n != r.h.EventCount:
		return r.damage(r.off, fmt.Sprintf("trailer: after %d records, header declares %d events", r.n, r.h.EventCount))
	case f.count != r.n:
		return r.damage(r.off, fmt.Sprintf("trailer: record count %d, read %d", f.count, r.n))
	case f.digest != r.digest:
		return r.damage(r.off, fmt.Sprintf("trailer: record crc digest %08x, computed %08x", f.digest, r.digest))
	}
	end := r.off + f.size
	if r.w.ensure(end, 1) {
		return &DamageError{Offset: end, Record: r.n, Reason: "trailing data after trailer"}
	}
	if err := r.w.ioErr(); err != nil {
		return fmt.Errorf("export: read at offset %d: %w", end, err)
	}
	r.w.discard(end)
	return io.EOF
}

// damage builds a *DamageError for the element at off, naming the record
// the reader is at and the seq the header promised for it.
func (r *Reader) damage(off int64, reason string) *DamageError {
	e := &DamageError{Offset: off, Record: r.n, Reason: reason}
	if r.n < r.h.EventCount {
		e.Seq = r.h.FirstSeq + r.n
	}
	return e
}
