package blocktoken

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	now  = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	key1 = bytes.Repeat([]byte{1}, KeyBytes)
	key2 = bytes.Repeat([]byte{2}, KeyBytes)
	keys = map[uint32][]byte{1: key1, 2: key2}
)

func ident() Identifier {
	return Identifier{KeyID: 1, Expiry: now.Add(10 * time.Minute), BlockID: 42, MinGS: 1001, MaxGS: 1003, Modes: Read | Copy, Pool: "BP-1", User: "alice"}
}

func sign(t testing.TB, id Identifier, key []byte) []byte {
	t.Helper()
	tok, err := Sign(id, key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	id := ident()
	tok := sign(t, id, key1)
	got, err := Verify(tok, keys, Request{BlockID: 42, Pool: "BP-1", GS: 1002, Mode: Read}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("got %+v, want %+v", got, id)
	}
	if len(tok) > MaxTokenBytes {
		t.Fatalf("%d bytes", len(tok))
	}
}

func TestVerifyRefuses(t *testing.T) {
	good := sign(t, ident(), key1)
	req := Request{BlockID: 42, Pool: "BP-1", GS: 1002, Mode: Read}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	other := ident()
	other.KeyID = 7
	signedBy2 := ident()
	signedBy2.KeyID = 2
	for _, c := range []struct {
		name string
		tok  []byte
		req  Request
		at   time.Time
		want error
	}{
		{"a flipped identifier bit", flip(20), req, now, ErrForged},
		{"a flipped MAC bit", flip(len(good) - 1), req, now, ErrForged},
		{"signed with another key than it names", sign(t, signedBy2, key1), req, now, ErrForged},
		{"an unknown key", sign(t, other, key1), req, now, ErrUnknownKey},
		{"at its expiry", good, req, now.Add(10 * time.Minute), ErrExpired},
		{"after its expiry (a replay)", good, req, now.Add(time.Hour), ErrExpired},
		{"another block", good, Request{BlockID: 43, Pool: "BP-1", GS: 1002, Mode: Read}, now, ErrNotCovered},
		{"another pool", good, Request{BlockID: 42, Pool: "BP-2", GS: 1002, Mode: Read}, now, ErrNotCovered},
		{"a GS below", good, Request{BlockID: 42, Pool: "BP-1", GS: 1000, Mode: Read}, now, ErrNotCovered},
		{"a GS above", good, Request{BlockID: 42, Pool: "BP-1", GS: 1004, Mode: Read}, now, ErrNotCovered},
		{"a mode not granted", good, Request{BlockID: 42, Pool: "BP-1", GS: 1002, Mode: Write}, now, ErrNotCovered},
		{"no mode", good, Request{BlockID: 42, Pool: "BP-1", GS: 1002}, now, ErrNotCovered},
		{"truncated", good[:len(good)-1], req, now, ErrMalformed},
		{"empty", nil, req, now, ErrMalformed},
		{"too long", append(bytes.Clone(good), make([]byte, MaxTokenBytes)...), req, now, ErrMalformed},
		{"another version", append([]byte{9}, good[1:]...), req, now, ErrMalformed},
	} {
		_, err := Verify(c.tok, keys, c.req, c.at)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Both modes of a token granting two.
	if _, err := Verify(good, keys, Request{BlockID: 42, Pool: "BP-1", GS: 1001, Mode: Read | Copy}, now); err != nil {
		t.Errorf("read+copy: %v", err)
	}
}

func TestSignRefusesBadIdentifiers(t *testing.T) {
	for name, mod := range map[string]func(*Identifier){
		"block 0":      func(id *Identifier) { id.BlockID = 0 },
		"GS range":     func(id *Identifier) { id.MinGS, id.MaxGS = 5, 4 },
		"no mode":      func(id *Identifier) { id.Modes = 0 },
		"unknown mode": func(id *Identifier) { id.Modes = 0x40 },
		"no pool":      func(id *Identifier) { id.Pool = "" },
		"long pool":    func(id *Identifier) { id.Pool = strings.Repeat("p", MaxPoolBytes+1) },
		"long user":    func(id *Identifier) { id.User = strings.Repeat("u", MaxUserBytes+1) },
	} {
		id := ident()
		mod(&id)
		if _, err := Sign(id, key1); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Sign(ident(), key1[:16]); err == nil {
		t.Error("a short key signed")
	}
	// The longest fields fit MaxTokenBytes.
	id := ident()
	id.Pool, id.User = strings.Repeat("p", MaxPoolBytes), strings.Repeat("u", MaxUserBytes)
	if tok := sign(t, id, key1); len(tok) != MaxTokenBytes {
		t.Errorf("longest token %d bytes, MaxTokenBytes %d", len(tok), MaxTokenBytes)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(sign(f, ident(), key1), uint64(42), uint64(1002), uint8(Read))
	f.Add([]byte{1}, uint64(0), uint64(0), uint8(0))
	f.Fuzz(func(t *testing.T, tok []byte, blk, gs uint64, mode uint8) {
		id, err := Verify(tok, keys, Request{BlockID: blk, Pool: "BP-1", GS: gs, Mode: Mode(mode)}, now)
		if err != nil {
			return
		}
		// Whatever verifies was signed by a key we hold, and re-signs to
		// the same bytes.
		again, err := Sign(id, keys[id.KeyID])
		if err != nil || !bytes.Equal(again, tok) {
			t.Fatalf("a verified token does not re-sign to itself: %v", err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add(sign(f, ident(), key1))
	f.Fuzz(func(t *testing.T, tok []byte) {
		id, err := Decode(tok)
		if err != nil {
			return
		}
		if err := id.validate(); err != nil {
			t.Fatalf("decoded an invalid identifier: %v", err)
		}
	})
}
