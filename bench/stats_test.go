package bench

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{0.5: 500, 0.99: 990, 0.999: 999, 1: 1000} {
		if got := percentile(s, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("empty")
	}
}

func TestReservoirBounded(t *testing.T) {
	r := reservoir{cap: 10, rng: newTestRand()}
	for i := 0; i < 1000; i++ {
		r.add(time.Duration(i))
	}
	if len(r.samples) != 10 || r.seen != 1000 {
		t.Fatalf("kept %d of %d", len(r.samples), r.seen)
	}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
