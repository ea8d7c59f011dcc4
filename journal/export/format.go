package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"
)

// Format constants and the bounds a reader enforces. See the package
// documentation for the byte layout.
const (
	// Magic opens every export file.
	Magic = "LBKJEXP\n"
	// FormatVersion is the format version this package writes and reads.
	FormatVersion uint16 = 1
	// MaxHeaderLen bounds the header body length field.
	MaxHeaderLen = 64 << 10
	// MaxClusterIDLen bounds Header.ClusterID.
	MaxClusterIDLen = 256
	// MaxSourceLen bounds Header.Source.
	MaxSourceLen = 256
	// MaxTypeLen bounds Event.Type.
	MaxTypeLen = 256
	// MaxClientIDLen bounds Event.ClientID.
	MaxClientIDLen = 256
	// MaxPayloadLen bounds Event.Payload.
	MaxPayloadLen = 64 << 20
)

const (
	prefixLen     = 14 // magic, version, header body length
	headerFixed   = 36 // header body bytes besides the two strings
	minBody       = 32 // record body bytes besides type, client id, payload
	maxBody       = minBody + MaxTypeLen + MaxClientIDLen + MaxPayloadLen
	trailerMarker = 0xFFFFFFFF // record length value reserved for the trailer
	trailerLen    = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrUnsupportedVersion is returned (wrapped, naming the version) by
// NewReader for an intact header whose format version is not FormatVersion.
var ErrUnsupportedVersion = errors.New("export: unsupported format version")

// Header describes an export. It is written first and is a promise about the
// records that follow: EventCount events with seqs FirstSeq..LastSeq.
type Header struct {
	// ClusterID identifies the Raft group the events came from.
	ClusterID string `json:"cluster_id"`
	// Source is the member id that produced the export.
	Source string `json:"source"`
	// FirstSeq is the seq of the first event (free when EventCount is 0).
	FirstSeq uint64 `json:"first_seq"`
	// LastSeq is the seq of the last event, 0 if the export is empty.
	LastSeq uint64 `json:"last_seq"`
	// EventCount is the exact number of events in the export.
	EventCount uint64 `json:"event_count"`
	// Created is when the export was made; the zero time means unset.
	Created time.Time `json:"created"`
}

// Event is one journal event as stored in an export.
type Event struct {
	// Seq is the journal sequence number.
	Seq uint64
	// Type is the event type name.
	Type string
	// Payload is the opaque event body; a zero-length payload reads as nil.
	Payload []byte
	// ClientID and RequestSeq identify the client append (for dedupe).
	ClientID   string
	RequestSeq uint64
	// Index is the Raft log index that committed the event.
	Index uint64
}

// DamageError reports the first problem a Reader found in an export.
type DamageError struct {
	// Offset is the file offset of the damaged element: 0 for the header,
	// otherwise the start (length field) of the record or trailer, or the
	// offset where a missing record or trailer was expected.
	Offset int64
	// Record is the zero-based index of the record being read, which is
	// also the number of good records before it.
	Record uint64
	// Seq is the seq the header promised for that record, or 0 when no
	// record was expected there (header damage, trailer, extra records).
	Seq uint64
	// Reason says what is wrong, e.g. "crc mismatch", "truncated",
	// "seq gap: want 8 got 10", "bad length 7"; header and trailer problems
	// start with "header: " and "trailer: ".
	Reason string
}

// Error implements error.
func (e *DamageError) Error() string {
	if strings.HasPrefix(e.Reason, "header: ") {
		return fmt.Sprintf("export: damaged header at offset %d: %s", e.Offset, strings.TrimPrefix(e.Reason, "header: "))
	}
	if e.Seq != 0 {
		return fmt.Sprintf("export: damage at offset %d (record %d, seq %d): %s", e.Offset, e.Record, e.Seq, e.Reason)
	}
	return fmt.Sprintf("export: damage at offset %d (record %d): %s", e.Offset, e.Record, e.Reason)
}

// checkHeader returns why h is not a valid header, or "".
func checkHeader(h Header) string {
	switch {
	case len(h.ClusterID) > MaxClusterIDLen:
		return fmt.Sprintf("cluster id is %d bytes, max %d", len(h.ClusterID), MaxClusterIDLen)
	case len(h.Source) > MaxSourceLen:
		return fmt.Sprintf("source is %d bytes, max %d", len(h.Source), MaxSourceLen)
	case h.EventCount == 0 && h.LastSeq != 0:
		return fmt.Sprintf("event_count 0 but last_seq %d (want 0)", h.LastSeq)
	case h.EventCount != 0 && h.FirstSeq == 0:
		return "first_seq 0 with events (seqs start at 1)"
	case h.EventCount != 0 && h.EventCount-1 > math.MaxUint64-h.FirstSeq:
		return fmt.Sprintf("first_seq %d + event_count %d overflows", h.FirstSeq, h.EventCount)
	case h.EventCount != 0 && h.LastSeq != h.FirstSeq+h.EventCount-1:
		return fmt.Sprintf("last_seq %d, want first_seq+event_count-1 = %d", h.LastSeq, h.FirstSeq+h.EventCount-1)
	}
	return ""
}

var (
	minCreated = time.Unix(0, math.MinInt64)
	maxCreated = time.Unix(0, math.MaxInt64)
)

// encodeHeader returns the complete header bytes, CRC included.
func encodeHeader(h Header) ([]byte, error) {
	if r := checkHeader(h); r != "" {
		return nil, errors.New("export: invalid header: " + r)
	}
	var nanos int64
	if !h.Created.IsZero() {
		if h.Created.Before(minCreated) || h.Created.After(maxCreated) {
			return nil, fmt.Errorf("export: invalid header: created %v not representable in int64 nanoseconds", h.Created)
		}
		nanos = h.Created.UnixNano()
	}
	n := headerFixed + len(h.ClusterID) + len(h.Source)
	b := make([]byte, 0, prefixLen+n+4)
	b = append(b, Magic...)
	b = binary.BigEndian.AppendUint16(b, FormatVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = appendString16(b, h.ClusterID)
	b = appendString16(b, h.Source)
	b = binary.BigEndian.AppendUint64(b, h.FirstSeq)
	b = binary.BigEndian.AppendUint64(b, h.LastSeq)
	b = binary.BigEndian.AppendUint64(b, h.EventCount)
	b = binary.BigEndian.AppendUint64(b, uint64(nanos))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// digestAdd folds one record CRC (as its 4 big-endian bytes) into a running
// trailer digest. It is crc32.Update on those 4 bytes, done byte-wise with
// the table so that nothing escapes to the heap.
func digestAdd(digest, crc uint32) uint32 {
	d := ^digest
	for shift := 24; shift >= 0; shift -= 8 {
		d = castagnoli[byte(d)^byte(crc>>shift)] ^ d>>8
	}
	return ^d
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// readHeader reads and verifies the header at offset 0 of w. It returns the
// header and the offset of the first record, or a *DamageError, a wrapped
// ErrUnsupportedVersion, or a read error.
func readHeader(w *window) (Header, int64, error) {
	damage := func(reason string) (Header, int64, error) {
		if err := w.ioErr(); err != nil {
			return Header{}, 0, err
		}
		return Header{}, 0, &DamageError{Reason: "header: " + reason}
	}
	if !w.ensure(0, prefixLen) {
		if w.avail(0) >= len(Magic) && string(w.slice(0, len(Magic))) != Magic {
			return damage("bad magic")
		}
		return damage("truncated")
	}
	p := w.slice(0, prefixLen)
	if string(p[:len(Magic)]) != Magic {
		return damage("bad magic")
	}
	n := binary.BigEndian.Uint32(p[10:])
	if n > MaxHeaderLen { // the v1 lower bound is checked by parsing below
		return damage(fmt.Sprintf("bad length %d", n))
	}
	total := prefixLen + int(n) + 4
	if !w.ensure(0, total) {
		return damage("truncated")
	}
	b := w.slice(0, total)
	if crc32.Checksum(b[:total-4], castagnoli) != binary.BigEndian.Uint32(b[total-4:]) {
		return damage("crc mismatch")
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != FormatVersion {
		return Header{}, 0, fmt.Errorf("%w %d (this build reads version %d)", ErrUnsupportedVersion, v, FormatVersion)
	}
	body := b[prefixLen : total-4]
	var h Header
	var ok bool
	if h.ClusterID, body, ok = cutString16(body); !ok {
		return damage("bad cluster id length")
	}
	if h.Source, body, ok = cutString16(body); !ok {
		return damage("bad source length")
	}
	if len(body) != headerFixed-4 {
		return damage(fmt.Sprintf("bad length %d: fields need %d", n, int(n)-len(body)+headerFixed-4))
	}
	h.FirstSeq = binary.BigEndian.Uint64(body)
	h.LastSeq = binary.BigEndian.Uint64(body[8:])
	h.EventCount = binary.BigEndian.Uint64(body[16:])
	if nanos := int64(binary.BigEndian.Uint64(body[24:])); nanos != 0 {
		h.Created = time.Unix(0, nanos).UTC()
	}
	if r := checkHeader(h); r != "" {
		return damage(r)
	}
	return h, int64(total), nil
}

// cutString16 splits a uint16-length-prefixed string (at most 256 bytes)
// off the front of b.
func cutString16(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", b, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if n > 256 || len(b) < 2+n {
		return "", b, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// Frame kinds returned by parseFrame.
const (
	frameBad     = iota // damaged or truncated; reason says why
	frameEOF            // clean end of file exactly at the offset
	frameRecord         // a record whose lengths and CRC check out
	frameTrailer        // a trailer whose own CRC checks out
)

// frame is one parsed record or trailer. The byte slices alias the window
// and are valid only until its next ensure or discard.
type frame struct {
	kind   int
	size   int64
	why    uint8 // frameBad: what is wrong (a why* constant), with x and y
	x, y   int64
	crc    uint32 // record CRC field
	ev     Event  // Type, ClientID and Payload left empty; see typ etc.
	typ    []byte
	client []byte
	pay    []byte
	count  uint64 // trailer record count
	digest uint32 // trailer digest
}

// Reasons a frame is bad; see frame.reason.
const (
	whyTruncated uint8 = iota
	whyTrailerTruncated
	whyTrailerCRC
	whyLength
	whyTypeLen
	whyClientLen
	whyPayloadLen
	whyFields
	whyCRC
)

// reason describes why a frameBad frame is bad. It is formatted only on
// demand, as Inspect's resync scan rejects candidates at every byte.
func (f frame) reason() string {
	switch f.why {
	case whyTrailerTruncated:
		return "trailer: truncated"
	case whyTrailerCRC:
		return "trailer: crc mismatch"
	case whyLength:
		return fmt.Sprintf("bad length %d", f.x)
	case whyTypeLen:
		return fmt.Sprintf("bad length: type length %d exceeds %d", f.x, MaxTypeLen)
	case whyClientLen:
		return fmt.Sprintf("bad length: client id length %d exceeds %d", f.x, MaxClientIDLen)
	case whyPayloadLen:
		return fmt.Sprintf("bad length: payload length %d exceeds %d", f.x, MaxPayloadLen)
	case whyFields:
		return fmt.Sprintf("bad length %d: fields need %d", f.x, f.y)
	case whyCRC:
		return "crc mismatch"
	}
	return "truncated"
}

// parseFrame parses the record or trailer starting at off. It checks, in
// order, the length bounds, the consistency of the body's own lengths with
// the record length, and the CRC; it does not look at seqs.
func parseFrame(w *window, off int64) frame {
	bad := func(why uint8, x, y int64) frame { return frame{kind: frameBad, why: why, x: x, y: y} }
	if !w.ensure(off, 4) {
		if w.avail(off) == 0 && w.ioErr() == nil {
			return frame{kind: frameEOF}
		}
		return bad(whyTruncated, 0, 0)
	}
	l := binary.BigEndian.Uint32(w.slice(off, 4))
	if l == trailerMarker {
		if !w.ensure(off, trailerLen) {
			return bad(whyTrailerTruncated, 0, 0)
		}
		b := w.slice(off, trailerLen)
		if crc32.Checksum(b[:16], castagnoli) != binary.BigEndian.Uint32(b[16:]) {
			return bad(whyTrailerCRC, 0, 0)
		}
		return frame{kind: frameTrailer, size: trailerLen,
			count: binary.BigEndian.Uint64(b[4:]), digest: binary.BigEndian.Uint32(b[12:])}
	}
	if l < minBody || l > maxBody {
		return bad(whyLength, int64(l), 0)
	}
	// Walk the body's own length fields; each read is bounded by the
	// previous check, so at most ~560 bytes are needed before L is trusted.
	at := 4 + 8
	if !w.ensure(off, at+2) {
		return bad(whyTruncated, 0, 0)
	}
	t := int(binary.BigEndian.Uint16(w.slice(off+int64(at), 2)))
	if t > MaxTypeLen {
		return bad(whyTypeLen, int64(t), 0)
	}
	at += 2 + t
	if !w.ensure(off, at+2) {
		return bad(whyTruncated, 0, 0)
	}
	k := int(binary.BigEndian.Uint16(w.slice(off+int64(at), 2)))
	if k > MaxClientIDLen {
		return bad(whyClientLen, int64(k), 0)
	}
	at += 2 + k + 16
	if !w.ensure(off, at+4) {
		return bad(whyTruncated, 0, 0)
	}
	p := int64(binary.BigEndian.Uint32(w.slice(off+int64(at), 4)))
	if p > MaxPayloadLen {
		return bad(whyPayloadLen, p, 0)
	}
	if need := int64(minBody+t+k) + p; need != int64(l) {
		return bad(whyFields, int64(l), need)
	}
	size := 4 + int(l) + 4
	if !w.ensure(off, size) {
		return bad(whyTruncated, 0, 0)
	}
	b := w.slice(off, size)
	f := frame{kind: frameRecord, size: int64(size), crc: binary.BigEndian.Uint32(b[size-4:])}
	if crc32.Checksum(b[:size-4], castagnoli) != f.crc {
		return bad(whyCRC, 0, 0)
	}
	f.ev.Seq = binary.BigEndian.Uint64(b[4:])
	f.typ = b[14 : 14+t]
	f.client = b[16+t : 16+t+k]
	f.ev.RequestSeq = binary.BigEndian.Uint64(b[16+t+k:])
	f.ev.Index = binary.BigEndian.Uint64(b[24+t+k:])
	f.pay = b[36+t+k : size-4]
	return f
}
