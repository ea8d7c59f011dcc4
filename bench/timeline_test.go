package bench

import (
	"testing"
	"time"
)

func TestLatBucketBounds(t *testing.T) {
	prev := -1
	for _, us := range []int64{0, 1, 7, 8, 9, 10, 11, 12, 15, 16, 100, 999, 1000, 1023, 1024, 123456, 1 << 40} {
		d := time.Duration(us) * time.Microsecond
		i := latBucket(d)
		if i < prev {
			t.Fatalf("%d µs: bucket %d below the previous %d", us, i, prev)
		}
		prev = i
		if i >= latBuckets {
			t.Fatalf("%d µs: bucket %d of %d", us, i, latBuckets)
		}
		up := bucketUpper(i)
		if up < d {
			t.Fatalf("%d µs: bucket %d holds at most %s", us, i, up)
		}
		if i > 0 && bucketUpper(i-1) >= d {
			t.Fatalf("%d µs: the bucket below (%d) already holds up to %s", us, i-1, bucketUpper(i-1))
		}
		if us >= 8 && float64(up) > 1.25*float64(d)+float64(time.Microsecond) {
			t.Fatalf("%d µs: bucket upper bound %s more than 25%% above", us, up)
		}
	}
	if got := latBucket(-time.Second); got != 0 {
		t.Fatalf("negative: bucket %d", got)
	}
}

func TestMergeTimelines(t *testing.T) {
	var a, b timeline
	for range 99 {
		a.add(0, time.Millisecond)
	}
	b.add(0, 100*time.Millisecond)
	b.add(2, 5*time.Millisecond)
	got := mergeTimelines([]timeline{a, b}, 3)
	if got[0].Ops != 100 || got[1].Ops != 0 || got[2].Ops != 1 {
		t.Fatalf("ops: %+v", got)
	}
	if got[0].P50Ms < 1 || got[0].P50Ms > 1.25 || got[0].P99Ms < 1 || got[0].P99Ms > 1.25 || got[0].MaxMs < 100 || got[0].MaxMs > 125 {
		t.Fatalf("second 1: %+v", got[0])
	}
	if got[2].P50Ms < 5 || got[2].MaxMs > 6.25 {
		t.Fatalf("second 3: %+v", got[2])
	}
}
