package replica

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestReconcile(t *testing.T) {
	dirs := volDirs(t, 1)
	cfg := tconfig(dirs...)
	var mu sync.Mutex
	var bad []BadBlock
	cfg.OnBadBlock = func(b BadBlock) { mu.Lock(); bad = append(bad, b); mu.Unlock() }
	d := openT(t, cfg)
	defer d.Close()
	for id := uint64(1); id <= 5; id++ {
		finalizedT(t, d, id, 3, tdata(byte(id), 1000))
	}
	w := rbwT(t, d, 6, 3, tdata(6, 100)) // RBW: never touched
	defer w.Close()
	pp := newPoolPaths(dirs[0], tpool)
	// 1: block file deleted behind our back.
	os.Remove(filepath.Join(pp.dir(inFinalized, 1), blockName(1)))
	// 2: length changed.
	os.Truncate(filepath.Join(pp.dir(inFinalized, 2), blockName(2)), 600)
	// 3: GS of the meta file changed on disk.
	os.Rename(filepath.Join(pp.dir(inFinalized, 3), metaName(3, 3)), filepath.Join(pp.dir(inFinalized, 3), metaName(3, 4)))
	// 7: a replica on disk unknown to memory (in a non-canonical subdir).
	odd := filepath.Join(pp.finalized, "subdir9")
	os.MkdirAll(odd, 0o755)
	data7 := tdata(7, 2000)
	os.WriteFile(filepath.Join(odd, blockName(7)), data7, 0o644)
	os.WriteFile(filepath.Join(odd, metaName(7, 8)), append(DefaultMetaHeader(512).Encode(), encodeSums(ChecksumsPerChunk(data7, 512))...), 0o644)
	// 8: an orphan meta.
	os.WriteFile(filepath.Join(pp.dir(inFinalized, 8), metaName(8, 1)), DefaultMetaHeader(512).Encode(), 0o644)
	rep, err := d.Reconcile(bg, tpool)
	if err != nil {
		t.Fatal(err)
	}
	if rep.MissingOnDisk != 1 || rep.LengthFixed != 1 || rep.GSFixed != 1 || rep.MissingInMem != 1 || rep.OrphanMetaGone != 1 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := d.GetReplica(tpool, 1); KindOf(err) != KindNotFound {
		t.Fatal("replica without file kept")
	}
	if ri, _ := d.GetReplica(tpool, 2); ri.NumBytes != 600 {
		t.Fatalf("length not fixed: %+v", ri)
	}
	if len(bad) != 1 || bad[0].Block.ID != 2 || bad[0].Reason != "length-mismatch" {
		t.Fatalf("bad blocks %+v", bad)
	}
	if ri, _ := d.GetReplica(tpool, 3); ri.GS != 4 {
		t.Fatalf("GS not adopted: %+v", ri)
	}
	if got := readAllT(t, d, 7); string(got) != string(data7) {
		t.Fatal("adopted replica unreadable")
	}
	if ri, _ := d.GetReplica(tpool, 6); ri.State != StateRBW {
		t.Fatalf("rbw touched: %+v", ri)
	}
	// Second pass: nothing left to fix.
	rep, err = d.Reconcile(bg, tpool)
	if err != nil || rep.Differences != 0 {
		t.Fatalf("second pass %+v, %v", rep, err)
	}
	if s := d.Stats(); s.DirScans != 2 || s.DirScanLenFixed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBlockScannerFindsCorruption(t *testing.T) {
	dirs := volDirs(t, 1)
	cfg := tconfig(dirs...)
	found := make(chan BadBlock, 4)
	cfg.OnBadBlock = func(b BadBlock) { found <- b }
	d := openT(t, cfg)
	defer d.Close()
	finalizedT(t, d, 1, 3, tdata(1, 5000))
	finalizedT(t, d, 2, 3, tdata(2, 5000))
	pp := newPoolPaths(dirs[0], tpool)
	f, _ := os.OpenFile(filepath.Join(pp.dir(inFinalized, 2), blockName(2)), os.O_RDWR, 0)
	f.WriteAt([]byte{0xAA, 0xBB}, 3000)
	f.Close()
	d.cfg.BlockScanBytesPerSecond = 100 << 20
	d.cfg.BlockScanPeriod = 1 << 40
	d.StartBlockScanner()
	b := <-found
	if b.Block.ID != 2 || b.Reason != "checksum-mismatch" {
		t.Fatalf("bad block %+v", b)
	}
	if err := d.VerifyReplica(bg, tpool, 1); err != nil {
		t.Fatalf("healthy replica: %v", err)
	}
}

func TestTrash(t *testing.T) {
	dirs := volDirs(t, 1)
	d := openT(t, tconfig(dirs...))
	defer d.Close()
	finalizedT(t, d, 1, 3, tdata(1, 1000))
	rbwT(t, d, 2, 3, tdata(2, 700)).Close()
	if err := d.EnableTrash(tpool); err != nil || !d.TrashEnabled(tpool) {
		t.Fatalf("enable trash: %v", err)
	}
	if err := d.Invalidate(bg, tpool, []Block{{ID: 1, GS: 3}, {ID: 2, GS: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.GetReplica(tpool, 1); KindOf(err) != KindNotFound {
		t.Fatal("invalidated replica still present")
	}
	n, err := d.RestoreTrash(bg, tpool)
	if err != nil || n != 2 {
		t.Fatalf("restore: %d, %v", n, err)
	}
	if got := readAllT(t, d, 1); !equalPrefix(got, tdata(1, 1000)) || len(got) != 1000 {
		t.Fatal("restored finalized replica differs")
	}
	if ri, _ := d.GetReplica(tpool, 2); ri.State != StateRWR || ri.NumBytes != 700 {
		t.Fatalf("restored rbw: %+v", ri)
	}
	d.Invalidate(bg, tpool, []Block{{ID: 1, GS: 3}})
	if err := d.ClearTrash(tpool); err != nil || d.TrashEnabled(tpool) {
		t.Fatalf("clear trash: %v", err)
	}
	if _, err := os.Stat(newPoolPaths(dirs[0], tpool).trash); !os.IsNotExist(err) {
		t.Fatal("trash not cleared")
	}
}

func TestCache(t *testing.T) {
	cfg := tconfig(volDirs(t, 1)...)
	cfg.MaxLockedMemory = 64 << 10
	d := openT(t, cfg)
	defer d.Close()
	data := tdata(1, 10_000)
	finalizedT(t, d, 1, 3, data)
	finalizedT(t, d, 2, 3, tdata(2, 100_000))
	rbwT(t, d, 3, 3, data).Close()
	wantKind(t, d.Cache(bg, tpool, 3), KindInvalidState)
	wantKind(t, d.Cache(bg, tpool, 2), KindResourceExhausted) // over budget
	err := d.Cache(bg, tpool, 1)
	if KindOf(err) == KindResourceExhausted {
		t.Skipf("mlock refused here (RLIMIT_MEMLOCK): %v", err)
	}
	if err != nil || !d.IsCached(tpool, 1) {
		t.Fatalf("cache: %v", err)
	}
	if got := readAllT(t, d, 1); string(got) != string(data) {
		t.Fatal("cached read differs")
	}
	if s := d.Stats(); s.BlocksCached != 1 || s.BytesCached == 0 {
		t.Fatalf("stats %+v", s)
	}
	if ids, err := d.CacheReport(tpool); err != nil || len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("cache report %v, %v", ids, err)
	}
	if _, err := d.CacheReport("no-such-pool"); KindOf(err) != KindNotFound {
		t.Fatalf("cache report of an unknown pool: %v", err)
	}
	// Append uncaches.
	w, err := d.Append(bg, tpool, Block{ID: 1, GS: 3}, 4, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if d.IsCached(tpool, 1) || d.Stats().BytesCached != 0 {
		t.Fatal("append left the replica cached")
	}
	if ids, _ := d.CacheReport(tpool); len(ids) != 0 {
		t.Fatalf("cache report after append: %v", ids)
	}
	if err := d.Uncache(tpool, 1); err != nil {
		t.Fatal(err)
	}
}
