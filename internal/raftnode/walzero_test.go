package raftnode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
)

const testSegBytes = 64 << 10

func openZeroedWAL(t *testing.T, dir string) (*raftwal.WAL, *zeroedSegments) {
	t.Helper()
	return openZeroedWALSized(t, dir, testSegBytes)
}

func openZeroedWALSized(t *testing.T, dir string, segBytes int) (*raftwal.WAL, *zeroedSegments) {
	t.Helper()
	z, err := newZeroedSegments(dir, uint64(segBytes), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := raftwal.Open(dir, raftwal.WithSegmentSize(segBytes), raftwal.WithSegmentFiler(segment.NewFiler(dir, z)))
	if err != nil {
		z.Close()
		t.Fatal(err)
	}
	return w, z
}

func spareIsZeroed(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, spareName))
	if err != nil {
		return false
	}
	return len(data) == testSegBytes && len(bytes.TrimRight(data, "\x00")) == 0
}

// waitIdle waits until no spare is being written.
func waitIdle(t *testing.T, z *zeroedSegments) {
	t.Helper()
	eventually(t, 10*time.Second, "the spare written", func() bool {
		z.mu.Lock()
		defer z.mu.Unlock()
		return !z.preparing
	})
}

func testEntry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d %s", i, bytes.Repeat([]byte{byte(i)}, 900))}
}

// TestWALPrefillSegments: the first segment of a new log is the spare
// written at open; the next spare is written once a segment is half full,
// so every segment is a renamed spare when the writes leave it time; the
// log reads back across segments and after a reopen, and goes on.
func TestWALPrefillSegments(t *testing.T) {
	dir := t.TempDir()
	w, z := openZeroedWAL(t, dir)
	if _, err := os.Stat(filepath.Join(dir, spareName)); !os.IsNotExist(err) || z.zeroed.Load() != 1 {
		t.Fatalf("after open: spare present (%v), %d zeroed segments; want the spare taken by the first segment", err, z.zeroed.Load())
	}
	var next uint64 = 1
	wroteSpare := false
	for len(segmentFiles(t, dir)) < 5 {
		batch := []*raft.Log{testEntry(next), testEntry(next + 1), testEntry(next + 2)}
		if err := w.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
		next += 3
		if !wroteSpare && len(segmentFiles(t, dir)) == 1 {
			if _, err := os.Stat(filepath.Join(dir, spareName)); err == nil {
				wroteSpare = true
			}
		}
		waitIdle(t, z)
	}
	if !wroteSpare {
		t.Fatal("no spare was written while the first segment filled")
	}
	if z.fallocated.Load() != 0 || z.zeroed.Load() != int64(len(segmentFiles(t, dir))) {
		t.Fatalf("%d segments: %d zeroed, %d fallocated; want all zeroed", len(segmentFiles(t, dir)), z.zeroed.Load(), z.fallocated.Load())
	}
	last := next - 1
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	z.Close()

	w, z = openZeroedWAL(t, dir)
	defer z.Close()
	defer w.Close()
	if li, err := w.LastIndex(); err != nil || li != last {
		t.Fatalf("reopened: last index %d (%v), want %d", li, err, last)
	}
	if err := w.StoreLogs([]*raft.Log{testEntry(last + 1)}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= last+1; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := testEntry(i); !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("entry %d reads back different", i)
		}
	}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWALPrefillLeftovers: an unfinished spare (a crash while writing it)
// and a spare of another segment size are not used; open writes a proper
// one. A spare still being written is not taken: the segment is
// fallocated instead.
func TestWALPrefillLeftovers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, spareTmpName), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, spareName), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	z, err := newZeroedSegments(dir, testSegBytes, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if _, err := os.Stat(filepath.Join(dir, spareTmpName)); !os.IsNotExist(err) {
		t.Fatalf("unfinished spare left behind: %v", err)
	}
	if !spareIsZeroed(t, dir) {
		t.Fatal("open did not write a spare of the segment size")
	}

	z.mu.Lock()
	z.preparing = true // as if the next spare were being written
	z.mu.Unlock()
	f, err := z.Create(dir, "00000000000000000001-0000000000000000.wal", testSegBytes)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if z.fallocated.Load() != 1 || z.zeroed.Load() != 0 || !spareIsZeroed(t, dir) {
		t.Fatalf("a spare being written was used (zeroed %d, fallocated %d)", z.zeroed.Load(), z.fallocated.Load())
	}
	z.mu.Lock()
	z.preparing = false
	z.mu.Unlock()

	// Another size (a test's segment size, say) never takes the spare.
	f, err = z.Create(dir, "00000000000000000002-0000000000000001.wal", testSegBytes/2)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if z.zeroed.Load() != 0 {
		t.Fatal("the spare was used for a segment of another size")
	}
	// The name exists already: an error, as from raft-wal's own Create.
	if _, err := z.Create(dir, "00000000000000000001-0000000000000000.wal", testSegBytes); err == nil {
		t.Fatal("created over an existing segment")
	}
}

// TestSpareRate: the spare is paced to be ready in half the time the
// segment's second half takes to fill at the first half's rate, within
// [minZeroRate, zeroRate].
func TestSpareRate(t *testing.T) {
	const seg = 64 << 20
	for _, c := range []struct {
		halfFill time.Duration
		want     uint64
	}{
		{0, zeroRate},
		{time.Second, zeroRate},     // would be 128 MiB/s
		{2 * time.Second, zeroRate}, // 64 MiB in 1 s
		{4 * time.Second, 32 << 20}, // 64 MiB in 2 s
		{16 * time.Second, 8 << 20}, // 64 MiB in 8 s
		{time.Hour, minZeroRate},    // an idle log
		{-time.Second, zeroRate},    // a clock step back
	} {
		if got := spareRate(seg, c.halfFill); got != c.want {
			t.Errorf("half filled in %s: %d B/s, want %d", c.halfFill, got, c.want)
		}
	}
}

// TestWALPrefillCloseStopsWriting: Close does not wait for a whole spare
// to be written.
func TestWALPrefillCloseStopsWriting(t *testing.T) {
	dir := t.TempDir()
	z, err := newZeroedSegments(dir, testSegBytes, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, spareName)); err != nil {
		t.Fatal(err)
	}
	z.size = 1 << 30 // a spare that would take seconds to write
	z.prepare(zeroRate)
	z.Close()
	if _, err := os.Stat(filepath.Join(dir, spareName)); !os.IsNotExist(err) {
		t.Fatalf("a spare was completed after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, spareTmpName)); !os.IsNotExist(err) {
		t.Fatalf("the unfinished spare was left behind: %v", err)
	}
}

// TestWALPrefillOff: a member opened without prefill deletes the spare a
// run with prefill left, and its new segments are fallocated.
func TestWALPrefillOff(t *testing.T) {
	raftDir := t.TempDir()
	dir := filepath.Join(raftDir, WALDirName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{spareName, spareTmpName} {
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, testSegBytes), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store, err := openLogStoreKind(&Config{WALSegmentBytes: testSegBytes, Logger: testLogger(t)}, raftDir, LogStoreWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, ok := store.(*walStore); ok {
		t.Fatal("prefill off, yet the zeroing file system is in use")
	}
	for _, n := range []string{spareName, spareTmpName} {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", n, err)
		}
	}
	if err := store.StoreLogs([]*raft.Log{testEntry(1)}); err != nil {
		t.Fatal(err)
	}
}
