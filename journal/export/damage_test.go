package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// smallExport is a file with a handful of short events, small enough to
// damage at every bit.
func smallExport(t *testing.T) (Header, []Event, []byte) {
	rng := rand.New(rand.NewPCG(5, 6))
	evs := genEvents(rng, 1000, 24, 40)
	for i := range evs {
		evs[i].Type, evs[i].ClientID = "ev", "cli" // keep the file short
	}
	h := headerFor(1000, evs)
	return h, evs, encode(t, h, evs)
}

func covers(rep Report, off int64) bool {
	for _, d := range rep.Damaged {
		if d.StartOffset <= off && off < d.EndOffset {
			return true
		}
	}
	return false
}

// TestBitFlips flips every bit of a small export, one at a time: header,
// record lengths, bodies, CRCs and trailer.
func TestBitFlips(t *testing.T) {
	h, evs, data := smallExport(t)
	hdrEnd, starts, trailer := layout(h, evs)
	n := uint64(len(evs))
	flips := 0
	for off := range int64(len(data)) {
		// Which element holds off: -1 header, len(evs) trailer, else a record.
		k := -1
		if off >= hdrEnd {
			k, _ = slices.BinarySearch(starts, off+1)
			k--
			if off >= trailer {
				k = len(evs)
			}
		}
		for bit := range 8 {
			d := bytes.Clone(data)
			d[off] ^= 1 << bit
			flips++
			_, got, err := readAll(d)
			var de *DamageError
			if !errors.As(err, &de) {
				t.Fatalf("flip %d.%d (element %d): err %v, want *DamageError", off, bit, k, err)
			}
			switch {
			case k < 0:
				if de.Offset != 0 || !strings.HasPrefix(de.Reason, "header: ") {
					t.Fatalf("flip %d.%d in header: %v", off, bit, de)
				}
			case k == len(evs):
				if de.Record != n || de.Seq != 0 || de.Offset != trailer || len(got) != len(evs) {
					t.Fatalf("flip %d.%d in trailer: %v after %d events", off, bit, de, len(got))
				}
			default:
				if de.Record != uint64(k) || de.Seq != evs[k].Seq || de.Offset != starts[k] || len(got) != k {
					t.Fatalf("flip %d.%d in record %d: %v after %d events", off, bit, k, de, len(got))
				}
				sameEvents(t, got, evs[:k])
			}
			rep := Inspect(bytes.NewReader(d))
			if rep.Integrity != IntegrityDamaged || !covers(rep, off) || !strings.HasSuffix(rep.String(), "integrity DAMAGED") {
				t.Fatalf("flip %d.%d (element %d): inspect:\n%s", off, bit, k, rep)
			}
			// Resync recovers every record but the damaged one.
			want := n
			if k >= 0 && k < len(evs) {
				want--
			}
			if rep.Records != want || len(rep.Damaged) != 1 {
				t.Fatalf("flip %d.%d (element %d): inspect recovered %d records, want %d:\n%s", off, bit, k, rep.Records, want, rep)
			}
		}
	}
	t.Logf("%d single-bit flips over %d bytes all detected", flips, len(data))
}

// TestTruncation cuts the file at every length, which includes every record
// boundary and every point inside each record, header and trailer.
func TestTruncation(t *testing.T) {
	h, evs, data := smallExport(t)
	hdrEnd, starts, trailer := layout(h, evs)
	boundary := map[int64]int{}
	for i, s := range starts {
		boundary[s] = i
	}
	boundary[trailer] = len(evs)
	for cut := range int64(len(data)) {
		d := data[:cut]
		_, got, err := readAll(d)
		var de *DamageError
		if !errors.As(err, &de) {
			t.Fatalf("cut at %d: err %v, want *DamageError", cut, err)
		}
		if k, ok := boundary[cut]; ok {
			seq := uint64(0)
			if k < len(evs) {
				seq = evs[k].Seq
			}
			if de.Reason != "truncated: missing trailer" || de.Record != uint64(k) || de.Seq != seq || de.Offset != cut || len(got) != k {
				t.Fatalf("cut at boundary %d (record %d): %v", cut, k, de)
			}
		} else if cut >= hdrEnd && !strings.Contains(de.Reason, "truncated") {
			t.Fatalf("cut at %d: %v", cut, de)
		}
		rep := Inspect(bytes.NewReader(d))
		if rep.Integrity != IntegrityDamaged || rep.TrailerOK || len(rep.Damaged) == 0 {
			t.Fatalf("cut at %d: inspect:\n%s", cut, rep)
		}
		if last := rep.Damaged[len(rep.Damaged)-1]; last.EndOffset != cut {
			t.Fatalf("cut at %d: last damaged range %+v does not reach the end", cut, last)
		}
	}
}

// cutRecord returns data without record k, or with record k duplicated.
func spliceRecord(data []byte, starts []int64, trailer int64, k int, dup bool) []byte {
	end := trailer
	if k+1 < len(starts) {
		end = starts[k+1]
	}
	rec := data[starts[k]:end]
	out := slices.Clone(data[:end])
	if !dup {
		out = slices.Clone(data[:starts[k]])
	} else {
		out = append(out, rec...)
	}
	return append(out, data[end:]...)
}

