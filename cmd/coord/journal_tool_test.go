package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/journal/export"
)

func readAllEvents(t *testing.T, eps []string) []client.StoredEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.StoredEvent
	if p.SafePos < p.TrimmedPos {
		return nil
	}
	if err := c.Journal().ReadRange(ctx, p.TrimmedPos, p.SafePos, func(e client.StoredEvent) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJournalToolRoundTrip: export -> inspect -> import into a fresh
// cluster reproduces identical events; damaged files and wrong clusters are
// refused and change nothing.
func TestJournalToolRoundTrip(t *testing.T) {
	src, _ := startTestCluster(t)
	dst, _ := startTestCluster(t)
	srcEps := strings.Join(src.endpoints(), ",")
	dstEps := strings.Join(dst.endpoints(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: src.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 120; i++ {
		payload := []byte(fmt.Sprintf("event-%d", i))
		if i%7 == 0 {
			payload = []byte{0xff, 0x00, byte(i)} // binary
		}
		if _, err := c.Journal().Append(ctx, client.Event{Type: fmt.Sprintf("type-%d", i%3), Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "journal.lbx")
	if code, out, stderr := run(t, nil, "journal", "export", "--out", file, "--endpoints", srcEps); code != 0 {
		t.Fatalf("export: exit %d %s %s", code, out, stderr)
	}
	// Ranges with nothing in them are refused, and write no file.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from", "5", "--to", "2"}, 2, "--from 5 is after --to 2"},
		{[]string{"--from", "121"}, 1, "--from 121 is past the safe pos 120: nothing to export"},
	} {
		none := filepath.Join(dir, "none.lbx")
		args := append([]string{"journal", "export", "--out", none, "--endpoints", srcEps}, c.args...)
		if code, _, stderr := run(t, nil, args...); code != c.code || !strings.Contains(stderr, c.want) {
			t.Fatalf("export %v: exit %d %s, want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
		if _, err := os.Stat(none); !os.IsNotExist(err) {
			t.Fatalf("export %v left a file: %v", c.args, err)
		}
	}
	if code, out, _ := run(t, nil, "journal", "inspect", file); code != 0 || !strings.Contains(out, "integrity OK") {
		t.Fatalf("inspect: exit %d %s", code, out)
	}
	if code, out, stderr := run(t, nil, "journal", "import", file, "--endpoints", dstEps); code != 0 {
		t.Fatalf("import: exit %d %s %s", code, out, stderr)
	}
	want, got := readAllEvents(t, src.endpoints()), readAllEvents(t, dst.endpoints())
	if len(want) != 120 || len(got) != len(want) {
		t.Fatalf("imported %d events, exported %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Seq != g.Seq || w.Type != g.Type || !bytes.Equal(w.Payload, g.Payload) || w.ClientID != g.ClientID || w.RequestSeq != g.RequestSeq {
			t.Fatalf("event %d differs: %+v vs %+v", i, w, g)
		}
	}
	// The journal is no longer empty: a second import is refused.
	if code, _, stderr := run(t, nil, "journal", "import", file, "--endpoints", dstEps); code != 1 || !strings.Contains(stderr, "non-empty") {
		t.Fatalf("second import: exit %d %s", code, stderr)
	}
	// A flipped byte is reported at a record and import refuses the file.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	bad := filepath.Join(dir, "damaged.lbx")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, nil, "journal", "inspect", bad); code != 1 || !strings.Contains(out, "integrity DAMAGED") {
		t.Fatalf("inspect damaged: exit %d %s", code, out)
	}
	if code, _, stderr := run(t, nil, "journal", "import", bad, "--force", "--endpoints", dstEps); code != 1 || !strings.Contains(stderr, "refusing damaged export") || !strings.Contains(stderr, "crc mismatch") || !strings.Contains(stderr, "integrity DAMAGED") || strings.Contains(stderr, ":;") {
		t.Fatalf("import damaged: exit %d %s", code, stderr)
	}
	// A truncated file is damaged too.
	trunc := filepath.Join(dir, "truncated.lbx")
	if err := os.WriteFile(trunc, data[:len(data)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := run(t, nil, "journal", "inspect", trunc); code != 1 {
		t.Fatalf("inspect truncated: exit %d", code)
	}
	// An export of another cluster is refused without --force.
	other := filepath.Join(dir, "other.lbx")
	f, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	w, err := export.NewWriter(f, export.Header{ClusterID: "someone-else", FirstSeq: 1, LastSeq: 1, EventCount: 1, Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(export.Event{Seq: 1, Type: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if code, _, stderr := run(t, nil, "journal", "import", other, "--endpoints", dstEps); code != 1 || !strings.Contains(stderr, "someone-else") {
		t.Fatalf("import of another cluster: exit %d %s", code, stderr)
	}
	after := readAllEvents(t, dst.endpoints())
	if len(after) != len(got) {
		t.Fatalf("refused imports changed the journal: %d events, was %d", len(after), len(got))
	}
	// events: filtered by type and range.
	code, out, _ := run(t, nil, "journal", "events", "--type", "type-1", "--range", "1..30", "--json", "--endpoints", srcEps)
	if code != 0 || strings.Count(out, "\n") != 10 {
		t.Fatalf("events: exit %d, %d lines", code, strings.Count(out, "\n"))
	}
}
