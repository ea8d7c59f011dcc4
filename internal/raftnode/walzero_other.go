//go:build !linux

package raftnode

import "os"

const directAlign = 4096

// openZeroWriter creates path for writing zeros through the page cache.
func openZeroWriter(path string, _ bool) (*os.File, []byte, bool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	return f, make([]byte, zeroChunk), false, err
}
