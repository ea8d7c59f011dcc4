package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
)

// journal read pages by itself: any --max, none meaning up to the safe
// pos, over events at the 1 MiB cap as over small ones, and says where
// the range ended; tail prints the same events and says what it waits
// for; append names the event cap for any oversized payload.
func TestJournalReadPagesAndSizes(t *testing.T) {
	d, _ := startTestCluster(t)
	eps := strings.Join(d.endpoints(), ",")
	runCoord := coordRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: d.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 1500 small events (more than one page), then 10 at the cap among
	// small ones.
	for i := 0; i < 15; i++ {
		evs := make([]client.Event, 100)
		for k := range evs {
			evs[k] = client.Event{Type: "small", Payload: []byte(strconv.Itoa(i*100 + k))}
		}
		if _, err := c.Journal().Append(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	bigs := map[uint64]int{}
	for i := 0; i < 12; i++ {
		n := 1 << 20
		if i%4 == 3 {
			n = 100
		}
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "big", Payload: bytes.Repeat([]byte{'x'}, n)})
		if err != nil {
			t.Fatal(err)
		}
		bigs[seqs[0]] = n
	}
	p, err := c.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type readJSON struct {
		Events []struct {
			Seq     uint64 `json:"seq"`
			Type    string `json:"type"`
			Payload string `json:"payload"`
		} `json:"events"`
		NextSeq *uint64 `json:"next_seq"`
		End     string  `json:"end"`
	}
	read := func(args ...string) (readJSON, string) {
		t.Helper()
		out, stderr := runCoord(0, append([]string{"journal", "read", "--json", "--endpoints", eps}, args...)...)
		var r readJSON
		decodeJSON(t, out, &r)
		if r.NextSeq == nil {
			t.Fatalf("read %v: no next_seq: %.300s", args, out)
		}
		return r, stderr
	}
	all := p.SafePos - p.TrimmedPos + 1
	for _, args := range [][]string{nil, {"--max", "0"}, {"--max", "1000000"}, {"--max", "99999999999"}, {"--consistency", "stale", "--endpoints", d.endpoints()[0]}} {
		r, _ := read(args...)
		if uint64(len(r.Events)) != all || *r.NextSeq != p.SafePos+1 || r.End != "safe_pos" {
			t.Fatalf("read %v: %d events, next %d, end %q; want %d events through %d", args, len(r.Events), *r.NextSeq, r.End, all, p.SafePos)
		}
		for i, e := range r.Events {
			if e.Seq != p.TrimmedPos+uint64(i) {
				t.Fatalf("read %v: event %d has seq %d", args, i, e.Seq)
			}
			if n, ok := bigs[e.Seq]; ok && (e.Type != "big" || len(e.Payload) != n) {
				t.Fatalf("read %v: seq %d: %q with %d bytes, want %d", args, e.Seq, e.Type, len(e.Payload), n)
			}
		}
	}
	from := p.SafePos - 10
	if r, _ := read("--from", fmt.Sprint(from), "--max", "3"); len(r.Events) != 3 || r.Events[0].Seq != from || *r.NextSeq != from+3 || r.End != "max" {
		t.Fatalf("read --max 3: %+v", r)
	}
	if r, _ := read("--from", fmt.Sprint(p.SafePos+5)); len(r.Events) != 0 || *r.NextSeq != p.SafePos+5 || r.End != "safe_pos" {
		t.Fatalf("read past the end: %+v", r)
	}
	// The table form says where it ended, on stderr.
	out, stderr := runCoord(0, "journal", "read", "--from", fmt.Sprint(from), "--max", "3", "--endpoints", eps)
	if strings.Count(out, "\n") != 4 || !strings.Contains(stderr, fmt.Sprintf("read: 3 events, seq %d-%d; stopped at --max 3; more from seq %d", from, from+2, from+3)) {
		t.Fatalf("read --max 3 table: %q, stderr %q", out, stderr)
	}
	out, stderr = runCoord(0, "journal", "read", "--endpoints", eps)
	if uint64(strings.Count(out, "\n")) != all+1 || !strings.Contains(stderr, fmt.Sprintf("reached the safe pos %d", p.SafePos)) {
		t.Fatalf("read table: %d lines, stderr %q", strings.Count(out, "\n"), stderr)
	}
	if _, stderr := runCoord(2, "journal", "read", "--max", "-1", "--endpoints", eps); !strings.Contains(stderr, "--max") {
		t.Fatalf("read --max -1: %q", stderr)
	}

	// tail prints every event, the big ones included.
	out, _ = runCoord(0, "journal", "tail", "--json", "--endpoints", eps)
	if lines := strings.Count(out, "\n"); uint64(lines) != all {
		t.Fatalf("tail: %d lines, want %d", lines, all)
	}
	_, stderr = runCoord(0, "journal", "tail", "--follow", "--from", fmt.Sprint(p.SafePos+3), "--timeout", "1s", "--endpoints", eps)
	if want := fmt.Sprintf("tail: waiting for seq %d (the safe pos is %d)", p.SafePos+3, p.SafePos); !strings.Contains(stderr, want) {
		t.Fatalf("tail --follow past the end: stderr %q, want %q", stderr, want)
	}

	// Oversized payloads name the cap, whatever their size.
	dir := t.TempDir()
	for _, n := range []int64{1<<20 + 1, 10_000_000, 70 << 20} {
		f := filepath.Join(dir, fmt.Sprint(n))
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, n); err != nil {
			t.Fatal(err)
		}
		_, stderr := runCoord(1, "journal", "append", "--type", "big", "--file", f, "--endpoints", eps)
		if !strings.Contains(stderr, "exceeds the 1048576-byte cap") {
			t.Fatalf("append of %d bytes: stderr %q", n, stderr)
		}
	}
	if q, err := c.Journal().Positions(ctx); err != nil || q.SafePos != p.SafePos {
		t.Fatalf("after the oversized appends: safe pos %d, was %d: %v", q.SafePos, p.SafePos, err)
	}
}
