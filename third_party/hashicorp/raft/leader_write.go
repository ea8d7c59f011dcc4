// Copyright (c) Logbook authors.
// SPDX-License-Identifier: MPL-2.0

// This file is Logbook's change to hashicorp/raft: with
// Config.ParallelLeaderWrite the leader writes new entries to its own log
// store in parallel with replicating them to the followers (the Raft
// dissertation, §10.2.1), instead of writing them first and replicating
// after. See README.logbook.md.

package raft

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// stagedLogs is the log store Raft uses when ParallelLeaderWrite is on: the
// real store, plus the entries a leader has dispatched but not yet written.
// Replication reads those (GetLog) while the leader's writer stores them.
// LastIndex and FirstIndex answer from the real store only: what compaction
// and snapshots see is what is durable. Only a leader stages entries, and it
// waits for all of them to be written before it handles anything that could
// write the log another way (an AppendEntries or InstallSnapshot from a newer
// leader, a user restore) and before it stops being leader.
type stagedLogs struct {
	LogStore

	mu     sync.Mutex
	staged []*Log // contiguous indexes, oldest first
}

func newStagedLogs(store LogStore) *stagedLogs {
	return &stagedLogs{LogStore: store}
}

// GetLog serves a staged entry from memory, any other from the store.
func (s *stagedLogs) GetLog(index uint64, log *Log) error {
	s.mu.Lock()
	if n := len(s.staged); n > 0 {
		first := s.staged[0].Index
		if index >= first && index < first+uint64(n) {
			*log = *s.staged[index-first]
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	return s.LogStore.GetLog(index, log)
}

// IsMonotonic passes the store's answer through, so Raft treats a monotonic
// store (raft-wal) as one.
func (s *stagedLogs) IsMonotonic() bool {
	m, ok := s.LogStore.(MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// stage adds dispatched entries, which must follow the staged ones.
func (s *stagedLogs) stage(logs []*Log) {
	s.mu.Lock()
	s.staged = append(s.staged, logs...)
	s.mu.Unlock()
}

// pending returns the staged entries (not a copy: stage only appends past
// them and unstage only drops them once written).
func (s *stagedLogs) pending() []*Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staged[:len(s.staged):len(s.staged)]
}

// unstage drops the first n staged entries, which are now in the store.
func (s *stagedLogs) unstage(n int) {
	s.mu.Lock()
	clear(s.staged[:n])
	s.staged = s.staged[n:]
	if len(s.staged) == 0 {
		s.staged = nil
	}
	s.mu.Unlock()
}

// discard drops every staged entry (after a failed write).
func (s *stagedLogs) discard() {
	s.mu.Lock()
	clear(s.staged)
	s.staged = nil
	s.mu.Unlock()
}

// leaderWriter writes a leader's staged entries to its log store on a
// goroutine of its own, all that are staged in one StoreLogs, and counts
// the leader's own copy towards commitment only once they are written.
type leaderWriter struct {
	logs       *stagedLogs
	commitment *commitment
	commitCh   chan struct{}
	localID    ServerID

	wake    chan struct{} // buffered 1: entries were staged
	stop    chan struct{} // closed: write what is staged, then return
	done    chan struct{} // closed when the goroutine returned
	failed  chan struct{} // closed when a write failed
	durable atomic.Uint64 // the last index written
	err     error         // the failed write's error; read after failed or done is closed
}

func newLeaderWriter(logs *stagedLogs, c *commitment, commitCh chan struct{}, localID ServerID, durable uint64) *leaderWriter {
	w := &leaderWriter{
		logs:       logs,
		commitment: c,
		commitCh:   commitCh,
		localID:    localID,
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		failed:     make(chan struct{}),
	}
	w.durable.Store(durable)
	return w
}

func (w *leaderWriter) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			w.write() // whatever is still staged
			return
		}
		if !w.write() {
			return
		}
	}
}

// write stores every staged entry; false when the store failed.
func (w *leaderWriter) write() bool {
	batch := w.logs.pending()
	if len(batch) == 0 {
		return true
	}
	if err := w.logs.LogStore.StoreLogs(batch); err != nil {
		w.err = fmt.Errorf("failed to write logs %d-%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
		close(w.failed)
		return false
	}
	last := batch[len(batch)-1].Index
	w.logs.unstage(len(batch))
	w.durable.Store(last)
	w.commitment.match(w.localID, last)
	// The commit index may not move (the followers' copies already made a
	// quorum), but the leader caps it at what it has written: wake the
	// leader loop either way.
	asyncNotifyCh(w.commitCh)
	return true
}

// notify tells the writer that entries were staged.
func (w *leaderWriter) notify() { asyncNotifyCh(w.wake) }

// drain waits until every staged entry is written (or a write failed) and
// stops the writer; it is called once (stopLeaderWriter drops the writer
// first). It returns the failed write's error.
func (w *leaderWriter) drain() error {
	close(w.stop)
	<-w.done
	return w.err
}

// failedCh is closed when the writer's write failed; nil (never ready) for
// no writer.
func (w *leaderWriter) failedCh() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.failed
}

// startLeaderWriter starts a leader's writer (with ParallelLeaderWrite).
// Everything up to the last index is in the store when it starts.
func (r *Raft) startLeaderWriter() {
	if r.staged == nil {
		return
	}
	w := newLeaderWriter(r.staged, r.leaderState.commitment, r.leaderState.commitCh, r.localID, r.getLastIndex())
	r.leaderState.writer = w
	go w.run()
}

// stopLeaderWriter waits until the leader's staged entries are written and
// stops its writer. When a write failed, the entries that were not written
// are forgotten (the last log is the store's again) and the leader steps
// down, as it does when its own StoreLogs fails without the writer.
func (r *Raft) stopLeaderWriter() {
	w := r.leaderState.writer
	if w == nil {
		return
	}
	r.leaderState.writer = nil
	err := w.drain()
	if err == nil {
		return
	}
	r.logger.Error("failed to commit logs", "error", err)
	r.staged.discard()
	last, lerr := r.staged.LogStore.LastIndex()
	var term uint64
	if lerr == nil && last > 0 {
		var l Log
		if lerr = r.staged.LogStore.GetLog(last, &l); lerr == nil {
			term = l.Term
		}
	}
	if lerr != nil {
		// The store can no longer say what it holds: stop, as a restart
		// reads it afresh.
		panic(fmt.Errorf("raft: log store failed and its last entry is unknown: %v (after %w)", lerr, err))
	}
	r.setLastLog(last, term)
	r.setState(Follower)
}
