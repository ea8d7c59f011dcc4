package bench

import (
	"math/bits"
	"time"
)

// A timeline counts successful calls per second of the measured duration
// in latency buckets, so that a run can be shown second by second
// (JournalConfig.Timeline, coord bench journal --timeline): a stall of a
// second or a burst of slow calls is visible there, while the run's
// percentiles only say that it happened.
//
// Buckets are logarithmic with four per power of two (a bucket's upper
// bound is at most 25% above its lower one): latBucket(d) for d below 8 µs
// is d in µs; above, it is 8 + 4·(n−4) + (the two bits after the leading
// one), n being d's bit length in µs.
const latBuckets = 8 + 4*(64-4)

func latBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 8 {
		return int(us)
	}
	n := bits.Len64(us)
	return 8 + 4*(n-4) + int(us>>(n-3)&3)
}

// bucketUpper is the largest latency bucket i holds.
func bucketUpper(i int) time.Duration {
	if i < 8 {
		return time.Duration(i) * time.Microsecond
	}
	n, sub := (i-8)/4+4, uint64((i-8)%4)
	return time.Duration(((4+sub+1)<<(n-3))-1) * time.Microsecond
}

// timeline is one worker's counts: [second][bucket], a second allocated
// when a call ends in it.
type timeline [][]uint32

func (t *timeline) add(sec int, d time.Duration) {
	for len(*t) <= sec {
		*t = append(*t, nil)
	}
	if (*t)[sec] == nil {
		(*t)[sec] = make([]uint32, latBuckets)
	}
	(*t)[sec][latBucket(d)]++
}

// TimelineSecond is one second of a journal run's measured duration
// (JournalResult.Timeline, the "timeline" of coord bench journal --json):
// the calls that ended in it and their latency percentiles, which are
// bucket upper bounds (at most 25% above the true value).
type TimelineSecond struct {
	Second int     `json:"second"`
	Ops    int64   `json:"ops"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// mergeTimelines sums the workers' timelines into seconds seconds.
func mergeTimelines(ts []timeline, seconds int) []TimelineSecond {
	out := make([]TimelineSecond, seconds)
	counts := make([]uint64, latBuckets)
	for s := range out {
		clear(counts)
		var total uint64
		for _, t := range ts {
			if s < len(t) && t[s] != nil {
				for i, c := range t[s] {
					counts[i] += uint64(c)
					total += uint64(c)
				}
			}
		}
		out[s] = TimelineSecond{Second: s + 1, Ops: int64(total)}
		if total == 0 {
			continue
		}
		rank := func(p float64) float64 {
			want := uint64(p*float64(total) + 0.999999)
			var seen uint64
			for i, c := range counts {
				if seen += c; seen >= want {
					return float64(bucketUpper(i).Microseconds()) / 1000
				}
			}
			return 0
		}
		out[s].P50Ms, out[s].P99Ms, out[s].MaxMs = rank(0.50), rank(0.99), rank(1)
	}
	return out
}
