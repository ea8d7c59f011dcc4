package raftnode

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logbookhq/logbook/internal/testports"
)

// countFSM counts the commands it applies.
type countFSM struct{ n int }

func (f *countFSM) Apply(*raft.Log) any                 { f.n++; return f.n }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, raft.ErrNothingNewToSnapshot }
func (f *countFSM) Restore(r io.ReadCloser) error       { return r.Close() }

func testNodeConfig(t *testing.T, dir, kind string) Config {
	return Config{
		ID: "c1", ClusterID: "test", Dir: dir, BindAddr: testports.Addr(t, false), LogStore: kind,
		Timing: Timing{HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
			SnapshotThreshold: 1 << 20, SnapshotInterval: time.Hour, TrailingLogs: 1024, MaxAppendEntries: 64},
		Logger: testLogger(t),
	}
}

// TestNodeLifecycle: a new node holds no state; bootstrapped alone it
// leads, confirms its leadership, applies, and counts itself a voter not
// removed; reopened on the same directory (either backend) it finds its
// state and its last index, and will not bootstrap again.
func TestNodeLifecycle(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBoltDB} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			n, err := Open(testNodeConfig(t, dir, kind), &countFSM{})
			if err != nil {
				t.Fatal(err)
			}
			if restarted, _ := n.Restarted(); restarted || n.Backend() != kind {
				t.Fatalf("new node: restarted %v, backend %q", restarted, n.Backend())
			}
			addr := raft.ServerAddress(n.cfg.BindAddr)
			if formed, err := n.Bootstrap([]raft.Server{{ID: "c1", Address: addr}}); !formed || err != nil {
				t.Fatalf("Bootstrap = %v, %v", formed, err)
			}
			eventually(t, 5*time.Second, "leadership", func() bool { return n.Raft().State() == raft.Leader })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := n.VerifyLeader(ctx); err != nil {
				t.Fatalf("VerifyLeader: %v", err)
			}
			if err := Await(ctx.Done(), n.Raft().Apply([]byte("x"), time.Second)); err != nil {
				t.Fatal(err)
			}
			in, known, err := n.InConfiguration()
			if !in || !known || err != nil || n.Voters() != 1 {
				t.Fatalf("InConfiguration = %v, %v, %v; voters %d", in, known, err, n.Voters())
			}
			if removed, err := n.Removed(); removed || err != nil {
				t.Fatalf("Removed = %v, %v", removed, err)
			}
			last := n.Raft().LastIndex()
			if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if err := n.VerifyLeader(ctx); err == nil {
				t.Fatal("VerifyLeader after Shutdown succeeded")
			}
			if err := n.CloseStore(); err != nil {
				t.Fatal(err)
			}

			n, err = Open(testNodeConfig(t, dir, LogStoreAuto), &countFSM{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { n.Shutdown(); n.CloseStore() }()
			if restarted, at := n.Restarted(); !restarted || at != last || n.Backend() != kind {
				t.Fatalf("reopened: restarted %v at %d (want %d), backend %q", restarted, at, last, n.Backend())
			}
			if formed, err := n.Bootstrap([]raft.Server{{ID: "c1", Address: addr}}); formed || err != nil {
				t.Fatalf("second Bootstrap = %v, %v; want false, nil", formed, err)
			}
		})
	}
}

// TestOpenRefusesOtherBackend: a directory holding one backend does not
// open as the other, and leaves nothing open behind.
func TestOpenRefusesOtherBackend(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(testNodeConfig(t, dir, LogStoreBoltDB), &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	n.CloseStore()
	if _, err := Open(testNodeConfig(t, dir, LogStoreWAL), &countFSM{}); err == nil {
		t.Fatal("a raft-boltdb directory opened as raft-wal")
	}
	// The refused open released the store: the right backend opens again.
	n, err = Open(testNodeConfig(t, dir, LogStoreBoltDB), &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	n.CloseStore()
}
