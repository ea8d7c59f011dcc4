package coordserver

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/poll"
	"github.com/logbookhq/logbook/internal/testports"
)

// testCluster is this package's tests' view of a Cluster: real
// coordinators (real Raft, raft-wal, TCP on 127.0.0.1, gossip), with faults
// injected by stopping members abruptly and by cutting the Raft network
// between them; failures end the test.
type testCluster struct {
	*Cluster
	t testing.TB
}

type clusterOpt func(i int, c *Config)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 100}))
}

// testTimings are the tests' Raft timings: short, so elections and
// failovers take well under a second; still well above loopback RTT under
// -race.
func testTimings(c *Config) {
	// Tests write no 64 MiB zeroed segments (TestWALPrefill* cover them).
	c.WALPrefill = false
	c.Raft.HeartbeatTimeout = 250 * time.Millisecond
	c.Raft.ElectionTimeout = 500 * time.Millisecond
	c.Raft.LeaderLeaseTimeout = 125 * time.Millisecond
	c.Raft.CommitTimeout = 10 * time.Millisecond
	c.NoLeaderHold = 3 * time.Second
}

// testPorts gives every listener a free loopback port (testports).
func testPorts(t testing.TB) Ports {
	return PortsFrom(func(udp bool) string { return testports.Addr(t, udp) })
}

func testConfig(t testing.TB, id, dir string) Config {
	c := DefaultConfig()
	c.ID = id
	c.ClusterID = "test-cluster"
	c.DataDir = filepath.Join(dir, id)
	c.RaftAddr, c.GRPCAddr, c.GossipAddr, c.HTTPAddr = testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true), testports.Addr(t, true)
	testTimings(&c)
	c.Logger = testLogger(t).With("member", id)
	return c
}

// newTestCluster starts n coordinators c1..cn and waits for a ready
// leader; the cluster stops when the test ends.
func newTestCluster(t testing.TB, n int, opts ...clusterOpt) *testCluster {
	t.Helper()
	c, err := StartCluster(ClusterOptions{
		Coordinators: n, Dir: t.TempDir(), ClusterID: "test-cluster", CoordinatorPrefix: "c",
		Ports: testPorts(t), Logger: testLogger(t),
		Coordinator: func(i int, c *Config) {
			testTimings(c)
			for _, o := range opts {
				o(i, c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{Cluster: c, t: t}
	t.Cleanup(tc.closeAll)
	tc.waitLeader()
	return tc
}

func (tc *testCluster) start(i int) {
	tc.t.Helper()
	if err := tc.StartCoordinator(i); err != nil {
		tc.t.Fatalf("start: %v", err)
	}
}

// kill stops member i abruptly: no leadership transfer, no goodbye.
func (tc *testCluster) kill(i int) {
	tc.t.Helper()
	tc.KillCoordinator(i)
}

func (tc *testCluster) restart(i int) {
	tc.t.Helper()
	tc.kill(i)
	tc.start(i)
}

func (tc *testCluster) closeAll() { tc.Close() }

func (tc *testCluster) server(i int) *Server { return tc.Coordinator(i) }

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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader, err := tc.WaitLeader(ctx)
	if err != nil {
		tc.t.Fatal(err)
	}
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

func (tc *testCluster) endpoints() []string { return tc.Endpoints() }

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

// addNode starts one more storage node (Cluster.AddNode) with the tests'
// settings: a 100 ms heartbeat and the test logger; mod, when set, adjusts
// its config after them.
func (tc *testCluster) addNode(mod func(*nodeserver.Config)) *nodeserver.Server {
	tc.t.Helper()
	n, err := tc.AddNode(func(c *nodeserver.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.Logger = testLogger(tc.t).With("node", c.ID)
		if mod != nil {
			mod(c)
		}
	})
	if err != nil {
		tc.t.Fatal(err)
	}
	return n
}

// restartNode stops storage node n and starts it again on its data
// directory and addresses, and returns the new server.
func (tc *testCluster) restartNode(n *nodeserver.Server) *nodeserver.Server {
	tc.t.Helper()
	for i := range tc.Nodes() {
		if cfg := tc.NodeConfig(i); cfg.ID == n.ID() {
			tc.StopNode(i)
			back, err := tc.StartNode(i)
			if err != nil {
				tc.t.Fatal(err)
			}
			return back
		}
	}
	tc.t.Fatalf("no storage node %s in the cluster", n.ID())
	return nil
}
