package membership

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testCluster = "test-cluster"

var raftPorts atomic.Int64

// testLogger discards output unless the test runs with -v.
func testLogger() *slog.Logger {
	if p := os.Getenv("MEMBERSHIP_TEST_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	}
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig returns a loopback coordinator config with fast timings.
func testConfig(id string, join ...string) Config {
	cfg := DefaultConfig()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.ClusterID = testCluster
	// Raft and gRPC addresses are only advertised, never dialled.
	n := int(raftPorts.Add(2))
	cfg.Meta = Meta{
		Role:     RoleCoordinator,
		ID:       id,
		RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+n%20000)),
		GRPCAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(20001+n%20000)),
	}
	cfg.Join = join
	cfg.Logger = testLogger().With("m", id)
	cfg.ProbeInterval = 100 * time.Millisecond
	cfg.ProbeTimeout = 50 * time.Millisecond
	cfg.GossipInterval = 20 * time.Millisecond
	cfg.SuspicionMult = 3
	cfg.PushPullInterval = time.Second
	cfg.JoinRetryMin = 20 * time.Millisecond
	cfg.JoinRetryMax = 200 * time.Millisecond
	cfg.BroadcastTimeout = 2 * time.Second
	return cfg
}

// start runs New and closes the member at the end of the test.
func start(t *testing.T, cfg Config) *Memberlist {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Meta.ID, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// formCluster starts n members, the first one being the seed of the others,
// and waits until all see each other.
func formCluster(t *testing.T, ids ...string) []*Memberlist {
	t.Helper()
	seed := start(t, testConfig(ids[0]))
	ms := []*Memberlist{seed}
	for _, id := range ids[1:] {
		ms = append(ms, start(t, testConfig(id, seed.LocalAddr())))
	}
	waitConverged(t, ms, ids...)
	return ms
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// names returns the names of m's alive members.
func names(m *Memberlist) []string {
	var out []string
	for _, mem := range m.Members() {
		out = append(out, mem.Name)
	}
	return out
}

func sameNames(got, want []string) bool { return slices.Equal(got, want) }

// waitConverged waits until every member of ms sees exactly ids (sorted).
func waitConverged(t *testing.T, ms []*Memberlist, ids ...string) {
	t.Helper()
	waitFor(t, 15*time.Second, "membership to converge on "+strings.Join(ids, ","), func() bool {
		for _, m := range ms {
			if !sameNames(names(m), ids) {
				return false
			}
		}
		return true
	})
}

// logViewsOnFailure logs every member's memberlist view (name@addr/state,
// dead ones left out) if the test failed.
func logViewsOnFailure(t *testing.T, ms []*Memberlist) {
	if !t.Failed() {
		return
	}
	for _, m := range ms {
		s := m.cfg.Meta.ID + " sees:"
		for _, n := range m.ml.Members() {
			s += fmt.Sprintf(" %s@%s/%d", n.Name, n.Address(), n.State)
		}
		t.Log(s)
	}
}

// member returns m's view of the member called name.
func member(m *Memberlist, name string) (Member, bool) {
	for _, mem := range m.Members() {
		if mem.Name == name {
			return mem, true
		}
	}
	return Member{}, false
}

// waitEvent reads m's events until one matches or the deadline passes.
func waitEvent(t *testing.T, m *Memberlist, timeout time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-m.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for event: %s", timeout, what)
		}
	}
}

// recordingHandler is a slog.Handler that keeps records.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) snapshot() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}
