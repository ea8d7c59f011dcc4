package rpcmetrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestObserveCountsByMethodAndCode(t *testing.T) {
	m := New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	const a, b = "/logbook.v1.Journal/Append", "/logbook.v1.Journal/Read"
	for range 3 {
		m.Observe(a, time.Now(), nil)
	}
	m.Observe(a, time.Now(), status.Error(codes.OutOfRange, "trimmed"))
	m.Observe(b, time.Now(), errors.New("not a status")) // Unknown
	m.Observe(b, time.Now(), status.Error(codes.OK, ""))

	for _, c := range []struct {
		method, code string
		want         float64
	}{{a, "OK", 3}, {a, "OutOfRange", 1}, {b, "Unknown", 1}, {b, "OK", 1}} {
		if got := read(t, m.Requests(c.method, c.code)).GetCounter().GetValue(); got != c.want {
			t.Errorf("%s %s: %v calls, want %v", c.method, c.code, got, c.want)
		}
	}
	// The latency histogram has one observation per call, whatever the code.
	if n := count(m.latency); n != 2 {
		t.Errorf("%d latency series, want 2", n)
	}
	for method, want := range map[string]uint64{a: 4, b: 2} {
		h := m.latency.WithLabelValues(method).(prometheus.Histogram)
		if got := read(t, h).GetHistogram().GetSampleCount(); got != want {
			t.Errorf("%s: %d observations, want %d", method, got, want)
		}
	}
	// No series for codes never seen.
	if n := count(m.requests); n != 4 {
		t.Errorf("%d request series, want 4", n)
	}
}

// read is metric's current value.
func read(t *testing.T, metric prometheus.Metric) *dto.Metric {
	t.Helper()
	var d dto.Metric
	if err := metric.Write(&d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// count is how many series c exports.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

func TestInterceptorsObserveTheHandlersResult(t *testing.T) {
	m := New()
	info := &grpc.UnaryServerInfo{FullMethod: "/x.Y/Unary"}
	want := status.Error(codes.InvalidArgument, "bad")
	if _, err := m.UnaryInterceptor(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, want }); err != want {
		t.Fatalf("unary: %v", err)
	}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/x.Y/Stream"}
	if err := m.StreamInterceptor(nil, nil, sinfo, func(any, grpc.ServerStream) error { return nil }); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := read(t, m.Requests("/x.Y/Unary", "InvalidArgument")).GetCounter().GetValue(); got != 1 {
		t.Errorf("unary InvalidArgument: %v", got)
	}
	if got := read(t, m.Requests("/x.Y/Stream", "OK")).GetCounter().GetValue(); got != 1 {
		t.Errorf("stream OK: %v", got)
	}
}

// BenchmarkObserve is the per-call cost of the request metrics.
func BenchmarkObserve(b *testing.B) {
	m := New()
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe("/logbook.v1.Journal/Append", start, nil)
		}
	})
}

// BenchmarkObserveByLabels is the same through the vectors' label lookups
// on every call, as before the series were kept.
func BenchmarkObserveByLabels(b *testing.B) {
	m := New()
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.requests.WithLabelValues("/logbook.v1.Journal/Append", status.Code(nil).String()).Inc()
			m.latency.WithLabelValues("/logbook.v1.Journal/Append").Observe(time.Since(start).Seconds())
		}
	})
}
