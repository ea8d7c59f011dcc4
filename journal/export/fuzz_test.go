package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

// fuzzSeeds are valid exports and damaged variants of them.
func fuzzSeeds(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	evs := genEvents(rng, 1, 5, 30)
	full := encode(f, headerFor(1, evs), evs)
	f.Add(full)
	f.Add(encode(f, Header{ClusterID: "c", FirstSeq: 9}, nil))
	f.Add(full[:len(full)-3])
	f.Add(full[:len(full)-trailerLen])
	flipped := bytes.Clone(full)
	flipped[len(flipped)/2] ^= 4
	f.Add(flipped)
	f.Add([]byte(Magic))
	f.Add([]byte{})
}

// fixCRCs returns a copy of data with every CRC that can be located (the
// header's, each record's whose length is in bounds, the trailer's digest
// and own CRC) recomputed, so that fuzzing also reaches the checks behind the CRCs.
func fixCRCs(data []byte) []byte {
	d := bytes.Clone(data)
	be := binary.BigEndian
	if len(d) < prefixLen {
		return d
	}
	off := prefixLen + int(min(be.Uint32(d[10:]), MaxHeaderLen))
	if off+4 > len(d) {
		return d
	}
	be.PutUint32(d[off:], crc32.Checksum(d[:off], castagnoli))
	var digest uint32
	for off += 4; off+4 <= len(d); {
		l := be.Uint32(d[off:])
		switch {
		case l == trailerMarker && off+trailerLen <= len(d):
			be.PutUint32(d[off+12:], digest)
			be.PutUint32(d[off+16:], crc32.Checksum(d[off:off+16], castagnoli))
			return d
		case l < minBody || l > maxBody || off+8+int(l) > len(d):
			return d
		}
		crc := crc32.Checksum(d[off:off+4+int(l)], castagnoli)
		be.PutUint32(d[off+4+int(l):], crc)
		digest = digestAdd(digest, crc)
		off += 8 + int(l)
	}
	return d
}

// checkDamage: a non-EOF error from a bytes.Reader source is always damage.
func checkDamage(t *testing.T, err error) {
	var de *DamageError
	if !errors.As(err, &de) && !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("error is neither damage nor version: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "export: ") {
		t.Fatalf("error without prefix: %v", err)
	}
}

// FuzzReader: the Reader never panics, a read that reaches io.EOF is of a
// canonical file (re-encoding it gives the same bytes), and the Reader
// agrees with Inspect.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReader(t, data)
		checkReader(t, fixCRCs(data))
	})
}

func checkReader(t *testing.T, data []byte) {
	h, evs, err := readAll(data)
	rep := Inspect(bytes.NewReader(data))
	if err != nil {
		checkDamage(t, err)
		if rep.Integrity != IntegrityDamaged {
			t.Fatalf("reader: %v; inspect:\n%s", err, rep)
		}
		return
	}
	if rep.Integrity != IntegrityOK || rep.Records != uint64(len(evs)) {
		t.Fatalf("reader OK with %d events; inspect:\n%s", len(evs), rep)
	}
	if again := encode(t, h, evs); !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs:\n% x\n% x", data, again)
	}
}

// FuzzInspect: Inspect never panics or hangs, its ranges are ordered and
// inside the file, and it agrees with the Reader.
func FuzzInspect(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInspect(t, data)
		checkInspect(t, fixCRCs(data))
	})
}

func checkInspect(t *testing.T, data []byte) {
	rep := Inspect(bytes.NewReader(data))
	s := rep.String()
	if !strings.HasSuffix(s, "integrity "+rep.Integrity) {
		t.Fatalf("report string: %q", s)
	}
	prev := int64(0)
	for _, d := range rep.Damaged {
		if d.StartOffset < prev || d.EndOffset < d.StartOffset || d.EndOffset > int64(len(data)) {
			t.Fatalf("bad range %+v (previous end %d, size %d):\n%s", d, prev, len(data), s)
		}
		prev = d.EndOffset
	}
	if rep.Records > 0 && rep.LastSeq-rep.FirstSeq < rep.Records-1 {
		t.Fatalf("%d records in seq %d..%d", rep.Records, rep.FirstSeq, rep.LastSeq)
	}
	_, _, err := readAll(data)
	if (err == nil) != (rep.Integrity == IntegrityOK) {
		t.Fatalf("reader: %v; inspect:\n%s", err, s)
	}
	if err != nil {
		checkDamage(t, err)
	}
}
