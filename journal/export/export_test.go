package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// genEvents returns n events with seqs first.. and varied payloads: nil,
// empty, small, binary, and the odd large one.
func genEvents(rng *rand.Rand, first uint64, n int, maxPayload int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		var p []byte
		switch i % 7 {
		case 0: // nil payload
		case 1:
			p = []byte{}
		default:
			p = make([]byte, rng.IntN(maxPayload+1))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
		}
		typ := []string{"", "mknod", "setattr", strings.Repeat("t", MaxTypeLen), "\x00\xffbin"}[rng.IntN(5)]
		evs[i] = Event{Seq: first + uint64(i), Type: typ, Payload: p,
			ClientID:   []string{"", "client-1", strings.Repeat("c", MaxClientIDLen)}[rng.IntN(3)],
			RequestSeq: rng.Uint64(), Index: uint64(1000 + 2*i)}
	}
	return evs
}

func headerFor(first uint64, evs []Event) Header {
	h := Header{ClusterID: "cluster-a", Source: "member-2", FirstSeq: first, EventCount: uint64(len(evs)),
		Created: time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)}
	if len(evs) > 0 {
		h.LastSeq = first + uint64(len(evs)) - 1
	}
	return h
}

func encode(t testing.TB, h Header, evs []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads every event; err is nil only after a verified trailer.
func readAll(data []byte) (Header, []Event, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return Header{}, nil, err
	}
	var evs []Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return r.Header(), evs, nil
		}
		if err != nil {
			return r.Header(), evs, err
		}
		evs = append(evs, e)
	}
}

// layout returns the header end, each record's start offset and the
// trailer offset of an export of evs with header h.
func layout(h Header, evs []Event) (hdrEnd int64, starts []int64, trailer int64) {
	off := int64(18 + headerFixed + len(h.ClusterID) + len(h.Source))
	hdrEnd = off
	for _, e := range evs {
		starts = append(starts, off)
		off += int64(8 + minBody + len(e.Type) + len(e.ClientID) + len(e.Payload))
	}
	return hdrEnd, starts, off
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.ClientID != w.ClientID || g.RequestSeq != w.RequestSeq ||
			g.Index != w.Index || !bytes.Equal(g.Payload, w.Payload) || (len(g.Payload) == 0) != (g.Payload == nil) {
			t.Fatalf("event %d: got %+v, want %+v", i, g, w)
		}
	}
}

