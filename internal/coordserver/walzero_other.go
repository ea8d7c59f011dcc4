//go:build !linux

package coordserver

import "os"

// datasync is fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }

// prefetch does nothing where posix_fadvise is not available.
func prefetch(*os.File, int64, int64) {}
