//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far.
// coord bench reports the load generator's own share of the machine with
// it: on a machine the generator shares with the cluster, that share is
// part of what the figures measure.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
