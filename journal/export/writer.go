package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Writer writes an export file. It buffers internally; Close flushes.
// A Writer is not safe for concurrent use.
type Writer struct {
	bw     *bufio.Writer
	h      Header
	n      uint64 // records written
	digest uint32 // running CRC32C of the record CRCs
	scr    []byte // scratch for a record's fixed fields
	tail   []byte // scratch for a record's CRC
	err    error  // sticky write error
	closed bool
}

// errClosed is returned by Write and Close on a closed Writer.
var errClosed = errors.New("export: writer closed")

// NewWriter validates h and writes the header to w. h is a promise: exactly
// h.EventCount events with seqs h.FirstSeq..h.LastSeq must follow (see the
// package documentation for the rules; for an empty export set EventCount and
// LastSeq to 0).
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	b, err := encodeHeader(h)
	if err != nil {
		return nil, err
	}
	ew := &Writer{bw: bufio.NewWriterSize(w, 64<<10), h: h, scr: make([]byte, 0, 4+minBody+MaxTypeLen+MaxClientIDLen),
		tail: make([]byte, 0, 4)}
	if _, err := ew.bw.Write(b); err != nil {
		return nil, fmt.Errorf("export: write header: %w", err)
	}
	return ew, nil
}

// Write appends one event. Its seq must be the next one the header promises
// (h.FirstSeq for the first event, then +1 each time) and its fields must be
// within the Max* bounds; a rejected event writes nothing and leaves the
// Writer usable. An error from the underlying writer is sticky.
func (w *Writer) Write(e Event) error {
	switch {
	case w.closed:
		return errClosed
	case w.err != nil:
		return w.err
	case w.n >= w.h.EventCount:
		return fmt.Errorf("export: event seq %d beyond the header's %d events (last_seq %d)", e.Seq, w.h.EventCount, w.h.LastSeq)
	case e.Seq != w.h.FirstSeq+w.n:
		return fmt.Errorf("export: seq gap: want %d got %d", w.h.FirstSeq+w.n, e.Seq)
	case len(e.Type) > MaxTypeLen:
		return fmt.Errorf("export: seq %d: type is %d bytes, max %d", e.Seq, len(e.Type), MaxTypeLen)
	case len(e.ClientID) > MaxClientIDLen:
		return fmt.Errorf("export: seq %d: client id is %d bytes, max %d", e.Seq, len(e.ClientID), MaxClientIDLen)
	case len(e.Payload) > MaxPayloadLen:
		return fmt.Errorf("export: seq %d: payload is %d bytes, max %d", e.Seq, len(e.Payload), MaxPayloadLen)
	}
	l := minBody + len(e.Type) + len(e.ClientID) + len(e.Payload)
	b := binary.BigEndian.AppendUint32(w.scr[:0], uint32(l))
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = appendString16(b, e.Type)
	b = appendString16(b, e.ClientID)
	b = binary.BigEndian.AppendUint64(b, e.RequestSeq)
	b = binary.BigEndian.AppendUint64(b, e.Index)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Payload)))
	crc := crc32.Update(crc32.Checksum(b, castagnoli), castagnoli, e.Payload)
	if err := w.put(b, e.Payload); err != nil {
		return err
	}
	w.tail = binary.BigEndian.AppendUint32(w.tail[:0], crc)
	if err := w.put(w.tail); err != nil {
		return err
	}
	w.digest = digestAdd(w.digest, crc)
	w.n++
	return nil
}

// put writes the parts in order, making any error sticky.
func (w *Writer) put(parts ...[]byte) error {
	for _, p := range parts {
		if _, err := w.bw.Write(p); err != nil {
			w.err = fmt.Errorf("export: write: %w", err)
			return w.err
		}
	}
	return nil
}

// Close finishes the export. If every promised event was written it writes
// the trailer; otherwise it writes no trailer (so readers see the file as
// truncated) and returns an error. Either way it flushes what was written.
// Close does not close the underlying writer; a second Close returns an
// error.
func (w *Writer) Close() error {
	if w.closed {
		return errClosed
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	var short error
	if w.n != w.h.EventCount {
		short = fmt.Errorf("export: close: wrote %d of the header's %d events; trailer not written", w.n, w.h.EventCount)
	} else {
		t := binary.BigEndian.AppendUint32(w.scr[:0], trailerMarker)
		t = binary.BigEndian.AppendUint64(t, w.n)
		t = binary.BigEndian.AppendUint32(t, w.digest)
		t = binary.BigEndian.AppendUint32(t, crc32.Checksum(t, castagnoli))
		if err := w.put(t); err != nil {
			return err
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("export: write: %w", err)
		return w.err
	}
	return short
}
