// Package replicatest is the conformance suite of replica.Store: one body of
// tests run against every implementation (the disk Dataset, the MemFS fake,
// and any fake a caller builds). It also holds the transition table of
// docs/design.md §R2.16 ("design §…" in this package cites that file).
package replicatest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/logbookhq/logbook/replica"
)

// Pool is the block pool every Factory store must have loaded.
const Pool = "BP-1-127.0.0.1-1"

// Factory builds stores for the suite.
type Factory struct {
	// Open returns a new, empty store with Pool added, and
	// BytesPerChecksum 512. It is closed by the test.
	Open func(t *testing.T) replica.Store
	// Restart stops s as a crash or shutdown would and opens the same
	// storage again.
	Restart func(t *testing.T, s replica.Store) replica.Store
}

// Data returns n deterministic bytes derived from seed.
func Data(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// Write writes data at off in 64 KiB packets (chunk aligned at off).
func Write(t testing.TB, w replica.Writer, off int64, data []byte) {
	t.Helper()
	if err := WritePackets(w, off, data, 64<<10); err != nil {
		t.Fatalf("write at %d: %v", off, err)
	}
}

// WritePackets writes data at off in packets of size bytes.
func WritePackets(w replica.Writer, off int64, data []byte, size int) error {
	for i := 0; i < len(data); i += size {
		p := data[i:min(i+size, len(data))]
		if err := w.WritePacket(context.Background(), off+int64(i), p, replica.ChecksumsPerChunk(p, 512)); err != nil {
			return err
		}
	}
	return nil
}

// ReadAll reads replica b through ReadChunks (verifying every chunk).
func ReadAll(t testing.TB, s replica.Store, b replica.Block) []byte {
	t.Helper()
	br, err := s.OpenBlock(Pool, b)
	if err != nil {
		t.Fatalf("open %v: %v", b, err)
	}
	defer br.Close()
	var out []byte
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, sums, err := br.ReadChunks(off, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read chunks at %d: %v", off, err)
		}
		if len(sums) != (n+511)/512 {
			t.Fatalf("read chunks: %d sums for %d bytes", len(sums), n)
		}
		out = append(out, buf[:n]...)
		off += int64(n)
	}
	return out
}

// WantKind fails unless err has kind k.
func WantKind(t testing.TB, err error, k replica.ErrorKind) {
	t.Helper()
	if got := replica.KindOf(err); got != k {
		t.Fatalf("error kind = %v (%v), want %v", got, err, k)
	}
	if !errors.Is(err, k) {
		t.Fatalf("errors.Is(%v, %v) = false", err, k)
	}
}

// WantState fails unless replica id is in state st with GS gs.
func WantState(t testing.TB, s replica.Store, id uint64, st replica.State, gs uint64) replica.ReplicaInfo {
	t.Helper()
	ri, err := s.GetReplica(Pool, id)
	if err != nil {
		t.Fatalf("get replica %d: %v", id, err)
	}
	if ri.State != st || ri.GS != gs {
		t.Fatalf("replica %d is %v GS %d, want %v GS %d", id, ri.State, ri.GS, st, gs)
	}
	return ri
}

// ChangeLog records every change of a subscription, so tests can wait for
// changes in any order.
type ChangeLog struct {
	Sub  *replica.Subscription
	Seen []replica.Change
}

// NewChangeLog subscribes to s.
func NewChangeLog(s replica.Store) *ChangeLog { return &ChangeLog{Sub: s.Subscribe()} }

// WaitFor returns the first change (seen or arriving within 10 s) matching want.
func (l *ChangeLog) WaitFor(t testing.TB, want func(replica.Change) bool) replica.Change {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changes, _ := l.Sub.Drain()
		l.Seen = append(l.Seen, changes...)
		for _, c := range l.Seen {
			if want(c) {
				return c
			}
		}
		select {
		case <-l.Sub.Ready():
		case <-deadline.C:
			t.Fatalf("no matching change within 10s (seen %+v)", l.Seen)
		}
	}
}

