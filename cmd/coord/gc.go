package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the coordinator's garbage-collection target (Go's
// GOGC, whose own default this is): the heap may grow to twice what is live
// before a collection. A coordinator's live heap is the state machine
// (mostly the retained journal, docs/benchmarks.md "Memory per retained
// event") plus buffers. Until session 14 the default was 400: with a
// message per retained event a collection had ~4 objects per event to mark,
// and collecting a fifth as often cut the p99 of 100 spread clients'
// appends from 37 to 30 ms (docs/benchmarks.md, session 7). Since events
// are packed in pointer-free blocks a collection marks little, while a
// heap five times the live one costs a fresh coordinator hundreds of MB of
// page faults as it grows: at 100, six alternating pairs of warmed coord
// dev clusters gave +15% appends/s (median) and a lower p99 in five
// (docs/benchmarks.md, session 14). A GOGC or GOMEMLIMIT in the
// environment is the runtime's and still applies; GOGC wins over
// --gc-percent.
const defaultGCPercent = 100

// minGCPercent keeps --gc-percent from turning collection off or into a
// collection per allocation.
const minGCPercent = 25

// setGCPercent applies --gc-percent unless GOGC is set in the environment.
func setGCPercent(p int) error {
	if p < minGCPercent {
		return usageErrorf("--gc-percent %d: want at least %d (Go's default is 100)", p, minGCPercent)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(p)
	}
	return nil
}
