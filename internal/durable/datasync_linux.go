package durable

import (
	"os"
	"syscall"
)

// DataSync flushes f's data and the metadata needed to read it back, not
// its timestamps: an fsync would also commit the file system's journal
// whenever a write moved the file's mtime.
func DataSync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
