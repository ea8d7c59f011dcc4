package blocktoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Version is the token format this build writes and reads.
const Version = 1

// Bounds of a token's fields.
const (
	MaxPoolBytes  = 128
	MaxUserBytes  = 128
	macBytes      = sha256.Size
	fixedBytes    = 1 + 4 + 8 + 8 + 8 + 8 + 1 + 1 + 1
	MaxTokenBytes = fixedBytes + MaxPoolBytes + MaxUserBytes + macBytes
	// KeyBytes is the length of a block key.
	KeyBytes = 32
)

// Mode is a set of access modes.
type Mode uint8

// The access modes.
const (
	Read Mode = 1 << iota
	Write
	Copy
	Replace
	allModes = Read | Write | Copy | Replace
)

func (m Mode) String() string {
	s := ""
	for _, x := range []struct {
		m    Mode
		name string
	}{{Read, "read"}, {Write, "write"}, {Copy, "copy"}, {Replace, "replace"}} {
		if m&x.m != 0 {
			if s != "" {
				s += "+"
			}
			s += x.name
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// Identifier is what a token grants.
type Identifier struct {
	KeyID   uint32
	Expiry  time.Time // refused at and after it (millisecond precision)
	BlockID uint64
	MinGS   uint64
	MaxGS   uint64
	Modes   Mode
	Pool    string
	User    string
}

// Errors of Decode and Verify; each is wrapped with the detail.
var (
	ErrMalformed  = errors.New("blocktoken: malformed token")
	ErrUnknownKey = errors.New("blocktoken: signed by a key this node does not hold")
	ErrForged     = errors.New("blocktoken: signature does not match")
	ErrExpired    = errors.New("blocktoken: expired")
	ErrNotCovered = errors.New("blocktoken: does not cover the request")
)

func (id Identifier) validate() error {
	switch {
	case id.BlockID == 0:
		return fmt.Errorf("%w: block id 0", ErrMalformed)
	case id.MinGS > id.MaxGS:
		return fmt.Errorf("%w: GS range %d..%d", ErrMalformed, id.MinGS, id.MaxGS)
	case id.Modes == 0 || id.Modes&^allModes != 0:
		return fmt.Errorf("%w: modes %#x", ErrMalformed, uint8(id.Modes))
	case len(id.Pool) == 0 || len(id.Pool) > MaxPoolBytes:
		return fmt.Errorf("%w: pool of %d bytes", ErrMalformed, len(id.Pool))
	case len(id.User) > MaxUserBytes:
		return fmt.Errorf("%w: user of %d bytes", ErrMalformed, len(id.User))
	}
	return nil
}

func (id Identifier) encode() []byte {
	b := make([]byte, 0, fixedBytes+len(id.Pool)+len(id.User)+macBytes)
	b = append(b, Version)
	b = binary.BigEndian.AppendUint32(b, id.KeyID)
	b = binary.BigEndian.AppendUint64(b, uint64(id.Expiry.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, id.BlockID)
	b = binary.BigEndian.AppendUint64(b, id.MinGS)
	b = binary.BigEndian.AppendUint64(b, id.MaxGS)
	b = append(b, byte(id.Modes), byte(len(id.Pool)))
	b = append(b, id.Pool...)
	b = append(b, byte(len(id.User)))
	return append(b, id.User...)
}

// Sign encodes id and signs it with key (KeyBytes long; its id is
// id.KeyID).
func Sign(id Identifier, key []byte) ([]byte, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("blocktoken: key of %d bytes, want %d", len(key), KeyBytes)
	}
	if err := id.validate(); err != nil {
		return nil, err
	}
	b := id.encode()
	return mac(key, b, b), nil
}

func mac(key, msg, dst []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(dst)
}

// Decode parses a token without checking its signature.
func Decode(tok []byte) (Identifier, error) {
	if len(tok) < fixedBytes+macBytes || len(tok) > MaxTokenBytes {
		return Identifier{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(tok))
	}
	if tok[0] != Version {
		return Identifier{}, fmt.Errorf("%w: version %d", ErrMalformed, tok[0])
	}
	body := tok[:len(tok)-macBytes]
	id := Identifier{
		KeyID:   binary.BigEndian.Uint32(body[1:5]),
		Expiry:  time.UnixMilli(int64(binary.BigEndian.Uint64(body[5:13]))).UTC(),
		BlockID: binary.BigEndian.Uint64(body[13:21]),
		MinGS:   binary.BigEndian.Uint64(body[21:29]),
		MaxGS:   binary.BigEndian.Uint64(body[29:37]),
		Modes:   Mode(body[37]),
	}
	rest := body[38:]
	pool, rest, ok := lengthPrefixed(rest)
	if !ok {
		return Identifier{}, fmt.Errorf("%w: pool past the end", ErrMalformed)
	}
	user, rest, ok := lengthPrefixed(rest)
	if !ok || len(rest) != 0 {
		return Identifier{}, fmt.Errorf("%w: user past the end or trailing bytes", ErrMalformed)
	}
	id.Pool, id.User = string(pool), string(user)
	if err := id.validate(); err != nil {
		return Identifier{}, err
	}
	return id, nil
}

func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return nil, nil, false
	}
	return b[1 : 1+int(b[0])], b[1+int(b[0]):], true
}

// Request is what a caller asks a node to do with a block.
type Request struct {
	BlockID uint64
	Pool    string
	GS      uint64
	Mode    Mode
}

// Verify checks tok for req at now with the keys the node holds (by key
// id) and returns what it grants.
func Verify(tok []byte, keys map[uint32][]byte, req Request, now time.Time) (Identifier, error) {
	id, err := Decode(tok)
	if err != nil {
		return Identifier{}, err
	}
	key, ok := keys[id.KeyID]
	if !ok {
		return Identifier{}, fmt.Errorf("%w: key %d", ErrUnknownKey, id.KeyID)
	}
	body := tok[:len(tok)-macBytes]
	if !hmac.Equal(mac(key, body, nil), tok[len(tok)-macBytes:]) {
		return Identifier{}, ErrForged
	}
	if !now.Before(id.Expiry) {
		return Identifier{}, fmt.Errorf("%w at %s", ErrExpired, id.Expiry.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case req.BlockID != id.BlockID || req.Pool != id.Pool:
		return Identifier{}, fmt.Errorf("%w: it is for block %d of pool %q", ErrNotCovered, id.BlockID, id.Pool)
	case req.GS < id.MinGS || req.GS > id.MaxGS:
		return Identifier{}, fmt.Errorf("%w: GS %d outside %d..%d", ErrNotCovered, req.GS, id.MinGS, id.MaxGS)
	case req.Mode == 0 || req.Mode&^id.Modes != 0:
		return Identifier{}, fmt.Errorf("%w: %s asked, %s granted", ErrNotCovered, req.Mode, id.Modes)
	}
	return id, nil
}
