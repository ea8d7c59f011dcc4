package coordserver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports how many pages of [off, off+n) of f are in the page
// cache.
func resident(t *testing.T, f *os.File, off, n int64) int {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// TestZeroedSegmentPrefetch: the pages just past each write are brought
// back into the page cache, so a partial-page append into zeroed blocks the
// kernel evicted does not wait for a read.
func TestZeroedSegmentPrefetch(t *testing.T) {
	dir := t.TempDir()
	z, err := newZeroedSegments(dir, 4<<20, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	spare, err := os.Open(filepath.Join(dir, spareName))
	if err != nil {
		t.Fatal(err)
	}
	// Evict the spare's pages, as reclaim would after it sat unused.
	if err := unix.Fadvise(int(spare.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	spare.Close()
	wf, err := z.Create(dir, "00000000000000000001-0000000000000000.wal", 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	f := wf.(*zeroedFile).File
	const pages = prefetchAhead / 4096
	// Past the first window: nothing asked for yet.
	if got := resident(t, f, 2<<20, prefetchAhead); got != 0 {
		// Only a memory-backed file system keeps clean pages: there is
		// nothing to evict or prefetch, and nothing to check.
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
			t.Skipf("%s is tmpfs: its pages cannot be evicted", dir)
		}
		t.Fatalf("%d pages still resident after FADV_DONTNEED on a disk-backed file system", got)
	}
	if _, err := wf.WriteAt(make([]byte, 100), 2<<20-100); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the pages after the write resident", func() bool {
		return resident(t, f, 2<<20, prefetchAhead) == pages
	})
}

// TestZeroWriterDirect: where the file system takes O_DIRECT the spare is
// written with it, from an aligned buffer of zeros; a spare so written
// reads back as zeros of the segment's size.
func TestZeroWriterDirect(t *testing.T) {
	dir := t.TempDir()
	supported := directOpens(t, dir)
	for _, direct := range []bool{true, false} {
		f, buf, isDirect, err := openZeroWriter(filepath.Join(dir, "z"), direct)
		if err != nil {
			t.Fatal(err)
		}
		if isDirect != (direct && supported) {
			t.Fatalf("direct=%v: reported O_DIRECT %v", direct, isDirect)
		}
		flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := flags&unix.O_DIRECT != 0, direct && supported; got != want {
			t.Fatalf("direct=%v on a file system that supports it: %v: O_DIRECT set %v, want %v", direct, supported, got, want)
		}
		if len(buf) != zeroChunk || uintptr(unsafe.Pointer(&buf[0]))%directAlign != 0 {
			t.Fatalf("buffer of %d bytes at %p; want %d bytes aligned to %d", len(buf), &buf[0], zeroChunk, directAlign)
		}
		for i, b := range buf {
			if b != 0 {
				t.Fatalf("buffer byte %d is %d", i, b)
			}
		}
	}
	if !supported {
		t.Logf("%s refuses O_DIRECT: the spare is written through the page cache", dir)
	}

	sdir := filepath.Join(dir, "wal")
	if err := os.Mkdir(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 4<<20 + 8192 // not a whole number of chunks
	z, err := newZeroedSegments(sdir, size, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	checkZeroedSpare(t, sdir, size)
}

// TestZeroWriterDirectRefused: a file system that opens with O_DIRECT but
// refuses the writes (here: a buffer off its alignment) still gets a
// complete spare, written through the page cache.
func TestZeroWriterDirectRefused(t *testing.T) {
	dir := t.TempDir()
	if !directOpens(t, dir) {
		t.Skipf("%s refuses O_DIRECT at open: nothing to refuse at write", dir) // ext4 and XFS, as in CI, take it
	}
	directBufSkew = 1
	defer func() { directBufSkew = 0 }()
	const size = 4 << 20
	z, err := newZeroedSegments(dir, size, testLogger(t))
	if err != nil {
		t.Fatalf("open with O_DIRECT writes refused: %v", err)
	}
	defer z.Close()
	checkZeroedSpare(t, dir, size)
}

// checkZeroedSpare fails unless dir holds a spare of size zero bytes.
func checkZeroedSpare(t *testing.T, dir string, size int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, spareName))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != size {
		t.Fatalf("spare of %d bytes, want %d", len(data), size)
	}
	for i, b := range data {
		if b != 0 {
			t.Fatalf("spare byte %d is %d", i, b)
		}
	}
}

// directOpens reports whether files in dir open with O_DIRECT; EINVAL is
// a no, any other error fails the test.
func directOpens(t *testing.T, dir string) bool {
	t.Helper()
	probe, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o644)
	if errors.Is(err, unix.EINVAL) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	return true
}
