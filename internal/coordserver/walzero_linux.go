package coordserver

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and the metadata needed to read it back, not
// its timestamps: an fsync would also commit the file system's journal
// whenever a write moved the file's mtime.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// prefetch asks the kernel to read [off, off+n) of f into the page cache
// in the background.
func prefetch(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