func TestSeqGapAndOrder(t *testing.T) {
	h, evs, data := smallExport(t)
	_, starts, trailer := layout(h, evs)
	for _, c := range []struct {
		name   string
		d      []byte
		k      int
		reason string
	}{
		{"gap", spliceRecord(data, starts, trailer, 7, false), 7, "seq gap: want 1007 got 1008"},
		{"first missing", spliceRecord(data, starts, trailer, 0, false), 0, "seq gap: want 1000 got 1001"},
		{"duplicate", spliceRecord(data, starts, trailer, 7, true), 8, "seq out of order: want 1008 got 1007"},
	} {
		_, got, err := readAll(c.d)
		var de *DamageError
		if !errors.As(err, &de) || de.Reason != c.reason || de.Record != uint64(c.k) || de.Seq != evs[c.k].Seq ||
			de.Offset != starts[c.k] || len(got) != c.k {
			t.Fatalf("%s: %v after %d events", c.name, err, len(got))
		}
		rep := Inspect(bytes.NewReader(c.d))
		if rep.Integrity != IntegrityDamaged || len(rep.Damaged) == 0 || rep.Damaged[0].Reason != c.reason ||
			rep.Damaged[0].StartOffset != starts[c.k] {
			t.Fatalf("%s: inspect:\n%s", c.name, rep)
		}
	}
	// Missing last record with an otherwise intact trailer.
	d := spliceRecord(data, starts, trailer, len(evs)-1, false)
	if _, _, err := readAll(d); err == nil || !strings.Contains(err.Error(), "trailer: after 23 records, header declares 24") {
		t.Fatalf("missing last: %v", err)
	}
	if rep := Inspect(bytes.NewReader(d)); rep.Integrity != IntegrityDamaged || rep.TrailerOK || rep.Records != 23 {
		t.Fatalf("missing last: inspect:\n%s", rep)
	}
	// A record replaced by another intact record with the same seq: only the
	// trailer digest can tell.
	other := slices.Clone(evs)
	other[5].Payload = []byte("forged")
	od := encode(t, h, other)
	_, ostarts, _ := layout(h, other)
	d = slices.Concat(data[:starts[5]], od[ostarts[5]:ostarts[6]], data[starts[6]:])
	var de *DamageError
	if _, got, err := readAll(d); !errors.As(err, &de) || !strings.HasPrefix(de.Reason, "trailer: record crc digest") ||
		de.Offset != trailer+int64(len(d)-len(data)) || de.Record != 24 || len(got) != 24 {
		t.Fatalf("forged record: %v", err)
	}
	if rep := Inspect(bytes.NewReader(d)); rep.Integrity != IntegrityDamaged || rep.TrailerOK || rep.Records != 24 ||
		len(rep.Damaged) != 1 || !strings.HasPrefix(rep.Damaged[0].Reason, "trailer: record crc digest") {
		t.Fatalf("forged record: inspect:\n%s", rep)
	}
	// Trailing data after the trailer.
	d = append(slices.Clone(data), 0)
	if _, _, err := readAll(d); !errors.As(err, &de) || de.Reason != "trailing data after trailer" || de.Offset != int64(len(data)) {
		t.Fatalf("trailing data: %v", err)
	}
	if rep := Inspect(bytes.NewReader(d)); rep.Integrity != IntegrityDamaged || !covers(rep, int64(len(data))) || !rep.TrailerOK {
		t.Fatalf("trailing data: inspect:\n%s", rep)
	}
}

// TestHugeLengths: lengths that are out of bounds are damage, and lengths
// within bounds but beyond the data never allocate the claimed size.
func TestHugeLengths(t *testing.T) {
	hdr := encode(t, Header{FirstSeq: 1, LastSeq: 1, EventCount: 1}, []Event{{Seq: 1}})
	hdr = hdr[:len(hdr)-trailerLen-4-minBody-4]
	be := binary.BigEndian
	for _, l := range []uint32{0, 31, maxBody + 1, 0xFFFFFFFE} {
		d := be.AppendUint32(slices.Clone(hdr), l)
		d = append(d, make([]byte, 64)...)
		var de *DamageError
		if _, _, err := readAll(d); !errors.As(err, &de) || !strings.HasPrefix(de.Reason, "bad length") {
			t.Fatalf("length %d: %v", l, err)
		}
	}
	// A consistent record header claiming a 64 MiB payload, then 1 KiB.
	d := be.AppendUint32(slices.Clone(hdr), maxBody-MaxTypeLen-MaxClientIDLen)
	d = be.AppendUint64(d, 1)
	d = append(d, 0, 0, 0, 0)
	d = append(d, make([]byte, 16)...)
	d = be.AppendUint32(d, MaxPayloadLen)
	d = append(d, make([]byte, 1024)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := readAll(d)
	rep := Inspect(bytes.NewReader(d))
	runtime.ReadMemStats(&after)
	var de *DamageError
	if !errors.As(err, &de) || de.Reason != "truncated" || rep.Integrity != IntegrityDamaged {
		t.Fatalf("claimed 64 MiB: %v\n%s", err, rep)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("claimed 64 MiB payload allocated %d bytes", alloc)
	}
}
