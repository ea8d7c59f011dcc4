// Package rpcmetrics counts and times a gRPC server's calls for Prometheus:
// logbook_grpc_requests_total{method,code} and
// logbook_grpc_request_seconds{method}, the same on coordinators and
// storage nodes.
//
// Every call is observed, so the per-method series are looked up once and
// kept: a label lookup (hashing the labels, then a map under a lock) costs
// more than the observation itself, twice per call. Non-OK codes, rare, are
// looked up as they come, so no zero series is exported for a code never
// seen.
package rpcmetrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics holds one server's request counters and latency histograms.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	methods  sync.Map // full method name -> *method
}

// method is one method's series taken out of the vectors.
type method struct {
	ok      prometheus.Counter
	latency prometheus.Observer
}

// New returns the metrics; register Collectors() on the server's registry.
func New() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logbook_grpc_requests_total", Help: "gRPC requests by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "logbook_grpc_request_seconds", Help: "gRPC request latency by method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"method"}),
	}
}

// Collectors returns what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency}
}

func (m *Metrics) method(name string) *method {
	if v, ok := m.methods.Load(name); ok {
		return v.(*method)
	}
	v, _ := m.methods.LoadOrStore(name, &method{
		ok:      m.requests.WithLabelValues(name, codes.OK.String()),
		latency: m.latency.WithLabelValues(name),
	})
	return v.(*method)
}

// Observe records one call of fullMethod that started at start and ended
// with err.
func (m *Metrics) Observe(fullMethod string, start time.Time, err error) {
	me := m.method(fullMethod)
	if code := status.Code(err); code == codes.OK {
		me.ok.Inc()
	} else {
		m.requests.WithLabelValues(fullMethod, code.String()).Inc()
	}
	me.latency.Observe(time.Since(start).Seconds())
}

// UnaryInterceptor observes unary calls.
func (m *Metrics) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.Observe(info.FullMethod, start, err)
	return resp, err
}

// StreamInterceptor observes streaming calls, each from its start to its
// end.
func (m *Metrics) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.Observe(info.FullMethod, start, err)
	return err
}

// Requests returns the counter of fullMethod's calls that ended with code
// (a codes.Code's String()), for tests and tools.
func (m *Metrics) Requests(fullMethod, code string) prometheus.Counter {
	return m.requests.WithLabelValues(fullMethod, code)
}
