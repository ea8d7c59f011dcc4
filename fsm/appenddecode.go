package fsm

import (
	"errors"
	"unicode/utf8"
	"unsafe"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// The journal's hot path decodes APPEND entries by hand: every member
// applies every entry, and proto.Unmarshal would copy the envelope's payload
// (the whole entry), then allocate a message, a payload copy and two
// strings per event, all garbage once the events are copied into the
// event log. decodeEnvelope and appendView.decode read the same wire format
// without copying: what they return aliases the entry's bytes and is valid
// only while Apply runs. They accept and refuse exactly what proto.Unmarshal
// of pb.Command and pb.AppendCommand does (FuzzDecodeAppend), so a member
// built with them applies the same log as one without, and halts on the
// same entries.

// errWire is a malformed field or message (proto.Unmarshal's parse error).
var errWire = errors.New("proto: cannot parse invalid wire-format data")

// errUTF8 is a string field that is not valid UTF-8 (proto3 refuses it).
var errUTF8 = errors.New("proto: string field contains invalid UTF-8")

// envelope is pb.Command with its payload aliasing the entry.
type envelope struct {
	version uint32
	typ     pb.CommandType
	payload []byte
	nanos   int64
	clock   int64
}

// appendOpView is one pb.AppendOp; its events are events[first:first+n] of
// the appendView.
type appendOpView struct {
	clientID   string // aliases the entry
	requestSeq uint64
	ackedSeq   uint64
	// established is AppendOp.session_established.
	established bool
	first, n    int
}

// eventView is one pb.JournalEvent.
type eventView struct {
	typ     string // aliases the entry
	payload []byte
	crc     uint32
}

// appendView is a decoded pb.AppendCommand, reused from entry to entry.
type appendView struct {
	ops    []appendOpView
	events []eventView
}

// field reads one field: its number and wire type, v the value of a varint
// or fixed field, bs the bytes of a length-delimited one (a group is
// consumed whole), n the bytes it took.
func field(b []byte) (num protowire.Number, typ protowire.Type, v uint64, bs []byte, n int, err error) {
	num, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 || num > protowire.MaxValidNumber {
		return 0, 0, 0, nil, 0, errWire
	}
	b = b[tn:]
	var m int
	switch typ {
	case protowire.VarintType:
		v, m = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var x uint32
		x, m = protowire.ConsumeFixed32(b)
		v = uint64(x)
	case protowire.Fixed64Type:
		v, m = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		bs, m = protowire.ConsumeBytes(b)
	default:
		m = protowire.ConsumeFieldValue(num, typ, b)
	}
	if m < 0 {
		return 0, 0, 0, nil, 0, errWire
	}
	return num, typ, v, bs, tn + m, nil
}

// aliasString is b as a string without a copy; the caller must not keep it
// past the bytes' lifetime (strings.Clone what is stored).
func aliasString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// decodeEnvelope reads a pb.Command.
func decodeEnvelope(b []byte) (envelope, error) {
	var e envelope
	for len(b) > 0 {
		num, typ, v, bs, n, err := field(b)
		if err != nil {
			return envelope{}, err
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			e.version = uint32(v)
		case num == 2 && typ == protowire.VarintType:
			e.typ = pb.CommandType(int32(v))
		case num == 3 && typ == protowire.BytesType:
			e.payload = bs
		case num == 4 && typ == protowire.VarintType:
			e.nanos = int64(v)
		case num == 5 && typ == protowire.VarintType:
			e.clock = int64(v)
		}
	}
	return e, nil
}

// decode reads a pb.AppendCommand into a (reset first).
func (a *appendView) decode(b []byte) error {
	a.ops, a.events = a.ops[:0], a.events[:0]
	for len(b) > 0 {
		num, typ, _, bs, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			if err := a.decodeOp(bs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *appendView) decodeOp(b []byte) error {
	op := appendOpView{first: len(a.events)}
	for len(b) > 0 {
		num, typ, v, bs, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			if !utf8.Valid(bs) {
				return errUTF8
			}
			op.clientID = aliasString(bs)
		case num == 2 && typ == protowire.VarintType:
			op.requestSeq = v
		case num == 3 && typ == protowire.VarintType:
			op.ackedSeq = v
		case num == 5 && typ == protowire.VarintType:
			op.established = v != 0
		case num == 4 && typ == protowire.BytesType:
			e, err := decodeEvent(bs)
			if err != nil {
				return err
			}
			a.events = append(a.events, e)
		}
	}
	op.n = len(a.events) - op.first
	a.ops = append(a.ops, op)
	return nil
}

func decodeEvent(b []byte) (eventView, error) {
	var e eventView
	for len(b) > 0 {
		num, typ, v, bs, n, err := field(b)
		if err != nil {
			return eventView{}, err
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			if !utf8.Valid(bs) {
				return eventView{}, errUTF8
			}
			e.typ = aliasString(bs)
		case num == 2 && typ == protowire.BytesType:
			e.payload = bs
		case num == 3 && typ == protowire.Fixed32Type:
			e.crc = uint32(v)
		}
	}
	return e, nil
}
