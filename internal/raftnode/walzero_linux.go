package raftnode

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// directAlign is the alignment O_DIRECT asks of offsets, lengths and
// buffers (the logical block size of any disk this runs on divides it).
const directAlign = 4096

// openZeroWriter creates path for writing zeros and returns a zeroed
// buffer of zeroChunk bytes to write with, and whether the file is open
// with O_DIRECT. Where it can (tryDirect and a file system that supports
// it) it is: the zeros go from one buffer to the disk, without being
// copied into the page cache and written back from there, which under
// load cost the members more CPU than the journal's own fdatasyncs. Where
// the file system refuses O_DIRECT at open (tmpfs before Linux 6.6, some
// FUSE and network file systems) it is a plain buffered file.
func openZeroWriter(path string, tryDirect bool) (*os.File, []byte, bool, error) {
	const flags = os.O_CREATE | os.O_TRUNC | os.O_WRONLY
	if tryDirect {
		f, err := os.OpenFile(path, flags|syscall.O_DIRECT, 0o644)
		if err == nil {
			raw := make([]byte, zeroChunk+2*directAlign)
			off := (directAlign-int(uintptr(unsafe.Pointer(&raw[0]))%directAlign))%directAlign + directBufSkew
			return f, raw[off : off+zeroChunk], true, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, nil, false, err
		}
	}
	f, err := os.OpenFile(path, flags, 0o644)
	return f, make([]byte, zeroChunk), false, err
}

// directBufSkew moves the O_DIRECT buffer off its alignment: tests set it
// to make the file system refuse the writes.
var directBufSkew = 0