func sameHeader(t *testing.T, got, want Header) {
	t.Helper()
	if got.ClusterID != want.ClusterID || got.Source != want.Source || got.FirstSeq != want.FirstSeq ||
		got.LastSeq != want.LastSeq || got.EventCount != want.EventCount || !got.Created.Equal(want.Created) {
		t.Fatalf("header: got %+v, want %+v", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	evs := genEvents(rng, 77, 3000, 2048)
	evs[5].Payload = make([]byte, 300<<10) // bigger than the read chunk
	for i := range evs[5].Payload {
		evs[5].Payload[i] = byte(i * 7)
	}
	h := headerFor(77, evs)
	data := encode(t, h, evs)
	_, _, end := layout(h, evs)
	if int64(len(data)) != end+trailerLen {
		t.Fatalf("file is %d bytes, layout says %d", len(data), end+trailerLen)
	}
	gh, got, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	sameHeader(t, gh, h)
	sameEvents(t, got, evs)
	// The reader copes with short reads.
	for _, src := range []io.Reader{iotest.OneByteReader(bytes.NewReader(data)), iotest.HalfReader(bytes.NewReader(data))} {
		r, err := NewReader(src)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			e, err := r.Next()
			if err == io.EOF && i == len(evs) {
				break
			}
			if err != nil || e.Seq != evs[i].Seq || !bytes.Equal(e.Payload, evs[i].Payload) {
				t.Fatalf("short reads, event %d: %+v %v", i, e.Seq, err)
			}
		}
	}
	rep := Inspect(iotest.HalfReader(bytes.NewReader(data)))
	if rep.Integrity != IntegrityOK || !rep.HeaderOK || !rep.TrailerOK || rep.Records != 3000 ||
		rep.FirstSeq != 77 || rep.LastSeq != 3076 || len(rep.Damaged) != 0 {
		t.Fatalf("inspect: %+v", rep)
	}
	if s := rep.String(); !strings.HasSuffix(s, "integrity OK") {
		t.Fatalf("report string: %q", s)
	}
	t.Log("\n" + rep.String())
}

func TestEmptyRoundTrip(t *testing.T) {
	h := Header{ClusterID: "c", Source: "m1", FirstSeq: 42}
	data := encode(t, h, nil)
	if len(data) != 18+headerFixed+3+trailerLen {
		t.Fatalf("empty export is %d bytes", len(data))
	}
	gh, evs, err := readAll(data)
	if err != nil || len(evs) != 0 {
		t.Fatalf("read: %v %d events", err, len(evs))
	}
	sameHeader(t, gh, h)
	if !gh.Created.IsZero() {
		t.Fatalf("created: %v", gh.Created)
	}
	rep := Inspect(bytes.NewReader(data))
	if rep.Integrity != IntegrityOK || rep.Records != 0 || !strings.HasSuffix(rep.String(), "integrity OK") {
		t.Fatalf("inspect: %s", rep)
	}
}

// TestLayout pins the byte layout documented in doc.go.
func TestLayout(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("crc32c check value %08x", got)
	}
	h := Header{ClusterID: "ab", Source: "s", FirstSeq: 9, LastSeq: 9, EventCount: 1, Created: time.Unix(0, 5)}
	e := Event{Seq: 9, Type: "T", ClientID: "cl", RequestSeq: 3, Index: 4, Payload: []byte{0xAA}}
	d := encode(t, h, []Event{e})
	be := binary.BigEndian
	if string(d[:8]) != "LBKJEXP\n" || be.Uint16(d[8:]) != 1 || be.Uint32(d[10:]) != 36+3 {
		t.Fatalf("prefix % x", d[:14])
	}
	hb := d[14 : 14+39]
	if be.Uint16(hb) != 2 || string(hb[2:4]) != "ab" || be.Uint16(hb[4:]) != 1 || hb[6] != 's' ||
		be.Uint64(hb[7:]) != 9 || be.Uint64(hb[15:]) != 9 || be.Uint64(hb[23:]) != 1 || be.Uint64(hb[31:]) != 5 {
		t.Fatalf("header body % x", hb)
	}
	if be.Uint32(d[53:]) != crc32.Checksum(d[:53], castagnoli) {
		t.Fatal("header crc")
	}
	r := d[57:]
	l := be.Uint32(r)
	if l != 32+1+2+1 || be.Uint64(r[4:]) != 9 || be.Uint16(r[12:]) != 1 || r[14] != 'T' || be.Uint16(r[15:]) != 2 ||
		string(r[17:19]) != "cl" || be.Uint64(r[19:]) != 3 || be.Uint64(r[27:]) != 4 || be.Uint32(r[35:]) != 1 || r[39] != 0xAA {
		t.Fatalf("record % x", r[:40])
	}
	crc := be.Uint32(r[40:])
	if crc != crc32.Checksum(r[:40], castagnoli) {
		t.Fatal("record crc")
	}
	tr := r[44:]
	var c [4]byte
	be.PutUint32(c[:], crc)
	if len(tr) != 20 || be.Uint32(tr) != 0xFFFFFFFF || be.Uint64(tr[4:]) != 1 ||
		be.Uint32(tr[12:]) != crc32.Checksum(c[:], castagnoli) || be.Uint32(tr[16:]) != crc32.Checksum(tr[:16], castagnoli) {
		t.Fatalf("trailer % x", tr)
	}
}

