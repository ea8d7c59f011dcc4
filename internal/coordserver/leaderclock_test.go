package coordserver

import (
	"testing"
	"time"
)

// TestLeaderClockStamp: a term's stamps start at the applied clock and
// advance by the elapsed time between readings, whatever the wall clock
// says; they restart from the applied clock when it is ahead, never move
// back (a reading older than the last, an applied clock behind), and a
// new term starts again from the applied clock.
func TestLeaderClockStamp(t *testing.T) {
	t.Parallel()
	var c leaderClock
	t0 := time.Now()                 // with a monotonic reading
	skewed := t0.Add(10 * time.Hour) // a wall clock ten hours ahead: same monotonic steps
	applied := int64(5_000_000_000)
	steps := []struct {
		term    uint64
		applied int64
		now     time.Time
		want    int64
	}{
		{1, applied, skewed, applied},                                    // the term's first: the applied clock
		{1, applied, skewed.Add(2 * time.Second), applied + 2e9},         // + elapsed, not the wall clock
		{1, applied, skewed.Add(time.Second), applied + 2e9},             // an older reading: no step back
		{1, applied + 1e9, skewed.Add(3 * time.Second), applied + 3e9},   // applied behind: ignored
		{1, applied + 60e9, skewed.Add(4 * time.Second), applied + 60e9}, // applied ahead: restart from it
		{1, applied + 60e9, skewed.Add(5 * time.Second), applied + 61e9}, // and advance from there
		{2, applied + 61e9, skewed.Add(time.Hour), applied + 61e9},       // a new term: the applied clock again
		{2, applied + 61e9, skewed.Add(time.Hour + 500*time.Millisecond), applied + 61e9 + 5e8},
	}
	for i, st := range steps {
		if got := c.stamp(st.term, st.applied, st.now); got != st.want {
			t.Fatalf("step %d: stamp %d, want %d", i, got, st.want)
		}
	}
}
