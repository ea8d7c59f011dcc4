//go:build unix

// Package rusage reads this process's own CPU time, for benchmarks that
// report the load generator's share of a machine it shares with the
// cluster it measures.
package rusage

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user + system) this process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
