package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"strconv"
	"testing"
	"time"
)

const testBlockSize = 256 << 10

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func readAll(t *testing.T, ctx context.Context, fs *FS, path string) []byte {
	t.Helper()
	r, err := fs.Open(ctx, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// waitComplete polls Stat until every block of path is COMPLETE with want
// reported locations.
func waitComplete(t *testing.T, ctx context.Context, fs *FS, path string, blocks, want int) FileInfo {
	t.Helper()
	var info FileInfo
	for {
		var err error
		info, err = fs.Stat(ctx, path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		ok := len(info.Blocks) == blocks && !info.UnderConstruction
		for _, b := range info.Blocks {
			ok = ok && b.State == BlockComplete && len(b.Reported) == want
		}
		if ok {
			return info
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stat %s: %+v, want %d COMPLETE blocks with %d locations", path, info, blocks, want)
		case <-time.After(100 * time.Millisecond): // poll interval
		}
	}
}

func TestFSWriteSyncReadBack(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	fs := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	data := randomBytes(3*testBlockSize-1000, 1)
	w, err := fs.Create(ctx, "/d/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	half := testBlockSize + 12345 // mid block 2, mid chunk
	if _, err := w.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Another client sees the synced length while the file is open.
	other := fc.client(t).FS()
	if got := readAll(t, ctx, other, "/d/f"); !bytes.Equal(got, data[:half]) {
		t.Fatalf("after sync a reader sees %d bytes, want %d (equal: %v)", len(got), half, bytes.Equal(got, data[:len(got)]))
	}
	if _, err := w.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, other, "/d/f"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), len(data))
	}

	info := waitComplete(t, ctx, fs, "/d/f", 3, 3)
	if info.Length != uint64(len(data)) || info.Replication != 3 {
		t.Fatalf("stat: %+v", info)
	}

	r, err := other.Open(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5000)
	at := int64(testBlockSize - 2000) // across a block boundary
	if n, err := r.ReadAt(buf, at); err != nil || n != len(buf) || !bytes.Equal(buf, data[at:at+int64(len(buf))]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	if _, err := r.Seek(-10, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if tail, err := io.ReadAll(r); err != nil || !bytes.Equal(tail, data[len(data)-10:]) {
		t.Fatalf("tail after Seek: %q, %v", tail, err)
	}

	entries, err := fs.List(ctx, "/d")
	if err != nil || len(entries) != 1 || entries[0].Path != "/d/f" || entries[0].Length != uint64(len(data)) {
		t.Fatalf("list: %+v, %v", entries, err)
	}
	if n, err := fs.Delete(ctx, "/d/f", false); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if _, err := fs.Stat(ctx, "/d/f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stat after delete: %v", err)
	}
}

// TestFSPipelineRecoveryAfterNodeDeath kills one pipeline node mid-block
// (the first, the middle or the last): the writer recovers onto the
// survivors with a new GS, Close succeeds and the bytes read back intact.
func TestFSPipelineRecoveryAfterNodeDeath(t *testing.T) {
	t.Parallel()
	for _, victim := range []int{1, 0, 2} {
		t.Run("node"+strconv.Itoa(victim), func(t *testing.T) { testPipelineRecovery(t, victim) })
	}
}

func testPipelineRecovery(t *testing.T, victim int) {
	fc := startFSCluster(t)
	fs := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	data := randomBytes(2*testBlockSize+7777, int64(victim))
	w, err := fs.Create(ctx, "/r/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	first := testBlockSize + 100<<10 + 77 // well into block 2, mid chunk
	if _, err := w.Write(data[:first]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(w.blk.nodes) != 3 {
		t.Fatalf("pipeline of %d nodes", len(w.blk.nodes))
	}
	dead := w.blk.nodes[victim].GetNodeId()
	gs := w.blk.gs
	if err := fc.byID[dead].Close(); err != nil {
		t.Logf("close %s: %v", dead, err)
	}
	if _, err := w.Write(data[first:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fs.Stat(ctx, "/r/f")
	if err != nil {
		t.Fatal(err)
	}
	if info.UnderConstruction || len(info.Blocks) != 3 || info.Length != uint64(len(data)) {
		t.Fatalf("stat: %+v", info)
	}
	b := info.Blocks[1]
	if b.GS <= gs || len(b.Expected) != 2 || contains(b.Expected, dead) {
		t.Fatalf("block 2 after recovery: gs %d (was %d), expected %v (dead %s)", b.GS, gs, b.Expected, dead)
	}
	if contains(info.Blocks[2].Expected, dead) {
		t.Fatalf("block 3 was placed on the dead node %s: %v", dead, info.Blocks[2].Expected)
	}
	if got := readAll(t, ctx, fc.client(t).FS(), "/r/f"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), len(data))
	}
}

// TestFSSetupFailureExcludesNode: a node dies while the coordinator still
// counts it live; the setup of a block on it fails, the writer abandons
// the block and gets another without that node (design §R5.2).
func TestFSSetupFailureExcludesNode(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	fs := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	dead := "node2"
	if err := fc.byID[dead].Close(); err != nil {
		t.Logf("close %s: %v", dead, err)
	}
	data := randomBytes(2*testBlockSize, 9) // exactly two blocks
	w, err := fs.Create(ctx, "/s/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fs.Stat(ctx, "/s/f")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Blocks) != 2 || info.Length != uint64(len(data)) {
		t.Fatalf("stat: %+v", info)
	}
	for _, b := range info.Blocks {
		if len(b.Expected) != 2 || contains(b.Expected, dead) {
			t.Fatalf("block %d on %v (dead %s)", b.ID, b.Expected, dead)
		}
	}
	if got := readAll(t, ctx, fs, "/s/f"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), len(data))
	}
	if n := countEvents(t, ctx, fc.client(t), "logbook.fs.abandon_block"); n == 0 {
		t.Fatal("no block was abandoned: the dead node was never chosen")
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestFSAppendAndRecoverLease(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	fs := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	data := randomBytes(testBlockSize/2+333, 3)
	w, err := fs.Create(ctx, "/a/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:1000]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitComplete(t, ctx, fs, "/a/f", 1, 3)
	aw, err := fs.Append(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aw.Write(data[1000:]); err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, fs, "/a/f"); !bytes.Equal(got, data) {
		t.Fatalf("after append read %d bytes, want %d identical", len(got), len(data))
	}
	closed, err := fs.RecoverLease(ctx, "/a/f")
	if err != nil || !closed {
		t.Fatalf("recover lease of a closed file: %v, %v", closed, err)
	}
	if _, err := fs.Create(ctx, "relative", CreateOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("create of a relative path: %v", err)
	}
}

// countEvents counts the journal's audit events of type typ.
func countEvents(t *testing.T, ctx context.Context, c *Client, typ string) int {
	t.Helper()
	n := 0
	if err := c.Journal().ReadRange(ctx, 1, 0, func(e StoredEvent) error {
		if e.Type == typ {
			n++
		}
		return nil
	}); err != nil {
		t.Fatalf("journal read: %v", err)
	}
	return n
}

// TestFSWriteThroughLeaderChange moves leadership mid-file: the writer's
// namespace calls follow the new leader and apply once.
func TestFSWriteThroughLeaderChange(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	c := fc.client(t)
	fs := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	before := countEvents(t, ctx, c, "logbook.fs.add_block")
	data := randomBytes(3*testBlockSize-5, 11)
	w, err := fs.Create(ctx, "/l/f", CreateOptions{Replication: 3, BlockSize: testBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:testBlockSize/2]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cluster().TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[testBlockSize/2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, fs, "/l/f"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), len(data))
	}
	if n := countEvents(t, ctx, c, "logbook.fs.add_block") - before; n != 3 {
		t.Fatalf("%d add_block events, want 3", n)
	}
}
