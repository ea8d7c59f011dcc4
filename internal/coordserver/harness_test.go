package coordserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/poll"
	"github.com/logbookhq/logbook/internal/testports"
)

// testCluster is the in-process cluster harness: real coordinators (real
// Raft, bolt, TCP on 127.0.0.1, gossip), with faults injected by stopping
// members abruptly and by cutting the Raft network between them.
type testCluster struct {
	t       testing.TB
	cfgs    []Config
	servers []*Server
	net     *faultNet
	mu      sync.Mutex
}

type clusterOpt func(i int, c *Config)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 100}))
}

func testConfig(t testing.TB, id, dir string) Config {
	c := DefaultConfig()
	c.ID = id
	c.ClusterID = "test-cluster"
	// Tests write no 64 MiB zeroed segments (TestWALPrefill* cover them).
	c.WALPrefill = false
	c.DataDir = filepath.Join(dir, id)
	c.RaftAddr, c.GRPCAddr, c.GossipAddr, c.HTTPAddr = testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true)
	// Short timings keep tests fast; still well above loopback RTT under -race.
	c.Raft.HeartbeatTimeout = 250 * time.Millisecond
	c.Raft.ElectionTimeout = 500 * time.Millisecond
	c.Raft.LeaderLeaseTimeout = 125 * time.Millisecond
	c.Raft.CommitTimeout = 10 * time.Millisecond
	c.NoLeaderHold = 3 * time.Second
	c.Logger = testLogger(t).With("member", id)
	return c
}

func newTestCluster(t testing.TB, n int, opts ...clusterOpt) *testCluster {
	t.Helper()
	dir := t.TempDir()
	tc := &testCluster{t: t, net: newFaultNet()}
	for i := 0; i < n; i++ {
		c := testConfig(t, fmt.Sprintf("c%d", i+1), dir)
		c.BootstrapExpect = n
		for _, o := range opts {
			o(i, &c)
		}
		tc.cfgs = append(tc.cfgs, c)
	}
	for i := range tc.cfgs {
		tc.cfgs[i].Join = []string{tc.cfgs[0].GossipAddr}
		tc.net.register(tc.cfgs[i].ID, tc.cfgs[i].RaftAddr)
	}
	tc.servers = make([]*Server, n)
	for i := range tc.cfgs {
		tc.start(i)
	}
	t.Cleanup(tc.closeAll)
	tc.waitLeader()
	return tc
}

func (tc *testCluster) start(i int) {
	tc.t.Helper()
	cfg := tc.cfgs[i]
	cfg.raftDialer = tc.net.dialer(cfg.ID)
	s, err := New(cfg)
	if err != nil {
		tc.t.Fatalf("start %s: %v", cfg.ID, err)
	}
	tc.mu.Lock()
	tc.servers[i] = s
	tc.mu.Unlock()
}

// kill stops member i abruptly: no leadership transfer, no goodbye.
func (tc *testCluster) kill(i int) {
	tc.t.Helper()
	tc.mu.Lock()
	s := tc.servers[i]
	tc.servers[i] = nil
	tc.mu.Unlock()
	if s != nil {
		s.shutdown()
	}
}

func (tc *testCluster) restart(i int) {
	tc.t.Helper()
	tc.kill(i)
	tc.start(i)
}

func (tc *testCluster) closeAll() {
	var wg sync.WaitGroup
	for i := range tc.servers {
		wg.Add(1)
		go func() { defer wg.Done(); tc.kill(i) }()
	}
	wg.Wait()
}

func (tc *testCluster) server(i int) *Server {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.servers[i]
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Within(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// waitLeader waits until exactly one running member leads and it is ready,
// and returns its index.
func (tc *testCluster) waitLeader() int {
	tc.t.Helper()
	leader := -1
	eventually(tc.t, 20*time.Second, "a ready leader", func() bool {
		leader = -1
		for i := range tc.servers {
			s := tc.server(i)
			if s != nil && tc.net.reachableMajority(s.cfg.ID) && s.leaderReady() {
				if leader >= 0 {
					return false
				}
				leader = i
			}
		}
		return leader >= 0
	})
	return leader
}

// transferLeadership has member from hand leadership to member to and
// waits until to leads.
func (tc *testCluster) transferLeadership(from, to int) {
	tc.t.Helper()
	if err := tc.server(from).raft.LeadershipTransferToServer(raft.ServerID(tc.cfgs[to].ID), raft.ServerAddress(tc.cfgs[to].RaftAddr)).Error(); err != nil {
		tc.t.Fatal(err)
	}
	eventually(tc.t, 20*time.Second, "the new leader", func() bool { return tc.waitLeader() == to })
}

func (tc *testCluster) followers(leader int) []int {
	var out []int
	for i := range tc.servers {
		if i != leader && tc.server(i) != nil {
			out = append(out, i)
		}
	}
	return out
}

func (tc *testCluster) endpoints() []string {
	var out []string
	for _, c := range tc.cfgs {
		out = append(out, c.GRPCAddr)
	}
	return out
}

func (tc *testCluster) client(ctx context.Context) *client.Client {
	tc.t.Helper()
	c, err := client.New(ctx, client.Config{Endpoints: tc.endpoints(), AttemptTimeout: 2 * time.Second})
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { c.Close() })
	return c
}

// waitConverged waits until every running member applied the same index
// and holds the same state hash (invariant 2).
func (tc *testCluster) waitConverged() {
	tc.t.Helper()
	eventually(tc.t, 20*time.Second, "all members to converge", func() bool {
		var idx uint64
		var h [32]byte
		first := true
		for i := range tc.servers {
			s := tc.server(i)
			if s == nil {
				continue
			}
			var si uint64
			var sh [32]byte
			s.fsm.View(func(st *fsm.State) { si, sh = st.AppliedIndex(), st.Hash() })
			if first {
				idx, h, first = si, sh, false
			} else if si != idx || sh != h {
				return false
			}
		}
		return true
	})
}

func raftStateOf(s *Server) raft.RaftState { return s.raft.State() }