func TestWriterRejects(t *testing.T) {
	for name, h := range map[string]Header{
		"last without count":  {FirstSeq: 1, LastSeq: 3},
		"count without first": {EventCount: 2, LastSeq: 1},
		"wrong last":          {FirstSeq: 1, LastSeq: 3, EventCount: 2},
		"overflow":            {FirstSeq: 1 << 63, LastSeq: 0, EventCount: 1<<63 + 1},
		"long cluster":        {ClusterID: strings.Repeat("x", 257)},
		"long source":         {Source: strings.Repeat("x", 257)},
		"created":             {Created: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := NewWriter(io.Discard, h); err == nil || !strings.HasPrefix(err.Error(), "export: ") {
			t.Errorf("%s: err %v", name, err)
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{FirstSeq: 10, LastSeq: 12, EventCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e    Event
		want string
	}{
		{Event{Seq: 11}, "export: seq gap: want 10 got 11"},
		{Event{Seq: 10, Type: strings.Repeat("t", 257)}, "type is 257 bytes"},
		{Event{Seq: 10, ClientID: strings.Repeat("c", 257)}, "client id is 257 bytes"},
		{Event{Seq: 10, Payload: make([]byte, MaxPayloadLen+1)}, "payload is"},
	} {
		if err := w.Write(c.e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("write %d: %v, want %q", c.e.Seq, err, c.want)
		}
	}
	for seq := uint64(10); seq <= 11; seq++ {
		if err := w.Write(Event{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(Event{Seq: 11}); err == nil {
		t.Error("duplicate seq accepted")
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "wrote 2 of the header's 3 events") {
		t.Fatalf("short close: %v", err)
	}
	if err := w.Close(); err == nil || w.Write(Event{Seq: 12}) == nil {
		t.Error("closed writer still usable")
	}
	// The short file has no trailer, so readers see it as truncated.
	_, evs, err := readAll(buf.Bytes())
	var de *DamageError
	if len(evs) != 2 || !errors.As(err, &de) || de.Record != 2 || de.Seq != 12 || de.Reason != "truncated: missing trailer" {
		t.Fatalf("short file: %d events, %v", len(evs), err)
	}
	if rep := Inspect(bytes.NewReader(buf.Bytes())); rep.Integrity != IntegrityDamaged || rep.Records != 2 {
		t.Fatalf("short file inspect: %s", rep)
	}
	w, _ = NewWriter(io.Discard, Header{FirstSeq: 1, LastSeq: 1, EventCount: 1})
	if err := w.Write(Event{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Seq: 2}); err == nil || !strings.Contains(err.Error(), "beyond the header's 1 events") {
		t.Fatalf("beyond count: %v", err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriterIOError(t *testing.T) {
	w, err := NewWriter(&failWriter{n: 100 << 10}, Header{FirstSeq: 1, LastSeq: 1000, EventCount: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := uint64(1); i <= 1000 && werr == nil; i++ {
		werr = w.Write(Event{Seq: i, Payload: make([]byte, 1000)})
	}
	if werr == nil || !strings.Contains(werr.Error(), "disk full") || w.Write(Event{Seq: 999}) != werr || w.Close() != werr {
		t.Fatalf("write error not sticky: %v", werr)
	}
}

// versionFile returns an intact export whose header says version v.
func versionFile(t *testing.T, v uint16) []byte {
	d := encode(t, Header{ClusterID: "c", FirstSeq: 1}, nil)
	binary.BigEndian.PutUint16(d[8:], v)
	n := 14 + int(binary.BigEndian.Uint32(d[10:]))
	binary.BigEndian.PutUint32(d[n:], crc32.Checksum(d[:n], castagnoli))
	return d
}

func TestNewerVersionRefused(t *testing.T) {
	d := versionFile(t, 2)
	_, err := NewReader(bytes.NewReader(d))
	if !errors.Is(err, ErrUnsupportedVersion) || err.Error() != "export: unsupported format version 2 (this build reads version 1)" {
		t.Fatalf("err %v", err)
	}
	var de *DamageError
	if errors.As(err, &de) {
		t.Fatal("version error reported as damage")
	}
	rep := Inspect(bytes.NewReader(d))
	if rep.Integrity != IntegrityDamaged || rep.HeaderOK || len(rep.Damaged) != 1 ||
		!strings.Contains(rep.Damaged[0].Reason, "unsupported format version 2") || rep.Damaged[0].EndOffset != int64(len(d)) {
		t.Fatalf("inspect: %s", rep)
	}
	// A version field changed without fixing the CRC is damage, not a version.
	d[9] = 3
	if _, err := NewReader(bytes.NewReader(d)); !errors.As(err, &de) || de.Reason != "header: crc mismatch" {
		t.Fatalf("damaged version: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	evs := genEvents(rng, 1, 100, 100)
	d := encode(t, headerFor(1, evs), evs)
	boom := errors.New("boom")
	r, err := NewReader(io.MultiReader(bytes.NewReader(d[:len(d)/2]), iotest.ErrReader(boom)))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = r.Next()
	}
	var de *DamageError
	if !errors.Is(err, boom) || errors.As(err, &de) || !strings.HasPrefix(err.Error(), "export: ") {
		t.Fatalf("read error: %v", err)
	}
	if _, err := NewReader(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("header read error: %v", err)
	}
	rep := Inspect(io.MultiReader(bytes.NewReader(d[:len(d)/2]), iotest.ErrReader(boom)))
	last := rep.Damaged[len(rep.Damaged)-1]
	if rep.Integrity != IntegrityDamaged || !strings.Contains(last.Reason, "read error: boom") {
		t.Fatalf("inspect: %s", rep)
	}
}
