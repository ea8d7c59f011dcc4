package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the coordinator's garbage-collection target (Go's
// GOGC; Go's own default is 100): the heap may grow to 1 + 400/100 = 5
// times what is live before a collection. A coordinator's live heap is
// the state machine (the retained journal, docs/benchmarks.md "Memory per
// retained event") plus buffers, and its allocation rate is per request:
// collecting a fifth as often cut the p99 of 100 spread clients' appends
// from 37 to 30 ms (median of five alternating pairs, coord dev; docs/
// benchmarks.md, session 7). A GOGC or GOMEMLIMIT in the environment is
// the runtime's and still applies; GOGC wins over --gc-percent.
const defaultGCPercent = 400

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
