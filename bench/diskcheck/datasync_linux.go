package main

import (
	"os"
	"syscall"
)

// datasync flushes f's data (not its timestamps), as raft-wal's segments
// are synced on Linux.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
