package export

import (
	"bytes"
	"io"
	"testing"
)

const benchEvents = 100_000

func benchData(b *testing.B) ([]Event, Header, []byte) {
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	evs := make([]Event, benchEvents)
	for i := range evs {
		evs[i] = Event{Seq: uint64(i + 1), Type: "setattr", ClientID: "client-7", RequestSeq: uint64(i), Index: uint64(i + 10), Payload: payload}
	}
	h := headerFor(1, evs)
	return evs, h, encode(b, h, evs)
}

// BenchmarkWrite writes 100k 256-byte events per op; MB/s is of file bytes.
func BenchmarkWrite(b *testing.B) {
	evs, h, data := benchData(b)
	b.SetBytes(int64(len(data)))
	var buf bytes.Buffer
	buf.Grow(len(data))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		w, err := NewWriter(&buf, h)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			if err := w.Write(e); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads and verifies 100k 256-byte events per op.
func BenchmarkRead(b *testing.B) {
	_, _, data := benchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchEvents {
			b.Fatalf("read %d events", n)
		}
	}
}

// BenchmarkInspect scans the same file with Inspect.
func BenchmarkInspect(b *testing.B) {
	_, _, data := benchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if rep := Inspect(bytes.NewReader(data)); rep.Integrity != IntegrityOK {
			b.Fatal(rep)
		}
	}
}