// Run runs the whole suite against f.
func Run(t *testing.T, f Factory) {
	t.Run("TransitionTable", func(t *testing.T) { RunTransitionTable(t, f) })
	t.Run("WriteRead", func(t *testing.T) { testWriteRead(t, f) })
	t.Run("BadPackets", func(t *testing.T) { testBadPackets(t, f) })
	t.Run("ResentPacket", func(t *testing.T) { testResentPacket(t, f) })
	t.Run("StopWriter", func(t *testing.T) { testStopWriter(t, f) })
	t.Run("WrongGS", func(t *testing.T) { testWrongGS(t, f) })
	t.Run("BadPool", func(t *testing.T) { testBadPool(t, f) })
	t.Run("Invalidate", func(t *testing.T) { testInvalidate(t, f) })
	t.Run("RecoverRbwTruncates", func(t *testing.T) { testRecoverRbwTruncates(t, f) })
	t.Run("UpdateReplicaUnderRecovery", func(t *testing.T) { testUpdateRecovery(t, f) })
	t.Run("RecoveryThreeRBW", func(t *testing.T) { testRecoveryThreeRBW(t, f) })
	t.Run("TransferPartialChunk", func(t *testing.T) { testTransferPartialChunk(t, f) })
	t.Run("Reports", func(t *testing.T) { testReports(t, f) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, f) })
	t.Run("AppendAndRecoverClose", func(t *testing.T) { testAppend(t, f) })
}

func open(t *testing.T, f Factory) replica.Store {
	t.Helper()
	s := f.Open(t)
	t.Cleanup(func() { s.Close() })
	return s
}

func restart(t *testing.T, f Factory, s replica.Store) replica.Store {
	t.Helper()
	s2 := f.Restart(t, s)
	t.Cleanup(func() { s2.Close() })
	return s2
}

var ctx = context.Background()

// finalized creates a FINALIZED replica {id, gs} holding data.
func finalized(t *testing.T, s replica.Store, id, gs uint64, data []byte) replica.Block {
	t.Helper()
	w := rbw(t, s, id, gs, data)
	if _, err := w.Finalize(ctx); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	return replica.Block{ID: id, GS: gs, NumBytes: int64(len(data))}
}

// rbw creates an RBW replica with data written and acked; its writer stays open.
func rbw(t *testing.T, s replica.Store, id, gs uint64, data []byte) replica.Writer {
	t.Helper()
	w, err := s.CreateRbw(ctx, Pool, replica.Block{ID: id, GS: gs}, replica.CreateOptions{})
	if err != nil {
		t.Fatalf("create rbw: %v", err)
	}
	Write(t, w, 0, data)
	if err := w.SetBytesAcked(int64(len(data))); err != nil {
		t.Fatalf("ack: %v", err)
	}
	return w
}

