//go:build !unix

// Package rusage reads this process's own CPU time, for benchmarks that
// report the load generator's share of a machine it shares with the
// cluster it measures.
package rusage

import "time"

// ProcessCPU is not measured here: it reports 0.
func ProcessCPU() time.Duration { return 0 }
