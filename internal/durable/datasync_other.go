//go:build !linux

package durable

import "os"

// DataSync is fsync where fdatasync is not available.
func DataSync(f *os.File) error { return f.Sync() }