func testWriteRead(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(1, 200_000+77)
	w := rbw(t, s, 1, 10, data[:100_000])
	if vl, err := s.GetReplicaVisibleLength(Pool, replica.Block{ID: 1, GS: 10}); err != nil || vl != 100_000 {
		t.Fatalf("visible length = %d, %v; want 100000", vl, err)
	}
	// Unacked bytes are invisible (the resend starts at the partial chunk).
	Write(t, w, 99_840, data[99_840:])
	if vl, _ := s.GetReplicaVisibleLength(Pool, replica.Block{ID: 1, GS: 10}); vl != 100_000 {
		t.Fatalf("visible length = %d before ack", vl)
	}
	if got := ReadAll(t, s, replica.Block{ID: 1, GS: 10}); !bytes.Equal(got, data[:100_000]) {
		t.Fatalf("rbw read mismatch")
	}
	if err := w.SetBytesAcked(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := w.SetBytesAcked(5); replica.KindOf(err) != replica.KindInvalidArgument {
		t.Fatalf("ack backwards: %v", err)
	}
	if err := w.SetBytesAcked(int64(len(data)) + 1); replica.KindOf(err) != replica.KindOutOfRange {
		t.Fatalf("ack beyond disk: %v", err)
	}
	// A reader opened before finalize keeps reading (HDFS-17342).
	br, err := s.OpenBlock(Pool, replica.Block{ID: 1, GS: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	ri, err := w.Finalize(ctx)
	if err != nil || ri.State != replica.StateFinalized || ri.NumBytes != int64(len(data)) {
		t.Fatalf("finalize: %+v, %v", ri, err)
	}
	if _, err := br.Seek(150_000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(rest, data[150_000:]) {
		t.Fatalf("read across finalize: %d bytes, %v", len(rest), err)
	}
	if got := ReadAll(t, s, replica.Block{ID: 1, GS: 10}); !bytes.Equal(got, data) {
		t.Fatalf("finalized read mismatch")
	}
	// Meta stream: header + one checksum per chunk.
	mr, err := s.OpenMeta(Pool, replica.Block{ID: 1, GS: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if mr.Header().BytesPerChecksum != 512 || mr.Length() != mr.Header().MetaFileSize(int64(len(data))) {
		t.Fatalf("meta header %+v length %d", mr.Header(), mr.Length())
	}
	raw, _ := io.ReadAll(mr)
	h, sums, err := replica.ParseMeta(raw)
	if err != nil || h.Verify(data, sums) != -1 {
		t.Fatalf("meta stream does not verify the data: %v", err)
	}
	// Writer is done.
	if err := w.WritePacket(ctx, 0, data[:512], replica.ChecksumsPerChunk(data[:512], 512)); replica.KindOf(err) != replica.KindAborted {
		t.Fatalf("write after finalize: %v", err)
	}
	if got, _ := s.GetStoredBlock(Pool, 1); got != (replica.Block{ID: 1, GS: 10, NumBytes: int64(len(data))}) {
		t.Fatalf("stored block %+v", got)
	}
	if !s.Contains(Pool, replica.Block{ID: 1, GS: 10}) || s.Contains(Pool, replica.Block{ID: 1, GS: 11}) {
		t.Fatalf("contains")
	}
}

func testBadPackets(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(2, 3000)
	w := rbw(t, s, 2, 10, data[:1000])
	sums := replica.ChecksumsPerChunk(data[1024:2048], 512)
	sums[1] ^= 1
	WantKind(t, w.WritePacket(ctx, 1024, data[1024:2048], sums), replica.KindOutOfRange) // gap: 1000 on disk
	WantKind(t, w.WritePacket(ctx, 1000, data[1000:2000], replica.ChecksumsPerChunk(data[1000:2000], 512)), replica.KindInvalidArgument)
	WantKind(t, w.WritePacket(ctx, 512, data[512:2000], replica.ChecksumsPerChunk(data[512:2000], 512)[:1]), replica.KindInvalidArgument)
	bad := replica.ChecksumsPerChunk(data[512:2000], 512)
	bad[2] ^= 0xFF
	WantKind(t, w.WritePacket(ctx, 512, data[512:2000], bad), replica.KindCorrupt)
	ri := WantState(t, s, 2, replica.StateRBW, 10)
	if ri.BytesOnDisk != 1000 || ri.NumBytes != 1000 {
		t.Fatalf("replica changed by rejected packets: %+v", ri)
	}
	Write(t, w, 512, data[512:])
	w.SetBytesAcked(3000)
	if got := ReadAll(t, s, replica.Block{ID: 2, GS: 10}); !bytes.Equal(got, data) {
		t.Fatalf("data mismatch after rejected packets")
	}
}

func testResentPacket(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(3, 5000)
	w := rbw(t, s, 3, 10, data[:1300])
	// Resend from chunk 2 (1024) with new bytes past 1300: accepted.
	Write(t, w, 1024, data[1024:4000])
	// Resend wholly on disk: no-op.
	Write(t, w, 0, data[:2048])
	// Resent bytes that differ from disk: refused.
	other := append([]byte(nil), data[3584:4600]...)
	other[0] ^= 1
	WantKind(t, w.WritePacket(ctx, 3584, other, replica.ChecksumsPerChunk(other, 512)), replica.KindCorrupt)
	Write(t, w, 3584, data[3584:])
	w.SetBytesAcked(5000)
	if _, err := w.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, s, replica.Block{ID: 3, GS: 10}); !bytes.Equal(got, data) {
		t.Fatalf("data mismatch after resends")
	}
}

func testStopWriter(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(4, 4096)
	w := rbw(t, s, 4, 10, data)
	w2, err := s.RecoverRbw(ctx, Pool, replica.Block{ID: 4, GS: 10}, 11, 4096, 4096)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Stopped():
	default:
		t.Fatalf("old writer not stopped")
	}
	WantKind(t, w.WritePacket(ctx, 4096, data[:512], replica.ChecksumsPerChunk(data[:512], 512)), replica.KindAborted)
	WantKind(t, w.SetBytesAcked(4096), replica.KindAborted)
	if _, err := w.Finalize(ctx); replica.KindOf(err) != replica.KindAborted {
		t.Fatalf("finalize by stopped writer: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close of stopped writer: %v", err)
	}
	Write(t, w2, 4096, data)
	w2.SetBytesAcked(8192)
	if _, err := w2.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	WantState(t, s, 4, replica.StateFinalized, 11)
}

func testWrongGS(t *testing.T, f Factory) {
	s := open(t, f)
	b := finalized(t, s, 5, 10, Data(5, 700))
	_, err := s.Append(ctx, Pool, replica.Block{ID: 5, GS: 9}, 12, 700)
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.Append(ctx, Pool, b, 10, 700)
	WantKind(t, err, replica.KindStaleGS) // newGS must be newer (HDFS-17850)
	_, err = s.Append(ctx, Pool, b, 12, 699)
	WantKind(t, err, replica.KindOutOfRange)
	_, err = s.FinalizeBlock(ctx, Pool, replica.Block{ID: 5, GS: 11})
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.OpenBlock(Pool, replica.Block{ID: 5, GS: 11})
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.GetReplicaVisibleLength(Pool, replica.Block{ID: 5, GS: 11})
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.RecoverClose(ctx, Pool, replica.Block{ID: 5, GS: 11}, 12, 700)
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 5, GS: 11}, 20)
	WantKind(t, err, replica.KindStaleGS)
	_, err = s.InitReplicaRecovery(ctx, Pool, b, 10)
	WantKind(t, err, replica.KindStaleGS)
	WantState(t, s, 5, replica.StateFinalized, 10)
	if got := ReadAll(t, s, b); !bytes.Equal(got, Data(5, 700)) {
		t.Fatalf("data changed")
	}
}

func testBadPool(t *testing.T, f Factory) {
	s := open(t, f)
	b := replica.Block{ID: 6, GS: 1}
	_, err := s.CreateRbw(ctx, "BP-unknown", b, replica.CreateOptions{})
	WantKind(t, err, replica.KindNotFound)
	for _, bad := range []string{"", "..", "../x", "a/b", ".hidden", "x\x00y", string(make([]byte, 200))} {
		_, err := s.CreateRbw(ctx, bad, b, replica.CreateOptions{})
		WantKind(t, err, replica.KindInvalidArgument)
		WantKind(t, s.AddBlockPool(ctx, bad), replica.KindInvalidArgument)
	}
	_, err = s.CreateRbw(ctx, Pool, replica.Block{ID: 0, GS: 1}, replica.CreateOptions{})
	WantKind(t, err, replica.KindInvalidArgument)
	_, err = s.GetReplica(Pool, 6)
	WantKind(t, err, replica.KindNotFound)
	_, err = s.BlockReport("BP-unknown")
	WantKind(t, err, replica.KindNotFound)
	// Pool lifecycle.
	if err := s.AddBlockPool(ctx, "BP-2"); err != nil {
		t.Fatal(err)
	}
	finalized(t, s, 7, 1, Data(7, 10))
	if _, err := s.CreateRbw(ctx, "BP-2", replica.Block{ID: 8, GS: 1}, replica.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	WantKind(t, s.DeleteBlockPool("BP-2", false), replica.KindFailedPrecondition)
	if err := s.DeleteBlockPool("BP-2", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplica("BP-2", 8); replica.KindOf(err) != replica.KindNotFound {
		t.Fatalf("deleted pool still answers: %v", err)
	}
	if err := s.AddBlockPool(ctx, "BP-3"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBlockPool("BP-3", false); err != nil {
		t.Fatalf("delete empty pool: %v", err)
	}
	if err := s.ShutdownBlockPool(Pool); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBlockPool(ctx, Pool); err != nil {
		t.Fatal(err)
	}
	WantState(t, s, 7, replica.StateFinalized, 1)
}

func testInvalidate(t *testing.T, f Factory) {
	s := open(t, f)
	log := NewChangeLog(s)
	defer log.Sub.Close()
	b1 := finalized(t, s, 10, 5, Data(10, 100))
	b2 := finalized(t, s, 11, 5, Data(11, 100))
	w := rbw(t, s, 12, 5, Data(12, 100))
	err := s.Invalidate(ctx, Pool, []replica.Block{b1, {ID: 11, GS: 4}, {ID: 12, GS: 5}, {ID: 99, GS: 1}})
	WantKind(t, err, replica.KindStaleGS) // blk_11 GS not matched
	if _, err := s.GetReplica(Pool, 10); replica.KindOf(err) != replica.KindNotFound {
		t.Fatalf("invalidated replica still there: %v", err)
	}
	WantState(t, s, 11, replica.StateFinalized, 5)
	select {
	case <-w.Stopped():
	default:
		t.Fatalf("writer of an invalidated replica not stopped")
	}
	log.WaitFor(t, func(c replica.Change) bool { return c.Kind == replica.ChangeDeleted && c.Replica.ID == 10 })
	log.WaitFor(t, func(c replica.Change) bool { return c.Kind == replica.ChangeDeleted && c.Replica.ID == 12 })
	// The id can be created again at once.
	finalized(t, s, 10, 6, Data(13, 50))
	if got := ReadAll(t, s, replica.Block{ID: 10, GS: 6}); !bytes.Equal(got, Data(13, 50)) {
		t.Fatalf("recreated replica data")
	}
	_ = b2
}

func testRecoverRbwTruncates(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(20, 3000)
	w := rbw(t, s, 20, 10, data[:1100])
	Write(t, w, 1024, data[1024:3000]) // received 3000, acked 1100
	_, err := s.RecoverRbw(ctx, Pool, replica.Block{ID: 20, GS: 10}, 11, 1200, 3000)
	WantKind(t, err, replica.KindOutOfRange) // acked 1100 < client's 1200
	_, err = s.RecoverRbw(ctx, Pool, replica.Block{ID: 20, GS: 10}, 11, 1000, 2999)
	WantKind(t, err, replica.KindOutOfRange) // received 3000 > sent 2999
	_, err = s.RecoverRbw(ctx, Pool, replica.Block{ID: 20, GS: 12}, 13, 0, 3000)
	WantKind(t, err, replica.KindStaleGS)
	w2, err := s.RecoverRbw(ctx, Pool, replica.Block{ID: 20, GS: 10}, 11, 1000, 3000)
	if err != nil {
		t.Fatal(err)
	}
	ri := WantState(t, s, 20, replica.StateRBW, 11)
	if ri.NumBytes != 1100 || ri.BytesOnDisk != 1100 || ri.BytesAcked != 1100 {
		t.Fatalf("after recoverRbw: %+v", ri)
	}
	Write(t, w2, 1024, data[1024:])
	w2.SetBytesAcked(3000)
	if _, err := w2.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, s, replica.Block{ID: 20, GS: 11}); !bytes.Equal(got, data) {
		t.Fatalf("data mismatch")
	}
}

func testUpdateRecovery(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(21, 2000)
	w := rbw(t, s, 21, 10, data)
	w.SetBytesAcked(1500)
	info, err := s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 21, GS: 10, NumBytes: 1500}, 50)
	if err != nil || info == nil {
		t.Fatalf("init recovery: %+v, %v", info, err)
	}
	if *info != (replica.RecoveryInfo{ID: 21, BytesOnDisk: 2000, GS: 10, OriginalState: replica.StateRBW}) {
		t.Fatalf("recovery info %+v", *info)
	}
	ri := WantState(t, s, 21, replica.StateRUR, 10)
	if ri.RecoveryID != 50 || ri.OriginalState != replica.StateRBW {
		t.Fatalf("rur %+v", ri)
	}
	old := replica.Block{ID: 21, GS: 10, NumBytes: 2000}
	_, err = s.UpdateReplicaUnderRecovery(ctx, Pool, old, 50, 21, 2001)
	WantKind(t, err, replica.KindOutOfRange)
	_, err = s.UpdateReplicaUnderRecovery(ctx, Pool, replica.Block{ID: 21, GS: 10, NumBytes: 1999}, 50, 21, 1000)
	WantKind(t, err, replica.KindFailedPrecondition)
	_, err = s.UpdateReplicaUnderRecovery(ctx, Pool, old, 50, 22, 1000)
	WantKind(t, err, replica.KindInvalidArgument)
	// A newer recovery preempts; the older one's update is refused.
	if _, err := s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 21, GS: 10}, 60); err != nil {
		t.Fatal(err)
	}
	_, err = s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 21, GS: 10}, 55)
	WantKind(t, err, replica.KindRecoveryInProgress)
	_, err = s.UpdateReplicaUnderRecovery(ctx, Pool, old, 50, 21, 1000)
	WantKind(t, err, replica.KindRecoveryInProgress)
	ri = WantState(t, s, 21, replica.StateRUR, 10)
	if ri.NumBytes != 2000 {
		t.Fatalf("refused update changed the replica: %+v", ri)
	}
	ri, err = s.UpdateReplicaUnderRecovery(ctx, Pool, old, 60, 21, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ri.State != replica.StateFinalized || ri.GS != 60 || ri.NumBytes != 1000 || ri.StorageID == "" {
		t.Fatalf("after update: %+v", ri)
	}
	if got := ReadAll(t, s, replica.Block{ID: 21, GS: 60}); !bytes.Equal(got, data[:1000]) {
		t.Fatalf("truncated data mismatch")
	}
}

