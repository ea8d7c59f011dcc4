//go:build unix

package testports

import (
	"os"
	"syscall"
)

// claim opens path and takes an exclusive lock on it without waiting: ok
// is false when another process holds it.
func claim(path string) (*os.File, bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}
