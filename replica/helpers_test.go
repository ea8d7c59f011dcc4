package replica

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

const tpool = "BP-7"

var bg = context.Background()

func tconfig(dirs ...string) Config {
	cfg := DefaultConfig()
	cfg.DirScanInterval = 0
	cfg.BlockScanBytesPerSecond = 0
	cfg.BlockSize = 1 << 20
	for _, d := range dirs {
		cfg.Volumes = append(cfg.Volumes, VolumeConfig{Path: d})
	}
	return cfg
}

func openT(t testing.TB, cfg Config) *Dataset {
	t.Helper()
	d, err := Open(bg, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := d.AddBlockPool(bg, tpool); err != nil {
		t.Fatalf("add pool: %v", err)
	}
	return d
}

func volDirs(t testing.TB, n int) []string {
	root := t.TempDir()
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, filepath.Join(root, "vol"+itoa(int64(i))))
	}
	return out
}

func tdata(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 7
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func writeT(t testing.TB, w Writer, off int64, data []byte) {
	t.Helper()
	for i := 0; i < len(data); i += 64 << 10 {
		p := data[i:min(i+64<<10, len(data))]
		if err := w.WritePacket(bg, off+int64(i), p, ChecksumsPerChunk(p, 512)); err != nil {
			t.Fatalf("write at %d: %v", off+int64(i), err)
		}
	}
}

func rbwT(t testing.TB, d *Dataset, id, gs uint64, data []byte) Writer {
	t.Helper()
	w, err := d.CreateRbw(bg, tpool, Block{ID: id, GS: gs}, CreateOptions{})
	if err != nil {
		t.Fatalf("create rbw: %v", err)
	}
	writeT(t, w, 0, data)
	if err := w.SetBytesAcked(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return w
}

func finalizedT(t testing.TB, d *Dataset, id, gs uint64, data []byte) {
	t.Helper()
	w := rbwT(t, d, id, gs, data)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatalf("finalize: %v", err)
	}
}

// readAllT reads and verifies every chunk of replica id.
func readAllT(t testing.TB, d *Dataset, id uint64) []byte {
	t.Helper()
	ri, err := d.GetReplica(tpool, id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	br, err := d.OpenBlock(tpool, ri.Block())
	if err != nil {
		t.Fatalf("open %d: %v", id, err)
	}
	defer br.Close()
	var out []byte
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, _, err := br.ReadChunks(off, buf)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read %d at %d: %v", id, off, err)
		}
		out = append(out, buf[:n]...)
		off += int64(n)
	}
}

// countBlockFiles counts data files of id in finalized/ and rbw/ of every volume.
func countBlockFiles(t testing.TB, fsys FS, dirs []string, id uint64) int {
	n := 0
	var walk func(dir string)
	walk = func(dir string) {
		ents, _ := fsys.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir {
				walk(filepath.Join(dir, e.Name))
			} else if e.Name == blockName(id) {
				n++
			}
		}
	}
	for _, v := range dirs {
		pp := newPoolPaths(v, tpool)
		walk(pp.finalized)
		walk(pp.rbw)
	}
	return n
}

func wantKind(t testing.TB, err error, k ErrorKind) {
	t.Helper()
	if KindOf(err) != k || !errors.Is(err, k) {
		t.Fatalf("error %v: kind %v, want %v", err, KindOf(err), k)
	}
}

func setHook(t testing.TB, h func(string) error) {
	failpointHook.Store(&h)
	t.Cleanup(func() { failpointHook.Store(nil) })
}

var errCrash = errors.New("simulated crash")

func hasSuffixAny(s string, xs ...string) bool {
	for _, x := range xs {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

func equalPrefix(got, data []byte) bool { return bytes.Equal(got, data[:len(got)]) }