// testRecoveryThreeRBW is design §R7 scenario 5: RBW 100/120/150 → 100 each.
func testRecoveryThreeRBW(t *testing.T, f Factory) {
	data := Data(22, 150)
	var stores []replica.Store
	var infos []*replica.RecoveryInfo
	for _, n := range []int{100, 120, 150} {
		s := open(t, f)
		w := rbw(t, s, 30, 7, data[:n])
		_ = w
		info, err := s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 30, GS: 7, NumBytes: 100}, 9)
		if err != nil {
			t.Fatal(err)
		}
		stores, infos = append(stores, s), append(infos, info)
	}
	newLen := infos[0].BytesOnDisk
	for _, in := range infos {
		newLen = min(newLen, in.BytesOnDisk)
	}
	for i, s := range stores {
		old := replica.Block{ID: 30, GS: infos[i].GS, NumBytes: infos[i].BytesOnDisk}
		if _, err := s.UpdateReplicaUnderRecovery(ctx, Pool, old, 9, 30, newLen); err != nil {
			t.Fatal(err)
		}
		ri := WantState(t, s, 30, replica.StateFinalized, 9)
		if ri.NumBytes != 100 {
			t.Fatalf("store %d length %d", i, ri.NumBytes)
		}
		if got := ReadAll(t, s, replica.Block{ID: 30, GS: 9}); !bytes.Equal(got, data[:100]) {
			t.Fatalf("store %d bytes differ", i)
		}
	}
}

