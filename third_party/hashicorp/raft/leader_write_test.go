// Copyright (c) Logbook authors.
// SPDX-License-Identifier: MPL-2.0

package raft

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// gatedLogs is a log store whose writes can be held (until the gate opens)
// or failed once.
type gatedLogs struct {
	LogStore

	mu       sync.Mutex
	gate     chan struct{}
	failNext error
}

func (g *gatedLogs) StoreLog(l *Log) error { return g.StoreLogs([]*Log{l}) }

func (g *gatedLogs) StoreLogs(logs []*Log) error {
	g.mu.Lock()
	gate, fail := g.gate, g.failNext
	g.failNext = nil
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	return g.LogStore.StoreLogs(logs)
}

// hold makes writes wait until the returned function is called.
func (g *gatedLogs) hold() (release func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.gate = nil
			g.mu.Unlock()
			close(gate)
		})
	}
}

func (g *gatedLogs) failOnce(err error) {
	g.mu.Lock()
	g.failNext = err
	g.mu.Unlock()
}

func makeGatedCluster(t *testing.T, parallel bool) (*cluster, []*gatedLogs) {
	conf := inmemConfig(t)
	conf.ParallelLeaderWrite = parallel
	gated := make([]*gatedLogs, 3)
	c := MakeClusterCustom(t, &MakeClusterOpts{
		Peers:     3,
		Bootstrap: true,
		Conf:      conf,
		WrapLogs: func(i int, logs LogStore) LogStore {
			gated[i] = &gatedLogs{LogStore: logs}
			return gated[i]
		},
	})
	return c, gated
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func storeLast(t *testing.T, s LogStore) uint64 {
	t.Helper()
	last, err := s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	return last
}

// The followers get and store a new entry while the leader's own write of
// it is still going on; nobody commits or applies it until the leader's
// write is done.
func TestParallelLeaderWrite_ReplicatesWhileLeaderWrites(t *testing.T) {
	c, gated := makeGatedCluster(t, true)
	defer c.Close()

	leader := c.Leader()
	li := c.IndexOf(leader)
	if err := leader.Apply([]byte("first"), time.Second).Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	before := leader.LastIndex()

	release := gated[li].hold()
	defer release() // before c.Close, should the test fail while held
	f := leader.Apply([]byte("second"), 0)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()

	idx := before + 1
	waitFor(t, "the followers to store the new entry", func() bool {
		for i, s := range c.stores {
			if i != li && storeLast(t, s) < idx {
				return false
			}
		}
		return true
	})
	if got := storeLast(t, c.stores[li]); got >= idx {
		t.Fatalf("the leader's store holds index %d while its write is held", got)
	}
	select {
	case err := <-done:
		t.Fatalf("the apply returned (%v) before the leader wrote the entry", err)
	default:
	}
	for i, r := range c.rafts {
		if r.AppliedIndex() >= idx || r.CommitIndex() >= idx {
			t.Fatalf("server %d committed (%d) or applied (%d) index %d before the leader wrote it",
				i, r.CommitIndex(), r.AppliedIndex(), idx)
		}
	}

	release()
	if err := <-done; err != nil {
		t.Fatalf("apply after the write: %v", err)
	}
	if got := storeLast(t, c.stores[li]); got < idx {
		t.Fatalf("the leader's store holds %d after the apply, want %d", got, idx)
	}
	c.WaitForReplication(2)
	c.EnsureSame(t)
}

// Without the option, the leader writes first: the followers see nothing
// while its write is held (the behaviour the test above departs from).
func TestParallelLeaderWrite_OffWritesFirst(t *testing.T) {
	c, gated := makeGatedCluster(t, false)
	defer c.Close()

	leader := c.Leader()
	li := c.IndexOf(leader)
	if err := leader.Apply([]byte("first"), time.Second).Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	before := leader.LastIndex()
	release := gated[li].hold()
	defer release()
	f := leader.Apply([]byte("second"), 0)
	// Nothing to poll for: give replication the time it takes in the test
	// above many times over, then look.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		for i, s := range c.stores {
			if i != li && storeLast(t, s) > before {
				t.Fatalf("follower %d stored index %d before the leader wrote it", i, before+1)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	if err := f.Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// A failed write makes the leader step down, as a failed StoreLogs does
// without the option; its log is again what its store holds, and the
// cluster goes on with the same entries everywhere.
func TestParallelLeaderWrite_FailedWriteStepsDown(t *testing.T) {
	c, gated := makeGatedCluster(t, true)
	defer c.Close()

	leader := c.Leader()
	li := c.IndexOf(leader)
	if err := leader.Apply([]byte("first"), time.Second).Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	release := gated[li].hold()
	defer release()
	gated[li].failOnce(errors.New("disk on fire"))
	f := leader.Apply([]byte("second"), 0)
	// Hold the failing write until the followers have the entry: the
	// leader has replicated what it never wrote.
	waitFor(t, "the followers to store the new entry", func() bool {
		for i, s := range c.stores {
			if i != li && storeLast(t, s) <= leader.LastIndex()-1 {
				return false
			}
		}
		return true
	})
	release()
	if err := f.Error(); err == nil {
		t.Fatalf("apply succeeded although the leader's write failed")
	}
	waitFor(t, "the leader to step down", func() bool { return leader.State() != Leader })

	// A leader again (maybe the same server, its store works again), and
	// every server ends with the same entries: "second" was on a quorum of
	// followers, so the new term may commit it; "third" is committed.
	var next *Raft
	waitFor(t, "a new leader", func() bool {
		next = c.Leader()
		return next != nil
	})
	if err := next.Apply([]byte("third"), time.Second).Error(); err != nil {
		t.Fatalf("apply on the new leader: %v", err)
	}
	waitFor(t, "every store to hold the new leader's entries", func() bool {
		want := next.LastIndex()
		for _, s := range c.stores {
			if storeLast(t, s) < want {
				return false
			}
		}
		return true
	})
	c.EnsureSame(t)
}
