package client

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/coordserver"
)

// pollUntil polls cond every 50 ms until it holds or d passes.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, state)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// checkReplicas reads block b of path from every node named in want,
// directly, and compares the bytes with data.
func checkReplicas(ctx context.Context, t *testing.T, fsys *FS, b BlockInfo, want []string, data []byte) {
	t.Helper()
	for _, id := range want {
		addr, err := fsys.nodeAddr(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsys.readAt(ctx, addr, b.ID, b.GS, b.Token, 0, int64(b.Length))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("replica on %s: %d bytes, equal %v, err %v", id, len(got), bytes.Equal(got, data), err)
		}
	}
}

// syncedWriter creates path (replication 3), writes data and Syncs: a
// writer with every byte acked by its whole pipeline.
func syncedWriter(ctx context.Context, t *testing.T, fsys *FS, path string, data []byte) *FileWriter {
	t.Helper()
	w, err := fsys.Create(ctx, path, CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// finalizedOn lists the nodes reporting b FINALIZED at its GS and length.
func finalizedOn(b BlockInfo) []string {
	var out []string
	for _, r := range b.Reported {
		if r.State == ReplicaFinalized && r.GS == b.GS && r.Length == int64(b.Length) && !r.Corrupt {
			out = append(out, r.Node)
		}
	}
	slices.Sort(out)
	return out
}

func randomData(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestWriterReplacesFailedNode (design §R5.3 step 5, policy DEFAULT): a node
// of a synced pipeline dies mid-block; the writer asks the leader for an
// additional node, has a survivor copy the replica there (TRANSFER_RBW),
// recovers the pipeline onto three nodes and finishes. The file ends with
// 3 finalized replicas, one on the new node, all holding the bytes written.
func TestWriterReplacesFailedNode(t *testing.T) {
	t.Parallel()
	fc := startFSClusterN(t, 4)
	fsys := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := randomData(21, 700_000)
	w := syncedWriter(ctx, t, fsys, "/rp/f", data[:300_000])
	pipeline := append([]string(nil), idsOf(w.blk.nodes)...)
	victim := pipeline[1]
	fc.byID[victim].Close()
	if _, err := w.Write(data[300_000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Stat(ctx, "/rp/f")
	if err != nil || info.Length != uint64(len(data)) || len(info.Blocks) != 1 {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if len(b.Expected) != 3 || slices.Contains(b.Expected, victim) {
		t.Fatalf("expected locations %v: want 3 without the dead %s (pipeline was %v)", b.Expected, victim, pipeline)
	}
	var added string
	for _, id := range b.Expected {
		if !slices.Contains(pipeline, id) {
			added = id
		}
	}
	if added == "" {
		t.Fatalf("no replacement node in %v (pipeline was %v)", b.Expected, pipeline)
	}
	checkReplicas(ctx, t, fsys, b, b.Expected, data)
}

// TestWriterCloseRecovery (design §R5.3, PIPELINE_CLOSE_RECOVERY): a node dies
// after every byte of the block was acked, before the packet that ends it.
// The writer recovers with the close stage (no node added there), so the
// survivors finalize at a new GS and the file closes with 2 replicas; the
// leader then re-replicates the block back to 3.
func TestWriterCloseRecovery(t *testing.T) {
	t.Parallel()
	fc := startFSClusterN(t, 4)
	fsys := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := randomData(22, 250_000+77)
	w, err := fsys.Create(ctx, "/cr/f", CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	var victim string
	var gs0 uint64
	w.beforeEndOfBlock = func(w *FileWriter) {
		victim, gs0 = w.blk.nodes[2].GetNodeId(), w.blk.gs
		fc.byID[victim].Close()
		w.beforeEndOfBlock = nil
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Stat(ctx, "/cr/f")
	if err != nil || info.UnderConstruction || info.Length != uint64(len(data)) {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if b.GS <= gs0 || len(b.Expected) != 2 || slices.Contains(b.Expected, victim) {
		t.Fatalf("after close recovery: GS %d (was %d), expected %v (dead %s)", b.GS, gs0, b.Expected, victim)
	}
	checkReplicas(ctx, t, fsys, b, b.Expected, data)
	pollUntil(t, 30*time.Second, "re-replication to 3", func() (bool, string) {
		info, err = fsys.Stat(ctx, "/cr/f")
		if err != nil {
			return false, err.Error()
		}
		on := finalizedOn(info.Blocks[0])
		return len(on) == 3 && !slices.Contains(on, victim), ""
	})
	checkReplicas(ctx, t, fsys, info.Blocks[0], finalizedOn(info.Blocks[0]), data)
}

// TestAppendRecovery (design §R5.3, PIPELINE_SETUP_APPEND_RECOVERY): the first
// node of a closed file's last block is dead when the file is reopened for
// append; the append's pipeline setup fails, the writer recovers it on the
// survivors with the append recovery stage (adding a node: the stream is an
// append), and the appended file reads back whole.
func TestAppendRecovery(t *testing.T) {
	t.Parallel()
	fc := startFSClusterN(t, 4)
	fsys := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first, more := randomData(23, 100_000+5), randomData(24, 60_000)
	w, err := fsys.Create(ctx, "/ap/f", CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var info FileInfo
	pollUntil(t, 20*time.Second, "3 finalized replicas", func() (bool, string) {
		info, err = fsys.Stat(ctx, "/ap/f")
		return err == nil && len(finalizedOn(info.Blocks[0])) == 3, ""
	})
	victim := readOrder(info.Blocks[0])[0] // the append pipeline's first node
	fc.byID[victim].Close()
	a, err := fsys.Append(ctx, "/ap/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(more); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = fsys.Stat(ctx, "/ap/f")
	want := append(append([]byte(nil), first...), more...)
	if err != nil || info.Length != uint64(len(want)) || len(info.Blocks) != 1 {
		t.Fatalf("stat after append: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if slices.Contains(b.Expected, victim) || len(b.Expected) != 3 {
		t.Fatalf("expected locations %v: want 3 without the dead %s", b.Expected, victim)
	}
	checkReplicas(ctx, t, fsys, b, b.Expected, want)
	r, err := fsys.Open(ctx, "/ap/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %d bytes, equal %v, err %v", len(got), bytes.Equal(got, want), err)
	}
}

func idsOf(locs []*pb.NodeLocation) []string {
	out := make([]string, len(locs))
	for i, l := range locs {
		out[i] = l.GetNodeId()
	}
	return out
}

// TestIdleWriterKeepsLease: the writer learns the leader's lease limits
// from its first renewal and renews within them, so a writer that is alive
// but idle for several hard limits keeps its file (no lease recovery), and
// finishes it.
func TestIdleWriterKeepsLease(t *testing.T) {
	t.Parallel()
	fc := startFSClusterN(t, 3, func(c *coordserver.Config) {
		c.FS.LeaseSoftLimit = 500 * time.Millisecond
		c.FS.LeaseHardLimit = time.Second
		c.FS.LeaseCheckInterval = 100 * time.Millisecond
	})
	fsys := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := randomData(25, 100_000)
	w := syncedWriter(ctx, t, fsys, "/idle/f", data[:50_000])
	// Idle for 4 hard limits, watching that the file stays ours.
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		info, err := fsys.Stat(ctx, "/idle/f")
		if err != nil || !info.UnderConstruction || info.LeaseHolder != fsys.clientName() {
			t.Fatalf("an idle but live writer lost its lease: %+v, %v", info, err)
		}
		time.Sleep(100 * time.Millisecond) // observation interval
	}
	if _, err := w.Write(data[50_000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p := time.Duration(fsys.renewPeriod.Load()); p <= 0 || p > 250*time.Millisecond {
		t.Fatalf("renewal period %v: want a quarter of the 1s hard limit", p)
	}
}

// TestHSync: HSync acks only once every pipeline node fsynced the bytes
// (each node counts its hsync packets), and a reader then sees them.
func TestHSync(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	fsys := fc.client(t).FS()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := randomData(26, 70_000+3)
	w, err := fsys.Create(ctx, "/hs/f", CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.HSync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range idsOf(w.blk.nodes) {
		resp, err := http.Get("http://" + fc.byID[id].HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !regexp.MustCompile(`(?m)^logbook_node_hsyncs_total [1-9]`).Match(body) {
			t.Fatalf("%s counted no hsync after HSync", id)
		}
	}
	r, err := fsys.Open(ctx, "/hs/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after HSync: %d bytes, equal %v, err %v", len(got), bytes.Equal(got, data), err)
	}
}