// testTransferPartialChunk is design §R7 scenario 22 (HDFS-4660/10587): a
// transfer of an RBW whose acked length is not chunk aligned, then writing
// continues on the new node; every chunk verifies.
func testTransferPartialChunk(t *testing.T, f Factory) {
	src, dst := open(t, f), open(t, f)
	data := Data(23, 4000)
	rbw(t, src, 40, 10, data[:1300])
	// Source sends its visible length (1300) to the new node.
	tw, err := dst.CreateTemporary(ctx, Pool, replica.Block{ID: 40, GS: 10, NumBytes: 1300}, true, replica.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vl, err := dst.GetReplicaVisibleLength(Pool, replica.Block{ID: 40, GS: 10}); replica.KindOf(err) != replica.KindInvalidState {
		t.Fatalf("temporary visible: %d, %v", vl, err)
	}
	Write(t, tw, 0, ReadAll(t, src, replica.Block{ID: 40, GS: 10}))
	if err := tw.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.ConvertTemporaryToRbw(ctx, Pool, replica.Block{ID: 40, GS: 10, NumBytes: 1301}); replica.KindOf(err) != replica.KindOutOfRange {
		t.Fatalf("convert with visible > received: %v", err)
	}
	ri, err := dst.ConvertTemporaryToRbw(ctx, Pool, replica.Block{ID: 40, GS: 10, NumBytes: 1300})
	if err != nil || ri.State != replica.StateRBW || ri.BytesAcked != 1300 {
		t.Fatalf("convert: %+v, %v", ri, err)
	}
	// Pipeline recovery with a new GS on both, then streaming resumes from
	// the start of the partial chunk.
	var ws []replica.Writer
	for _, s := range []replica.Store{src, dst} {
		w, err := s.RecoverRbw(ctx, Pool, replica.Block{ID: 40, GS: 10}, 11, 1300, 1300)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		Write(t, w, 1024, data[1024:])
		w.SetBytesAcked(4000)
		if _, err := w.Finalize(ctx); err != nil {
			t.Fatal(err)
		}
		s := []replica.Store{src, dst}[i]
		if got := ReadAll(t, s, replica.Block{ID: 40, GS: 11}); !bytes.Equal(got, data) {
			t.Fatalf("node %d bytes differ", i)
		}
	}
}

func testReports(t *testing.T, f Factory) {
	s := open(t, f)
	log := NewChangeLog(s)
	defer log.Sub.Close()
	finalized(t, s, 50, 3, Data(50, 10))
	rbw(t, s, 51, 3, Data(51, 10))
	tw, _ := s.CreateTemporary(ctx, Pool, replica.Block{ID: 52, GS: 3}, true, replica.CreateOptions{})
	_ = tw
	rbw(t, s, 53, 3, Data(53, 10))
	if _, err := s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 53, GS: 3}, 4); err != nil {
		t.Fatal(err)
	}
	reps, err := s.BlockReport(Pool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]replica.ReportedReplica{}
	for _, r := range reps {
		if r.StorageID == "" {
			t.Fatalf("report without storage id")
		}
		for _, x := range r.Replicas {
			got[x.ID] = x
		}
	}
	want := map[uint64]replica.ReportedReplica{
		50: {ID: 50, GS: 3, NumBytes: 10, State: replica.StateFinalized},
		51: {ID: 51, GS: 3, NumBytes: 10, State: replica.StateRBW},
		53: {ID: 53, GS: 3, NumBytes: 10, State: replica.StateRBW}, // RUR as its original
	}
	if len(got) != len(want) {
		t.Fatalf("report %+v", got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("report[%d] = %+v, want %+v", id, got[id], w)
		}
	}
	log.WaitFor(t, func(c replica.Change) bool { return c.Kind == replica.ChangeReceiving && c.Replica.ID == 50 })
	log.WaitFor(t, func(c replica.Change) bool {
		return c.Kind == replica.ChangeReceived && c.Replica.ID == 50 && c.Replica.State == replica.StateFinalized
	})
	log.WaitFor(t, func(c replica.Change) bool { return c.Kind == replica.ChangeReceiving && c.Replica.ID == 53 })
	for _, c := range log.Seen {
		if c.Replica.ID == 52 {
			t.Fatalf("TEMPORARY replica published: %+v", c)
		}
	}
}

