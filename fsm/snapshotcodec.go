package fsm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Event records are nearly all of a snapshot (one per retained event, a
// million or more on a busy member), and every restart, every follower
// that catches up by snapshot and every periodic snapshot goes through
// them. They are written and read here by hand, like APPEND entries
// (appenddecode.go): appendEventRecord writes exactly the bytes that
// proto's deterministic marshal of SnapshotRecord{Event: e} writes, and
// decodeEventRecord reads such a record without a message, a payload copy
// or strings of its own — the event is copied once, into the event log.
// Any other shape of record (a build that wrote fields in another order
// still decodes: the field loop takes them in any order) falls back to
// proto.Unmarshal, so what is accepted and refused is proto's decision
// (FuzzDecodeEventRecord).

// Field numbers of pb.SnapshotRecord.event and pb.StoredEvent.
const (
	recordEventField = 1
	storedSeq        = 1
	storedType       = 2
	storedPayload    = 3
	storedClientID   = 4
	storedRequestSeq = 5
	storedIndex      = 6
	tagBytes         = 1 // the tag of each field above is one byte (numbers below 16)
)

// storedEventSize is the encoded size of a pb.StoredEvent (proto3: zero
// values are not written).
func storedEventSize(seq uint64, typ string, payload []byte, clientID string, requestSeq, index uint64) int {
	n := 0
	if seq != 0 {
		n += tagBytes + protowire.SizeVarint(seq)
	}
	if len(typ) > 0 {
		n += tagBytes + protowire.SizeBytes(len(typ))
	}
	if len(payload) > 0 {
		n += tagBytes + protowire.SizeBytes(len(payload))
	}
	if len(clientID) > 0 {
		n += tagBytes + protowire.SizeBytes(len(clientID))
	}
	if requestSeq != 0 {
		n += tagBytes + protowire.SizeVarint(requestSeq)
	}
	if index != 0 {
		n += tagBytes + protowire.SizeVarint(index)
	}
	return n
}

// appendEventRecord appends SnapshotRecord{Event: StoredEvent{...}} as
// proto.MarshalOptions{Deterministic: true} encodes it: fields in number
// order, zero values left out.
func appendEventRecord(dst []byte, seq uint64, typ string, payload []byte, clientID string, requestSeq, index uint64) []byte {
	dst = protowire.AppendTag(dst, recordEventField, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(storedEventSize(seq, typ, payload, clientID, requestSeq, index)))
	if seq != 0 {
		dst = protowire.AppendTag(dst, storedSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, seq)
	}
	if len(typ) > 0 {
		dst = protowire.AppendTag(dst, storedType, protowire.BytesType)
		dst = protowire.AppendString(dst, typ)
	}
	if len(payload) > 0 {
		dst = protowire.AppendTag(dst, storedPayload, protowire.BytesType)
		dst = protowire.AppendBytes(dst, payload)
	}
	if len(clientID) > 0 {
		dst = protowire.AppendTag(dst, storedClientID, protowire.BytesType)
		dst = protowire.AppendString(dst, clientID)
	}
	if requestSeq != 0 {
		dst = protowire.AppendTag(dst, storedRequestSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, requestSeq)
	}
	if index != 0 {
		dst = protowire.AppendTag(dst, storedIndex, protowire.VarintType)
		dst = protowire.AppendVarint(dst, index)
	}
	return dst
}

// storedEventView is a decoded pb.StoredEvent whose strings and payload
// alias the record's bytes.
type storedEventView struct {
	seq        uint64
	typ        string
	payload    []byte
	clientID   string
	requestSeq uint64
	index      uint64
}

// decodeEventRecord reads a SnapshotRecord that is one event field and
// nothing else, as every build writes event records. ok is false for any
// other record, and for one it cannot read (the caller then runs
// proto.Unmarshal, whose answer, value or error, is the one that counts).
func decodeEventRecord(b []byte) (e storedEventView, ok bool) {
	num, typ, _, body, n, err := field(b)
	if err != nil || num != recordEventField || typ != protowire.BytesType || n != len(b) {
		return storedEventView{}, false
	}
	for len(body) > 0 {
		num, typ, v, bs, n, err := field(body)
		if err != nil {
			return storedEventView{}, false
		}
		body = body[n:]
		switch {
		case num == storedSeq && typ == protowire.VarintType:
			e.seq = v
		case num == storedType && typ == protowire.BytesType:
			if !utf8.Valid(bs) {
				return storedEventView{}, false
			}
			e.typ = aliasString(bs)
		case num == storedPayload && typ == protowire.BytesType:
			e.payload = bs
		case num == storedClientID && typ == protowire.BytesType:
			if !utf8.Valid(bs) {
				return storedEventView{}, false
			}
			e.clientID = aliasString(bs)
		case num == storedRequestSeq && typ == protowire.VarintType:
			e.requestSeq = v
		case num == storedIndex && typ == protowire.VarintType:
			e.index = v
		}
	}
	return e, true
}

// recordReader reads a snapshot's length-delimited records from r and
// feeds every byte it consumes into crc, a record at a time.
type recordReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	buf []byte
	// lenBytes holds the bytes of the length prefix being read.
	lenBytes [binary.MaxVarintLen64]byte
	nLen     int
}

// ReadByte serves binary.ReadUvarint, keeping the bytes for the CRC.
func (rr *recordReader) ReadByte() (byte, error) {
	c, err := rr.r.ReadByte()
	if err == nil && rr.nLen < len(rr.lenBytes) {
		rr.lenBytes[rr.nLen] = c
		rr.nLen++
	}
	return c, err
}

// next returns the next record's bytes, valid until the next call.
func (rr *recordReader) next() ([]byte, error) {
	rr.nLen = 0
	n, err := binary.ReadUvarint(rr)
	rr.crc.Write(rr.lenBytes[:rr.nLen])
	if err != nil {
		return nil, fmt.Errorf("%w: record length: %v", ErrSnapshotCorrupt, err)
	}
	if n > maxSnapshotRecord {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrSnapshotCorrupt, n)
	}
	if uint64(cap(rr.buf)) < n {
		rr.buf = make([]byte, n)
	}
	b := rr.buf[:n]
	if _, err := io.ReadFull(rr.r, b); err != nil {
		return nil, fmt.Errorf("%w: record body: %v", ErrSnapshotCorrupt, err)
	}
	rr.crc.Write(b)
	return b, nil
}
