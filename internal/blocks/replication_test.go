package blocks

import (
	"slices"
	"testing"
	"time"
)

// TestDirtyBlocksOldestFirst: the replication check takes the blocks
// marked dirty in the order they were marked, a cycle's bound at a time;
// a block marked again before its check keeps its place and is checked
// once, and one marked again after its check (an open block, re-marked
// until it completes) goes behind those waiting.
func TestDirtyBlocksOldestFirst(t *testing.T) {
	f := &fsSoft{}
	f.reset(1, time.Now(), time.Minute)
	for id := uint64(1); id <= 7; id++ {
		f.markDirty(id)
	}
	f.markDirty(3) // waiting already
	take := func(want ...uint64) {
		t.Helper()
		got := f.repl.dirty.take(3)
		if !slices.Equal(got, want) {
			t.Fatalf("took %v, want %v", got, want)
		}
		for _, id := range got { // checked, as replicationCycle does
			f.repl.dirty.done(id)
		}
	}
	take(1, 2, 3)
	f.markDirty(2) // re-marked after its check
	f.markDirty(8)
	take(4, 5, 6)
	take(7, 2, 8)
	take()
	if len(f.repl.dirty.set) != 0 || f.repl.dirty.order != nil {
		t.Fatalf("left: %v %v", f.repl.dirty.set, f.repl.dirty.order)
	}
}
