package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadTornTailAndOrphans(t *testing.T) {
	dirs := volDirs(t, 1)
	d := openT(t, tconfig(dirs...))
	data := tdata(1, 5000)
	w := rbwT(t, d, 1, 10, data[:3000])
	w.Sync()
	rbwPath := filepath.Join(newPoolPaths(dirs[0], tpool).rbw, blockName(1))
	metaPath := filepath.Join(newPoolPaths(dirs[0], tpool).rbw, metaName(1, 10))
	finalizedT(t, d, 2, 10, data[:700])
	d.abandon()
	// Torn tail: data beyond the checksums, and a corrupt byte in chunk 4.
	f, _ := os.OpenFile(rbwPath, os.O_RDWR, 0)
	f.WriteAt(tdata(9, 1000), 3000)
	f.WriteAt([]byte{data[2100] ^ 0xFF}, 2100)
	f.Close()
	// Orphans: a meta without data; tmp leftovers; a stray .trunc.
	pp := newPoolPaths(dirs[0], tpool)
	os.WriteFile(filepath.Join(pp.rbw, metaName(3, 5)), DefaultMetaHeader(512).Encode(), 0o644)
	os.WriteFile(filepath.Join(pp.tmp, blockName(4)), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(pp.rbw, metaName(1, 10)+truncSuffix), []byte("junk"), 0o644)
	d2 := openT(t, tconfig(dirs...))
	defer d2.Close()
	ri, err := d2.GetReplica(tpool, 1)
	if err != nil || ri.State != StateRWR || ri.NumBytes != 2048 {
		t.Fatalf("torn rbw: %+v, %v; want RWR of 2048 verified bytes", ri, err)
	}
	if got := readAllT(t, d2, 1); !bytes.Equal(got, data[:2048]) {
		t.Fatalf("rwr bytes differ")
	}
	if st, _ := os.Stat(rbwPath); st.Size() != 2048 {
		t.Fatalf("data not truncated: %d", st.Size())
	}
	if st, _ := os.Stat(metaPath); st.Size() != DefaultMetaHeader(512).MetaFileSize(2048) {
		t.Fatalf("meta not truncated: %d", st.Size())
	}
	for _, p := range []string{filepath.Join(pp.rbw, metaName(3, 5)), filepath.Join(pp.tmp, blockName(4)), metaPath + truncSuffix} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s survived load", p)
		}
	}
	if _, err := d2.GetReplica(tpool, 3); KindOf(err) != KindNotFound {
		t.Fatalf("orphan meta became a replica")
	}
	if got := readAllT(t, d2, 2); !bytes.Equal(got, data[:700]) {
		t.Fatalf("finalized bytes differ")
	}
}

func TestLoadTruncatedMetaAndMissingMeta(t *testing.T) {
	dirs := volDirs(t, 1)
	d := openT(t, tconfig(dirs...))
	data := tdata(2, 4000)
	rbwT(t, d, 1, 10, data).Sync()
	finalizedT(t, d, 2, 10, data[:100])
	d.abandon()
	pp := newPoolPaths(dirs[0], tpool)
	os.Truncate(filepath.Join(pp.rbw, metaName(1, 10)), MetaHeaderSize+3*4+2) // torn checksum
	os.Remove(filepath.Join(pp.dir(inFinalized, 2), metaName(2, 10)))
	d2 := openT(t, tconfig(dirs...))
	defer d2.Close()
	if ri, _ := d2.GetReplica(tpool, 1); ri.NumBytes != 1536 || ri.State != StateRWR {
		t.Fatalf("truncated meta: %+v, want RWR 1536", ri)
	}
	ri, err := d2.GetReplica(tpool, 2)
	if err != nil || ri.GS != 0 || ri.State != StateFinalized {
		t.Fatalf("finalized without meta: %+v, %v; want GS 0", ri, err)
	}
	if _, err := d2.OpenBlock(tpool, ri.Block()); KindOf(err) != KindIO {
		t.Fatalf("open of replica without meta: %v", err)
	}
	// The block scanner reports it.
	var bad []BadBlock
	d2.cfg.OnBadBlock = func(b BadBlock) { bad = append(bad, b) }
	wantKind(t, d2.VerifyReplica(bg, tpool, 2), KindCorrupt)
	if len(bad) != 1 || bad[0].Block.ID != 2 {
		t.Fatalf("bad blocks %+v", bad)
	}
}

func TestLoadDuplicates(t *testing.T) {
	dirs := volDirs(t, 2)
	cfg := tconfig(dirs...)
	d := openT(t, cfg)
	data := tdata(3, 900)
	finalizedT(t, d, 1, 10, data)
	ri, _ := d.GetReplica(tpool, 1)
	d.Close()
	// Copy the replica to the other volume with a higher GS.
	src := newPoolPaths(ri.VolumePath, tpool).dir(inFinalized, 1)
	other := dirs[0]
	if ri.VolumePath == dirs[0] {
		other = dirs[1]
	}
	dst := newPoolPaths(other, tpool).dir(inFinalized, 1)
	os.MkdirAll(dst, 0o755)
	b, _ := os.ReadFile(filepath.Join(src, blockName(1)))
	m, _ := os.ReadFile(filepath.Join(src, metaName(1, 10)))
	os.WriteFile(filepath.Join(dst, blockName(1)), b, 0o644)
	os.WriteFile(filepath.Join(dst, metaName(1, 11)), m, 0o644)
	d2 := openT(t, cfg)
	got, _ := d2.GetReplica(tpool, 1)
	if got.GS != 11 || got.VolumePath != other {
		t.Fatalf("duplicate resolution kept %+v", got)
	}
	if _, err := os.Stat(filepath.Join(src, blockName(1))); err == nil {
		t.Fatalf("loser not deleted")
	}
	d2.Close()
}

func TestLoadRBWAndFinalizedSameVolume(t *testing.T) {
	// A complete pair in rbw/ and another in finalized/ (same id): the
	// higher GS wins.
	dirs := volDirs(t, 1)
	d := openT(t, tconfig(dirs...))
	data := tdata(4, 1000)
	finalizedT(t, d, 1, 10, data)
	d.Close()
	pp := newPoolPaths(dirs[0], tpool)
	b, _ := os.ReadFile(filepath.Join(pp.dir(inFinalized, 1), blockName(1)))
	m, _ := os.ReadFile(filepath.Join(pp.dir(inFinalized, 1), metaName(1, 10)))
	os.WriteFile(filepath.Join(pp.rbw, blockName(1)), b, 0o644)
	os.WriteFile(filepath.Join(pp.rbw, metaName(1, 12)), m, 0o644)
	d2 := openT(t, tconfig(dirs...))
	defer d2.Close()
	ri, _ := d2.GetReplica(tpool, 1)
	if ri.State != StateRWR || ri.GS != 12 || ri.NumBytes != 1000 {
		t.Fatalf("got %+v", ri)
	}
	if n := countBlockFiles(t, d2.fs, dirs, 1); n != 1 {
		t.Fatalf("%d copies left", n)
	}
}
