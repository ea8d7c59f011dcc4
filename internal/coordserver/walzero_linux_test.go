package coordserver

import (
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