func testRestart(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(60, 5000)
	finalized(t, s, 60, 2, data)
	w := rbw(t, s, 61, 2, data[:3000])
	w.Sync()
	tw, _ := s.CreateTemporary(ctx, Pool, replica.Block{ID: 62, GS: 2}, true, replica.CreateOptions{})
	Write(t, tw, 0, data[:100])
	rbw(t, s, 63, 2, data[:700])
	s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 63, GS: 2}, 3)
	finalized(t, s, 64, 2, data[:10])
	s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 64, GS: 2}, 3)
	s = restart(t, f, s)
	WantState(t, s, 60, replica.StateFinalized, 2)
	if ri := WantState(t, s, 61, replica.StateRWR, 2); ri.NumBytes != 3000 || ri.VisibleLength != 3000 {
		t.Fatalf("rwr after restart: %+v", ri)
	}
	if _, err := s.GetReplica(Pool, 62); replica.KindOf(err) != replica.KindNotFound {
		t.Fatalf("temporary survived restart: %v", err)
	}
	WantState(t, s, 63, replica.StateRWR, 2)
	WantState(t, s, 64, replica.StateFinalized, 2)
	if got := ReadAll(t, s, replica.Block{ID: 61, GS: 2}); !bytes.Equal(got, data[:3000]) {
		t.Fatalf("rwr data mismatch")
	}
	if got := ReadAll(t, s, replica.Block{ID: 60, GS: 2}); !bytes.Equal(got, data) {
		t.Fatalf("finalized data mismatch")
	}
	// Design §R7 scenario 7: only RWR replicas can still be recovered.
	if _, err := s.InitReplicaRecovery(ctx, Pool, replica.Block{ID: 61, GS: 2}, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateReplicaUnderRecovery(ctx, Pool, replica.Block{ID: 61, GS: 2, NumBytes: 3000}, 5, 61, 2048); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, s, replica.Block{ID: 61, GS: 5}); !bytes.Equal(got, data[:2048]) {
		t.Fatalf("recovered rwr data mismatch")
	}
}

