package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// reservoir keeps at most cap samples, a uniform sample of all added.
type reservoir struct {
	samples []time.Duration
	seen    int64
	cap     int
	rng     *rand.Rand
}

func (r *reservoir) add(d time.Duration) {
	r.seen++
	if len(r.samples) < r.cap {
		r.samples = append(r.samples, d)
		return
	}
	if j := r.rng.Int64N(r.seen); j < int64(r.cap) {
		r.samples[j] = d
	}
}

// percentile is the nearest-rank percentile (0 < p <= 1) of sorted samples,
// in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// durationsMs returns the p50 and p99 (nearest rank) of ds in milliseconds.
func durationsMs(ds []time.Duration) (p50, p99 float64) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 0.50), percentile(s, 0.99)
}
