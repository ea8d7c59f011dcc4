package blocks

import (
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// fsSoft is the leader's soft state for the file system (design §R9.6): node
// liveness, reported replicas and lease renewals. Nothing here is
// replicated; a new leader starts empty (term change) and in safe mode,
// and counts every existing lease as just renewed.
type fsSoft struct {
	mu        sync.Mutex
	term      uint64
	termStart time.Time
	nodes     map[string]*nodeSoft
	renewals  map[string]time.Time // client name → last renewal
	safeMode  bool
	safeUntil time.Time
	repl      replState
	// cacheCursor: the directive id the cache monitor's next cycle starts
	// from (cache.go).
	cacheCursor uint64
	// gossip is the server's node gossip state (its own lock, taken after
	// mu).
	gossip *nodeGossip
	// removedAt: the state machine's removal feed position this term has
	// read to (removedRead: set at the term's first read; removals before
	// it are found by the sweep, as the nodes report in full).
	removedAt   uint64
	removedRead bool
	// holders: block id → the nodes holding a replica of it; cachers:
	// → the nodes caching it or asked to (holders.go); byIndex: the nodes
	// by their index there.
	holders nodeSet
	cachers nodeSet
	byIndex []*nodeSoft
}

// nodeSoft is what the leader learned from one storage node this term.
type nodeSoft struct {
	id            string
	index         int32 // in fsSoft.byIndex
	lastHeartbeat time.Time
	storages      map[string]Storage
	free          uint64
	fullReport    bool // a full report arrived in this term
	// replicas: block id → the replica the node reported; byState counts
	// them by state (index: lr.ReplicaState), kept with every change.
	replicas map[uint64]softReplica
	byState  ReplicaCounts
	// When this leader took the node's last full and incremental reports
	// (zero: none this term).
	lastFullReport, lastIncremental time.Time
	// incoming: the full report being installed (indexed ahead of its
	// swap into replicas; nil otherwise).
	incoming map[uint64]softReplica
	// dead: silent for longer than the dead interval; its replicas were
	// dropped and it must report in full again.
	dead bool
	// Work for the next heartbeat reply: transfers it is the source of
	// and excess replicas to delete.
	transfers  []Transfer
	invalidate []*fsmpb.BlockRef
	// invalidating: blocks the leader had this node delete and that it has
	// not reported deleted yet; the node is no target for them meanwhile.
	invalidating map[uint64]struct{}
	// cache: the node's cache report and cache work (cache.go).
	cache nodeCache
	// Which replicas the next heartbeat checks for invalidation
	// (nodeCommands): recheck holds those reported since, or whose block
	// the state machine removed, oldest first; sweep is a pass over all of
	// them, walked a bounded slice per heartbeat from sweepAt. next is the
	// next pass's list while it is built in the background (a large
	// node's).
	recheck idQueue
	sweep   []uint64
	sweepAt int
	next    *sweepBuild
}

// sweepBuild is a sweep list built in the background from a node's
// replicas, a chunk per hold of the soft state's lock (buildSweep). Its
// fields are read and written under that lock.
type sweepBuild struct {
	ids  []uint64
	done bool // every replica was listed
	stop bool // the replicas were replaced or the term moved on: abandoned
}

// sweepBuildMin: a node with at most this many replicas has its sweep list
// rebuilt at once, in the heartbeat that starts the pass (a hold of ~2 ms);
// a larger one's is built in the background, sweepBuildChunk ids per hold,
// so that a node with a million replicas never holds the lock for the
// 18-35 ms a rebuild in one hold takes, once every ~31 heartbeats
// (docs/benchmarks.md, "Storage node: write, read, restart, block
// report").
// Variables for tests.
var (
	sweepBuildMin   = 1 << 16
	sweepBuildChunk = 1 << 12
)

type softReplica struct {
	storage  string
	gs       uint64
	numBytes int64
	state    lr.ReplicaState
}

// ReplicaCounts counts a node's replicas by state, indexed by
// lr.ReplicaState (FINALIZED, RBW, RWR, RUR, TEMPORARY).
type ReplicaCounts [lr.ReplicaTemporary + 1]uint64

func (c *ReplicaCounts) add(st lr.ReplicaState, d int) {
	if int(st) < len(c) {
		c[st] = uint64(int64(c[st]) + int64(d))
	}
}

// setReplicas replaces the node's replicas (a full report, or none),
// counted by state in byState, and starts its invalidation sweep over.
func (n *nodeSoft) setReplicas(reps map[uint64]softReplica, byState ReplicaCounts) {
	n.replicas, n.byState = reps, byState
	n.recheck = idQueue{}
	n.sweep, n.sweepAt = n.sweep[:0], 0
	n.stopBuild()
}

// stopBuild abandons the sweep list being built, if any.
func (n *nodeSoft) stopBuild() {
	if n.next != nil {
		n.next.stop = true
		n.next = nil
	}
}

// markRecheck has the next heartbeat check the node's replica of block id.
// A replica marked while the next sweep list is being made is listed in it
// too: the build may have passed its place in the map.
func (n *nodeSoft) markRecheck(id uint64) {
	n.recheck.add(id)
	if n.next != nil {
		n.next.ids = append(n.next.ids, id)
	}
}

// recheckHolders marks block id for a recheck on every node that reported
// a replica of it, but node except.
func (f *fsSoft) recheckHolders(id uint64, except string) {
	for h := range f.holdersOf(id) {
		if h.id != except {
			h.node.markRecheck(id)
		}
	}
}

// replicaCheck is a replica a heartbeat checks for invalidation.
type replicaCheck struct {
	id uint64
	softReplica
}

// takeChecksLocked returns the replicas node n's heartbeat checks for
// invalidation, without repeats: up to limit of those marked for a
// recheck, the longest waiting first, then the sweep's next limit. A pass
// that reached its end starts over from the current replicas at the next
// heartbeat, so a node with at
// most limit replicas has all of them checked at every heartbeat, and one
// with more has each checked every len/limit heartbeats.
//
// The new pass's list is made when the last one ends: at once for a node
// with at most sweepBuildMin replicas, else in the background (buildSweep),
// started by the heartbeat that took the last slice. A heartbeat that
// finds it still being built checks only the rechecks (the build takes
// tens of milliseconds for a million replicas; heartbeats come seconds
// apart). A replica held from the heartbeat that takes a list to the end
// of that pass is in the list: either it was held throughout the build,
// or it was reported between the build's start and the list's taking and
// marked for a recheck, which lists it again (markRecheck; at worst
// twice).
func (f *fsSoft) takeChecksLocked(n *nodeSoft, limit int) []replicaCheck {
	var rechecked map[uint64]struct{}
	ids := n.recheck.take(limit)
	if len(ids) > 0 {
		rechecked = make(map[uint64]struct{}, len(ids))
	}
	out := make([]replicaCheck, 0, len(ids))
	for _, id := range ids {
		rechecked[id] = struct{}{}
		n.recheck.done(id)
		if r, ok := n.replicas[id]; ok {
			out = append(out, replicaCheck{id, r})
		}
	}
	if n.sweepAt >= len(n.sweep) {
		switch {
		case n.next != nil && n.next.done:
			n.sweep, n.sweepAt, n.next = n.next.ids, 0, nil
		case n.next != nil: // still being built
		case len(n.replicas) > sweepBuildMin:
			f.startSweepBuild(n)
		default:
			n.sweep, n.sweepAt = n.sweep[:0], 0
			for id := range n.replicas {
				n.sweep = append(n.sweep, id)
			}
		}
	}
	end := min(n.sweepAt+limit, len(n.sweep))
	out = slices.Grow(out, end-n.sweepAt)
	for _, id := range n.sweep[n.sweepAt:end] {
		if _, dup := rechecked[id]; dup {
			continue
		}
		if r, ok := n.replicas[id]; ok {
			out = append(out, replicaCheck{id, r})
		}
	}
	n.sweepAt = end
	if n.sweepAt >= len(n.sweep) && n.next == nil && len(n.replicas) > sweepBuildMin {
		f.startSweepBuild(n) // ready by the next heartbeat
	}
	return out
}

// startSweepBuild starts building node n's next sweep list in the
// background, in the memory of the list whose pass just ended. f.mu is
// held.
func (f *fsSoft) startSweepBuild(n *nodeSoft) {
	b := &sweepBuild{ids: n.sweep[:0]}
	n.sweep, n.sweepAt, n.next = nil, 0, b
	go f.buildSweep(n.replicas, b, sweepBuildChunk)
}

// buildSweep lists the ids of reps (a node's replicas) into b, chunk per
// hold of f.mu, until done or stopped. Between holds the map may change
// (under the lock; Go's map iteration allows it): replicas held
// throughout are listed once, those removed before they were reached are
// not, and those added meanwhile may be or not (markRecheck lists them
// again). A map replaced (a full report, a dead or re-registered
// node) or a new term stops the build.
func (f *fsSoft) buildSweep(reps map[uint64]softReplica, b *sweepBuild, chunk int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := 0
	for id := range reps {
		if b.stop {
			return
		}
		b.ids = append(b.ids, id)
		if i++; i%chunk == 0 {
			f.mu.Unlock()
			runtime.Gosched() // heartbeats and reports waiting take the lock
			f.mu.Lock()
		}
	}
	b.done = !b.stop
}

// reset starts a new term: empty soft state, safe mode on.
func (f *fsSoft) reset(term uint64, now time.Time, safeTimeout time.Duration) {
	for _, n := range f.nodes {
		n.stopBuild()
	}
	f.term, f.termStart = term, now
	f.nodes = map[string]*nodeSoft{}
	f.renewals = map[string]time.Time{}
	f.safeMode, f.safeUntil = true, now.Add(safeTimeout)
	f.repl = newReplState()
	f.cacheCursor = 0
	f.removedAt, f.removedRead = 0, false
	f.holders, f.cachers, f.byIndex = newNodeSet(), newNodeSet(), nil
}

// node returns (creating) the soft record of node id.
func (f *fsSoft) node(id string) *nodeSoft {
	n := f.nodes[id]
	if n == nil {
		n = &nodeSoft{id: id, index: int32(len(f.byIndex)), storages: map[string]Storage{}, replicas: map[uint64]softReplica{}}
		f.nodes[id] = n
		f.byIndex = append(f.byIndex, n)
	}
	return n
}

// live reports whether node id heartbeated within the stale interval and
// gossip does not report it failed.
func (f *fsSoft) live(id string, now time.Time, stale time.Duration) bool {
	n := f.nodes[id]
	return n != nil && !n.lastHeartbeat.IsZero() && now.Sub(n.lastHeartbeat) < stale && (f.gossip == nil || !f.gossip.down(id))
}

// deadLocked reports whether node id is dead for this leader: declared
// dead (markDeadLocked), or not heard from at all since the term began
// longer than the dead interval ago. A new leader counts a node as heard
// from at the term's start, so a node that died before the election is
// dead one dead interval into the term, as it would have been for a
// leader that had heard its last heartbeat then.
func (f *fsSoft) deadLocked(id string, now time.Time, dead time.Duration) bool {
	if n := f.nodes[id]; n != nil && !n.lastHeartbeat.IsZero() {
		return n.dead
	}
	return now.Sub(f.termStart) >= dead
}

// recoveryLocationsLocked is the locations a recovery command names
// (design §R3.4, §R7.16, leaserecovery.RecoveryLocations): the expected
// locations heard from within the stale interval (and not failed in
// gossip), or every one not dead when that leaves at most one. A node not
// heard from yet this term counts as heard from at the term's start (as
// leases count as renewed then): a new leader does not leave a healthy
// node out of a recovery only because its first heartbeat is still on the
// way, and lists a node that died before the election only until it is
// dead by that count (deadLocked).
func (f *fsSoft) recoveryLocationsLocked(expected []string, now time.Time, stale, dead time.Duration) []string {
	ls := make([]lr.Location, 0, len(expected))
	for _, id := range expected {
		l := lr.Location{Node: lr.NodeID(id), Alive: !f.deadLocked(id, now, dead), LastHeartbeat: f.termStart}
		if n := f.nodes[id]; n != nil && !n.lastHeartbeat.IsZero() {
			l.LastHeartbeat = time.Time{}
			if f.live(id, now, stale) {
				l.LastHeartbeat = n.lastHeartbeat
			}
		} else if f.gossip != nil && f.gossip.down(id) {
			l.LastHeartbeat = time.Time{}
		}
		ls = append(ls, l)
	}
	var out []string
	for _, id := range lr.RecoveryLocations(ls, now, stale) {
		out = append(out, string(id))
	}
	return out
}

// renewed is when holder last renewed (the term start by default).
func (f *fsSoft) renewed(holder string) time.Time {
	if t, ok := f.renewals[holder]; ok {
		return t
	}
	return f.termStart
}

// finalizedAt counts live nodes that reported block id FINALIZED at gs
// and length n.
func (f *fsSoft) finalizedAt(id, gs uint64, n int64, now time.Time, stale time.Duration) int {
	c := 0
	for h := range f.holdersOf(id) {
		r := h.replica
		if r.state == lr.ReplicaFinalized && r.gs == gs && r.numBytes == n && f.live(h.id, now, stale) &&
			!f.corruptLocked(id, h.id, r) {
			c++
		}
	}
	return c
}

// reporters returns the nodes that reported block id, sorted.
func (f *fsSoft) reporters(id uint64) []string {
	var out []string
	for h := range f.holdersOf(id) {
		out = append(out, h.id)
	}
	sort.Strings(out)
	return out
}

// reported returns the reports of block id, sorted by node.
func (f *fsSoft) reported(id uint64) []Reported {
	var out []Reported
	for _, nid := range f.reporters(id) {
		r := f.nodes[nid].replicas[id]
		out = append(out, Reported{NodeID: nid, State: r.state, GS: r.gs, NumBytes: r.numBytes, Corrupt: f.corruptLocked(id, nid, r),
			Cached: f.nodes[nid].cache.has(id)})
	}
	return out
}

// updateSafeMode leaves safe mode once every registered node sent a full
// report this term — a node not heard from at all for the stale interval
// since the term began is not waited for (it is down; its blocks are
// judged without it) — or the timeout passed. It never re-enters it
// within a term.
func (f *fsSoft) updateSafeMode(registered []string, now time.Time, stale time.Duration) {
	if !f.safeMode {
		return
	}
	if now.After(f.safeUntil) {
		f.safeMode = false
		return
	}
	for _, id := range registered {
		n := f.nodes[id]
		silent := (n == nil || n.lastHeartbeat.IsZero()) && now.Sub(f.termStart) >= stale
		if !silent && (n == nil || !n.fullReport) {
			return
		}
	}
	f.safeMode = false
}

// SafeMode reports whether this leader is in safe mode (no invalidations,
// no re-replication yet). A follower answers true: it holds no soft state.
func (m *Manager) SafeMode() bool {
	if !m.lead.IsLeader() {
		return true
	}
	f := m.locked()
	defer f.mu.Unlock()
	return f.safeMode
}

func toRuleBlockState(st fsmpb.BlockState) lr.BlockState {
	switch st {
	case fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION:
		return lr.BlockUnderConstruction
	case fsmpb.BlockState_BLOCK_STATE_UNDER_RECOVERY:
		return lr.BlockUnderRecovery
	case fsmpb.BlockState_BLOCK_STATE_COMMITTED:
		return lr.BlockCommitted
	case fsmpb.BlockState_BLOCK_STATE_COMPLETE:
		return lr.BlockComplete
	}
	return lr.BlockStateUnspecified
}

// ruleBlock is b as the rules see it, with live the count of live
// finalized replicas at its GS and length.
func ruleBlock(b *fsmpb.BlockRecord, live int) lr.Block {
	rb := lr.Block{ID: b.Id, GS: b.Gs, NumBytes: int64(b.NumBytes), State: toRuleBlockState(b.State), LiveReplicas: live}
	for _, e := range b.ExpectedLocations {
		rb.Expected = append(rb.Expected, lr.NodeID(e))
	}
	if r := b.Recovery; r != nil {
		rb.Recovery = lr.Recovery{ID: r.RecoveryId, Primary: lr.NodeID(r.Primary), Attempt: int(r.Attempt), Deadline: time.Unix(0, r.DeadlineUnixNanos)}
		for _, t := range r.TriedPrimaries {
			rb.Recovery.Chosen = append(rb.Recovery.Chosen, lr.NodeID(t))
		}
	}
	return rb
}

// countReplicas counts reps by state (tests; the manager counts as it
// builds a report).
func countReplicas(reps map[uint64]softReplica) ReplicaCounts {
	var c ReplicaCounts
	for _, r := range reps {
		c.add(r.state, 1)
	}
	return c
}
