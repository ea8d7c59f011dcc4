package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// TestRemovalFeed: the ids a delete and an abandon remove appear in the
// feed in order from a reader's position, a refused op adds none, and a
// reader that fell more than the feed's bound behind is told it missed
// some.
func TestRemovalFeed(t *testing.T) {
	d := newBase(t)
	d.s.ns.removals = &blockRemovals{}
	start := d.s.RemovalFeedEnd()
	if ids, next, complete := d.s.RemovedBlocks(start, 10); len(ids) != 0 || next != start || !complete {
		t.Fatalf("empty feed: %v %d %v", ids, next, complete)
	}
	d.ok(EventDelete, opDelete("/closed/f", false))
	d.refuse(opDelete("/closed/f", false), ErrFileNotFound, KindNotFound)
	d.ok(EventAbandonBlock, opAbandon("/open/f", "c1", d.open.Id))
	ids, next, complete := d.s.RemovedBlocks(start, 10)
	if want := []uint64{d.closed1.Id, d.closed2.Id, d.open.Id}; !slices.Equal(ids, want) || next != start+3 || !complete {
		t.Fatalf("feed %v next %d complete %v, want %v", ids, next, complete, want)
	}
	if ids, _, _ := d.s.RemovedBlocks(start+1, 1); !slices.Equal(ids, []uint64{d.closed2.Id}) {
		t.Fatalf("from the second, at most one: %v", ids)
	}
	if ids, n, complete := d.s.RemovedBlocks(next, 10); len(ids) != 0 || n != next || !complete {
		t.Fatalf("read to the end: %v %d %v", ids, n, complete)
	}

	r := d.s.ns.removals
	for i := range uint64(removalFeedLen + 5) {
		r.add(1000 + i)
	}
	ids, n, complete := d.s.RemovedBlocks(next, 3)
	if complete || !slices.Equal(ids, []uint64{1000 + 5, 1000 + 6, 1000 + 7}) || n != r.next-removalFeedLen+3 {
		t.Fatalf("overwritten: %v next %d complete %v", ids, n, complete)
	}
	if _, n, _ := d.s.RemovedBlocks(r.next+7, 3); n != r.next {
		t.Fatalf("a cursor past the end reads from the end, got %d want %d", n, r.next)
	}
}

// TestRemovalFeedRestore: a restore keeps the feed's position but marks
// what came before it as lost, and the restored state feeds it.
func TestRemovalFeedRestore(t *testing.T) {
	d := newBase(t)
	f := New(nil)
	f.state = d.s
	d.s.ns.removals = &f.removals
	d.ok(EventDelete, opDelete("/closed/f", false))
	snap := snapshotBytes(t, f)
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	var next uint64
	var complete bool
	f.View(func(st *State) { ids, next, complete = st.RemovedBlocks(0, 10) })
	if len(ids) != 0 || next != 2 || complete {
		t.Fatalf("after a restore: %v next %d complete %v", ids, next, complete)
	}
	d.ns.s = f.state
	d.ok(EventAbandonBlock, opAbandon("/open/f", "c1", d.open.Id))
	f.View(func(st *State) { ids, next, complete = st.RemovedBlocks(next, 10) })
	if !slices.Equal(ids, []uint64{d.open.Id}) || !complete {
		t.Fatalf("the restored state's removal: %v %v", ids, complete)
	}
}
