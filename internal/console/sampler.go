package console

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The metrics the overview charts, from the process's own registry.
const (
	metricSafePos      = "logbook_journal_safe_pos"
	metricRequestSecs  = "logbook_grpc_request_seconds"
	appendMethod       = "/logbook.v1.Journal/Append"
	metricConsumerLag  = "logbook_journal_consumer_lag_max"
	chartAppendRate    = "append rate (events/s)"
	chartAppendP99     = "p99 append latency (ms)"
	chartConsumerLag   = "tail lag: slowest consumer (events)"
	maxHistogramBucket = 64
)

// raw is one gathering of the sampled metrics.
type raw struct {
	at      time.Time
	safePos float64
	lag     float64
	// The Append latency histogram: cumulative counts by upper bound.
	bounds []float64
	counts []uint64
	total  uint64
}

// Sample is one point of every chart.
type Sample struct {
	At         time.Time `json:"at"`
	AppendRate float64   `json:"append_rate"`
	// AppendP99Ms is the 99th percentile of the Append calls this member
	// answered in the interval (NaN-free: 0 without calls).
	AppendP99Ms float64 `json:"append_p99_ms"`
	ConsumerLag float64 `json:"consumer_lag"`
}

// sampler keeps the last n Samples in a ring, one per period, from the
// gatherer: rates and percentiles are over the interval between two
// gatherings.
type sampler struct {
	g      prometheus.Gatherer
	period time.Duration
	mu     sync.Mutex
	ring   []Sample
	head   int // next slot
	full   bool
	last   *raw
}

func newSampler(g prometheus.Gatherer, period time.Duration, n int) *sampler {
	return &sampler{g: g, period: period, ring: make([]Sample, max(n, 2))}
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.period)
	defer t.Stop()
	s.tick(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.tick(now)
		}
	}
}

// tick gathers once and, from the second gathering on, adds a sample.
func (s *sampler) tick(now time.Time) {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return
	}
	cur := readRaw(now, mfs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.last; prev != nil {
		s.ring[s.head] = between(prev, cur)
		s.head = (s.head + 1) % len(s.ring)
		s.full = s.full || s.head == 0
	}
	s.last = cur
}

// Samples returns the ring's samples, oldest first.
func (s *sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]Sample(nil), s.ring[:s.head]...)
	}
	return append(append([]Sample(nil), s.ring[s.head:]...), s.ring[:s.head]...)
}

func readRaw(now time.Time, mfs []*dto.MetricFamily) *raw {
	r := &raw{at: now}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricSafePos:
			if m := mf.GetMetric(); len(m) > 0 {
				r.safePos = m[0].GetGauge().GetValue()
			}
		case metricConsumerLag:
			if m := mf.GetMetric(); len(m) > 0 {
				r.lag = m[0].GetGauge().GetValue()
			}
		case metricRequestSecs:
			for _, m := range mf.GetMetric() {
				if !hasLabel(m, "method", appendMethod) {
					continue
				}
				h := m.GetHistogram()
				r.total = h.GetSampleCount()
				for i, b := range h.GetBucket() {
					if i >= maxHistogramBucket {
						break
					}
					r.bounds = append(r.bounds, b.GetUpperBound())
					r.counts = append(r.counts, b.GetCumulativeCount())
				}
			}
		}
	}
	return r
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// between is the sample of the interval from a to b.
func between(a, b *raw) Sample {
	s := Sample{At: b.at, ConsumerLag: b.lag}
	if dt := b.at.Sub(a.at).Seconds(); dt > 0 && b.safePos >= a.safePos {
		s.AppendRate = (b.safePos - a.safePos) / dt
	}
	s.AppendP99Ms = quantile(0.99, a, b) * 1000
	return s
}

// quantile estimates the q-quantile of the observations between a and b
// from their histogram buckets (linear within a bucket, as Prometheus's
// histogram_quantile); 0 without observations.
func quantile(q float64, a, b *raw) float64 {
	n := b.total - min(b.total, a.total)
	if n == 0 || len(b.counts) == 0 {
		return 0
	}
	delta := make([]float64, len(b.counts))
	for i, c := range b.counts {
		d := float64(c)
		if i < len(a.counts) && a.bounds[i] == b.bounds[i] {
			d -= float64(a.counts[i])
		}
		delta[i] = math.Max(0, d)
	}
	rank := q * float64(n)
	i := sort.Search(len(delta), func(i int) bool { return delta[i] >= rank })
	if i >= len(delta) {
		return b.bounds[len(b.bounds)-1] // beyond the last finite bucket
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b.bounds[i-1], delta[i-1]
	}
	hi := b.bounds[i]
	if math.IsInf(hi, 1) {
		return lo
	}
	if in := delta[i] - below; in > 0 {
		return lo + (hi-lo)*(rank-below)/in
	}
	return hi
}
