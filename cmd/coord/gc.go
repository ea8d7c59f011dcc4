package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the coordinator's garbage-collection target (Go's
// GOGC, whose own default this is): the heap may grow to twice what is live
// before a collection. A coordinator's live heap is the state machine
// (mostly the retained journal, docs/benchmarks.md "Memory per retained
// event") plus buffers. Retained events are packed in pointer-free blocks,
// so a collection has little to mark, while a heap allowed to grow to five
// times the live one (400) costs a fresh coordinator hundreds of MB of page
// faults as it grows: against 400, 100 gave +11% appends/s cold and +15%
// warmed (medians of alternating pairs of coord dev clusters) and a lower
// p99 in five of six warmed pairs (docs/benchmarks.md, "What the settings
// are worth"). A GOGC or GOMEMLIMIT in the environment is the runtime's and
// still applies; GOGC wins over --gc-percent.
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