func testAppend(t *testing.T, f Factory) {
	s := open(t, f)
	data := Data(70, 3000)
	b := finalized(t, s, 70, 10, data[:1000])
	w, err := s.Append(ctx, Pool, b, 11, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ri := WantState(t, s, 70, replica.StateRBW, 11)
	if ri.BytesAcked != 1000 || ri.VisibleLength != 1000 {
		t.Fatalf("after append: %+v", ri)
	}
	Write(t, w, 512, data[512:2000])
	w.SetBytesAcked(2000)
	w.Close()
	// Close recovery: GS bump and finalize.
	_, err = s.RecoverClose(ctx, Pool, replica.Block{ID: 70, GS: 11}, 12, 1999)
	WantKind(t, err, replica.KindOutOfRange)
	ri, err = s.RecoverClose(ctx, Pool, replica.Block{ID: 70, GS: 11}, 12, 2000)
	if err != nil || ri.State != replica.StateFinalized || ri.GS != 12 {
		t.Fatalf("recover close: %+v, %v", ri, err)
	}
	// Append recovery on a FINALIZED replica reopens it.
	w, err = s.RecoverAppend(ctx, Pool, replica.Block{ID: 70, GS: 12}, 13, 2000)
	if err != nil {
		t.Fatal(err)
	}
	Write(t, w, 1536, data[1536:])
	w.SetBytesAcked(3000)
	if _, err := w.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, s, replica.Block{ID: 70, GS: 13}); !bytes.Equal(got, data) {
		t.Fatalf("appended data mismatch")
	}
}
