package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Integrity values of a Report.
const (
	IntegrityOK      = "OK"
	IntegrityDamaged = "DAMAGED"
)

// DamagedRange is a byte range of an export that could not be trusted.
type DamagedRange struct {
	// StartOffset and EndOffset delimit the range [StartOffset, EndOffset).
	// An empty range marks something missing at that offset (a seq gap, a
	// missing trailer); a range ending at the file size is open-ended.
	StartOffset int64 `json:"start_offset"`
	EndOffset   int64 `json:"end_offset"`
	// AfterSeq is the seq of the last good record before the range (0 if
	// none).
	AfterSeq uint64 `json:"after_seq"`
	// Reason says what was wrong at StartOffset.
	Reason string `json:"reason"`
}

// Report is the result of Inspect.
type Report struct {
	// Header is the decoded header; zero unless HeaderOK.
	Header Header `json:"header"`
	// HeaderOK says the header was intact and of a supported version.
	HeaderOK bool `json:"header_ok"`
	// Records counts the good records found, and FirstSeq and LastSeq are
	// the seqs of the first and last of them (0 if none).
	Records  uint64 `json:"records"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Damaged lists the damaged ranges in file order.
	Damaged []DamagedRange `json:"damaged"`
	// TrailerOK says an intact trailer was found and agrees with the
	// records found.
	TrailerOK bool `json:"trailer_ok"`
	// Integrity is IntegrityOK if the file is entirely good, otherwise
	// IntegrityDamaged.
	Integrity string `json:"integrity"`

	trailerNote string // for String: why the trailer is not OK
}

// inspector holds the state of one Inspect scan.
type inspector struct {
	w       *window
	rep     Report
	hdrEnd  int64
	digest  uint32
	trailer int64 // offset of the trailer, -1 if none found
	tf      frame
}

// Inspect reads the whole export from r and reports on its integrity. It
// never fails: damage (and a read error, which ends the scan) is reported
// in the Report. After a damaged element it resynchronises by scanning
// forward byte by byte for the next intact trailer or intact record with a
// plausible seq (after the last good one and, if the header is good, within
// its range). It streams: memory is bounded by the largest record, not the
// file size. The scan costs a few nanoseconds per damaged byte; only
// offsets whose lengths are all consistent are CRC-checked.
func Inspect(r io.Reader) Report {
	in := &inspector{w: newWindow(r), trailer: -1}
	in.scan()
	rep := &in.rep
	rep.Integrity = IntegrityOK
	if !rep.HeaderOK || !rep.TrailerOK || len(rep.Damaged) > 0 {
		rep.Integrity = IntegrityDamaged
	}
	return *rep
}

func (in *inspector) add(start, end int64, reason string) {
	in.rep.Damaged = append(in.rep.Damaged, DamagedRange{StartOffset: start, EndOffset: end, AfterSeq: in.rep.LastSeq, Reason: reason})
}

// readErr reports a read error, if there was one, and says whether it did.
func (in *inspector) readErr() bool {
	err := in.w.ioErr()
	if err != nil {
		end := in.w.end()
		in.add(end, end, "read error: "+err.Error())
	}
	return err != nil
}

func (in *inspector) scan() {
	h, off, err := readHeader(in.w)
	switch {
	case err == nil:
		in.rep.Header, in.rep.HeaderOK, in.hdrEnd = h, true, off
	case errors.Is(err, ErrUnsupportedVersion):
		in.add(0, in.w.drain(), strings.TrimPrefix(err.Error(), "export: ")+"; records not checked")
		in.readErr()
		return
	case in.readErr():
		return
	default:
		reason := err.Error()
		var de *DamageError
		if errors.As(err, &de) {
			reason = de.Reason
		}
		if off = in.resync(0, reason); off < 0 {
			return
		}
	}
	resynced := !in.rep.HeaderOK
	for {
		f := parseFrame(in.w, off)
		switch {
		case f.kind == frameEOF:
			in.finish()
			return
		case f.kind == frameBad:
			if in.readErr() {
				return
			}
			if off = in.resync(off, f.reason()); off < 0 {
				return
			}
			resynced = true
			continue
		case f.kind == frameTrailer:
			in.trailer, in.tf = off, f
			if end := off + f.size; in.w.ensure(end, 1) {
				in.add(end, in.w.drain(), "trailing data after trailer")
			}
			if !in.readErr() {
				in.finish()
			}
			return
		}
		if why := in.implausible(f.ev.Seq); why != "" {
			in.add(off, off+f.size, why)
		} else {
			if want := in.want(); !resynced && f.ev.Seq != want {
				in.add(off, off, fmt.Sprintf("seq gap: want %d got %d", want, f.ev.Seq))
			}
			in.accept(f)
		}
		resynced = false
		off += f.size
		in.w.discard(off)
	}
}

// want returns the seq the next record should have, or 0 if unknown.
func (in *inspector) want() uint64 {
	switch {
	case in.rep.Records > 0:
		return in.rep.LastSeq + 1
	case in.rep.HeaderOK:
		return in.rep.Header.FirstSeq
	}
	return 0
}

// implausible says why an intact record with this seq cannot belong here,
// or returns "".
func (in *inspector) implausible(seq uint64) string {
	rep := &in.rep
	switch {
	case rep.Records > 0 && seq <= rep.LastSeq:
		return fmt.Sprintf("seq out of order: want %d got %d", rep.LastSeq+1, seq)
	case rep.HeaderOK && rep.Header.EventCount == 0:
		return fmt.Sprintf("unexpected record seq %d: header declares no events", seq)
	case rep.HeaderOK && seq < rep.Header.FirstSeq:
		return fmt.Sprintf("seq out of order: want %d got %d", in.want(), seq)
	case rep.HeaderOK && seq > rep.Header.LastSeq:
		return fmt.Sprintf("unexpected record seq %d: header last_seq is %d", seq, rep.Header.LastSeq)
	}
	return ""
}

func (in *inspector) accept(f frame) {
	rep := &in.rep
	if rep.Records == 0 {
		rep.FirstSeq = f.ev.Seq
	}
	rep.Records++
	rep.LastSeq = f.ev.Seq
	in.digest = digestAdd(in.digest, f.crc)
}

// resync records damage starting at start and scans forward for the next
// trustworthy frame, returning its offset, or -1 if the scan reached the end
// of the file (the range is then open-ended).
func (in *inspector) resync(start int64, reason string) int64 {
	for p := start + 1; ; p++ {
		in.w.discard(p)
		if !in.w.ensure(p, 1) {
			in.add(start, in.w.end(), reason)
			in.readErr()
			return -1
		}
		if in.w.ensure(p, 4) { // fast path: most offsets fail the length bounds
			if l := binary.BigEndian.Uint32(in.w.slice(p, 4)); l != trailerMarker && (l < minBody || l > maxBody) {
				continue
			}
		}
		f := parseFrame(in.w, p)
		if f.kind == frameTrailer || f.kind == frameRecord && in.implausible(f.ev.Seq) == "" {
			in.add(start, p, reason)
			return p
		}
	}
}

// finish checks the trailer and header against the records found. The
// consistency findings are only added as ranges when nothing else was
// damaged, since earlier damage already explains them.
func (in *inspector) finish() {
	rep := &in.rep
	var why string
	var at, end int64
	switch {
	case in.trailer < 0:
		why, at = "truncated: missing trailer", in.w.end()
		end = at
	case in.tf.count != rep.Records:
		why = fmt.Sprintf("trailer: record count %d, found %d", in.tf.count, rep.Records)
	case in.tf.digest != in.digest:
		why = fmt.Sprintf("trailer: record crc digest %08x, computed %08x", in.tf.digest, in.digest)
	default:
		rep.TrailerOK = true
	}
	if in.trailer >= 0 {
		at, end = in.trailer, in.trailer+trailerLen
	}
	h := rep.Header
	if why == "" && rep.HeaderOK && (rep.Records != h.EventCount || rep.Records > 0 && (rep.FirstSeq != h.FirstSeq || rep.LastSeq != h.LastSeq)) {
		why = fmt.Sprintf("header declares %d events (seq %d..%d), found %d (seq %d..%d)",
			h.EventCount, h.FirstSeq, h.LastSeq, rep.Records, rep.FirstSeq, rep.LastSeq)
		at, end = 0, in.hdrEnd
	}
	if !rep.TrailerOK && in.trailer >= 0 {
		rep.trailerNote = fmt.Sprintf("intact at offset %d but %s", in.trailer, strings.TrimPrefix(why, "trailer: "))
	}
	if why != "" && len(rep.Damaged) == 0 {
		in.add(at, end, why)
	}
}

// String returns a human-readable summary; its last line is
// "integrity OK" or "integrity DAMAGED".
func (r Report) String() string {
	var b strings.Builder
	if r.HeaderOK {
		h := r.Header
		created := "unset"
		if !h.Created.IsZero() {
			created = h.Created.Format("2006-01-02T15:04:05.000000000Z07:00")
		}
		fmt.Fprintf(&b, "header: OK: cluster %q source %q created %s; %d events, seq %d..%d\n",
			h.ClusterID, h.Source, created, h.EventCount, h.FirstSeq, h.LastSeq)
	} else {
		b.WriteString("header: DAMAGED or unreadable\n")
	}
	if r.Records > 0 {
		fmt.Fprintf(&b, "records: %d good, seq %d..%d\n", r.Records, r.FirstSeq, r.LastSeq)
	} else {
		b.WriteString("records: 0 good\n")
	}
	switch {
	case r.TrailerOK:
		b.WriteString("trailer: OK\n")
	case r.trailerNote != "":
		b.WriteString("trailer: " + r.trailerNote + "\n")
	default:
		b.WriteString("trailer: missing or damaged\n")
	}
	if len(r.Damaged) > 0 {
		fmt.Fprintf(&b, "damaged ranges: %d\n", len(r.Damaged))
		for _, d := range r.Damaged {
			fmt.Fprintf(&b, "  [%d, %d) after seq %d: %s\n", d.StartOffset, d.EndOffset, d.AfterSeq, d.Reason)
		}
	}
	integrity := r.Integrity
	if integrity == "" {
		integrity = IntegrityDamaged
	}
	b.WriteString("integrity " + integrity)
	return b.String()
}
