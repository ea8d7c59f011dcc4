package blocks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/membership"
)

// Leadership is what the manager needs of the Raft node. Implementations
// answer from memory and never block.
type Leadership interface {
	// Term is the current Raft term; the soft state starts over when it
	// moves on.
	Term() uint64
	// IsLeader reports whether this member is the leader now.
	IsLeader() bool
	// LeaderReady reports whether this member leads and has applied the
	// first entry of its term (its state machine has everything
	// committed before it).
	LeaderReady() bool
	// LogFormat is the log format this member writes proposals in (the
	// replicated one, capped by what this build writes).
	LogFormat() uint32
}

// Proposer replicates one namespace op through the log. It returns once
// the op is applied, with the state machine's result; a refusal by the
// state machine is the returned error (the result's Err), as is a failure
// to replicate (not the leader, shutting down). It may be called with the
// soft state unlocked only.
type Proposer interface {
	ProposeNamespace(op *fsmpb.NamespaceOp) (fsm.NamespaceResult, error)
}

// Gossip is the membership the manager follows for the storage nodes
// that joined the coordinators' gossip (membership.Memberlist).
type Gossip interface {
	Events() <-chan membership.Event
	Members() []membership.Member
}

// Manager is the leader's block manager. Its methods are safe for
// concurrent use; on a follower they answer from an empty soft state
// (callers route file-system calls to the leader).
type Manager struct {
	cfg    Config
	log    *slog.Logger
	fsm    *fsm.FSM
	lead   Leadership
	prop   Proposer
	gossip nodeGossip
	met    metrics

	soft fsSoft
	// fullReports: one storage node's full block report is installed at
	// a time (installReport).
	fullReports sync.Mutex
}

// New returns a manager over the state machine f. cfg is defaulted
// (Config.WithDefaults) and must be valid.
func New(cfg Config, log *slog.Logger, f *fsm.FSM, lead Leadership, prop Proposer) *Manager {
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{cfg: cfg.WithDefaults(), log: log, fsm: f, lead: lead, prop: prop}
	m.met = newMetrics(m)
	return m
}

// Config is the manager's configuration (defaulted).
func (m *Manager) Config() Config { return m.cfg }

// Run runs the leader's monitors (leases, replication, cache) and the
// storage nodes' gossip watch (when g is not nil) until ctx ends. Each
// monitor acts only while this member is the ready leader and the
// replicated log format carries what it proposes.
func (m *Manager) Run(ctx context.Context, g Gossip) {
	var wg sync.WaitGroup
	wg.Go(func() { m.leaderEvery(ctx, m.cfg.LeaseCheckInterval, fsm.NamespaceFormat, m.leaseCycle) })
	wg.Go(func() { m.leaderEvery(ctx, m.cfg.ReplicationCheckInterval, fsm.NamespaceFormat, m.replicationCycle) })
	wg.Go(func() { m.leaderEvery(ctx, m.cfg.CacheCheckInterval, fsm.CacheFormat, m.cacheCycle) })
	if g != nil {
		wg.Go(func() { m.watchNodeGossip(ctx, g) })
	}
	wg.Wait()
}

// leaderEvery runs cycle every interval while this member is the ready
// leader and the replicated log format is at least format.
func (m *Manager) leaderEvery(ctx context.Context, interval time.Duration, format uint32, cycle func(now time.Time)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if m.lead.LeaderReady() && m.lead.LogFormat() >= format {
			cycle(time.Now())
		}
	}
}

// locked returns the soft state locked for the current term (reset when
// the term moved on). The caller unlocks f.mu.
func (m *Manager) locked() *fsSoft {
	f := &m.soft
	f.mu.Lock()
	f.gossip = &m.gossip
	if term := m.lead.Term(); term != f.term || f.nodes == nil {
		f.reset(term, time.Now(), m.cfg.SafeModeTimeout)
	}
	return f
}

// lookupChunk bounds the block lookups made under one hold of the state
// machine's read lock, and the blocks handled under one hold of the soft
// state's lock.
func (m *Manager) lookupChunk() int { return m.cfg.LookupChunk }

// propose replicates op (Proposer) and returns its result.
func (m *Manager) propose(op any) (fsm.NamespaceResult, error) {
	return m.prop.ProposeNamespace(NamespaceOp(op))
}
