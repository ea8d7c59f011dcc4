package blocks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// Bounds of the work one heartbeat reply carries and one monitor cycle
// does.
const (
	maxInvalidatePerBeat = 1000
	// maxRecoveriesPerBeat bounds the recover commands of one heartbeat
	// reply (the rest come with the next ones, oldest recovery first).
	maxRecoveriesPerBeat = 64
	// maxReplChecksPerCycle bounds the dirty blocks one replication cycle
	// checks (the rest wait for the next).
	maxReplChecksPerCycle = 100000
)

// invalidateChecksPerBeat bounds the replicas a heartbeat checks for
// invalidation, from each source (rechecks, the sweep): a node with a
// million replicas has each swept every ~31 heartbeats, one with at most
// this many at every heartbeat. A variable for tests.
var invalidateChecksPerBeat = 1 << 15

// registeredNode returns the node's record, or ErrNodeNotRegistered.
func (m *Manager) registeredNode(id string) (*fsmpb.NodeRecord, error) {
	var n *fsmpb.NodeRecord
	m.fsm.View(func(st *fsm.State) { n, _ = st.Node(id) })
	if n == nil {
		return nil, fmt.Errorf("%w: %q", ErrNodeNotRegistered, id)
	}
	return n, nil
}

// setStorages records a node's storage stats (caller holds f.mu).
func (n *nodeSoft) setStorages(reps []Storage) {
	n.storages = make(map[string]Storage, len(reps))
	n.free = 0
	for _, r := range reps {
		n.storages[r.ID] = r
		if !r.Failed {
			n.free += r.Free
		}
	}
}

// Register replicates node's registration (its registration times are
// the state machine's to set) and starts the node over in the soft state:
// its replicas do not count again before it sends a full report. It
// returns the registered record.
func (m *Manager) Register(node *fsmpb.NodeRecord, storages []Storage) (*fsmpb.NodeRecord, error) {
	r, err := m.propose(&fsmpb.RegisterNodeOp{Node: node})
	if err != nil {
		return nil, err
	}
	f := m.locked()
	term := f.term
	n := f.node(node.Id)
	n.lastHeartbeat = time.Now()
	n.setStorages(storages)
	// A (re-)registered node sends a full report before its replicas
	// count again; its blocks are judged without them meanwhile.
	n.fullReport = false
	old := n.replicas // no longer written once replaced
	n.setReplicas(map[uint64]softReplica{}, ReplicaCounts{})
	n.lastFullReport, n.lastIncremental = time.Time{}, time.Time{}
	f.mu.Unlock()
	m.forgetChunked(term, n, slices.Collect(maps.Keys(old)))
	m.log.Info("storage node registered", "node", node.Id, "grpc-addr", node.GrpcAddr)
	return r.Result.GetNode(), nil
}

// Heartbeat records a registered node's heartbeat (liveness, storages,
// cache report) and answers with its work.
func (m *Manager) Heartbeat(hb Heartbeat) (HeartbeatReply, error) {
	rec, err := m.registeredNode(hb.NodeID)
	if err != nil {
		return HeartbeatReply{}, err
	}
	now := time.Now()
	f := m.locked()
	n := f.node(hb.NodeID)
	n.lastHeartbeat = now
	n.dead = false
	n.setStorages(hb.Storages)
	f.setCacheReport(n, hb.Cache)
	reply := HeartbeatReply{SafeMode: f.safeMode}
	f.mu.Unlock()
	for _, r := range hb.Storages {
		if !slices.Contains(rec.StorageIds, r.ID) {
			// A storage the registration does not list: register again.
			reply.Work.ReRegister = true
			break
		}
	}
	m.nodeWork(hb.NodeID, now, &reply.Work)
	return reply, nil
}

// nodeWork fills w with the work for node id, derived from the FSM
// (recoveries whose primary it is) and from the leader's soft state (full
// report request, transfers, invalidations outside safe mode, cache
// commands).
func (m *Manager) nodeWork(id string, now time.Time, w *Work) {
	m.readRemovals()
	var recs []*fsmpb.BlockRecord
	nodes := map[string]*fsmpb.NodeRecord{}
	m.fsm.View(func(st *fsm.State) {
		recs = st.RecoveriesOfPrimary(id)
		recs = recs[:min(len(recs), maxRecoveriesPerBeat)]
		for _, n := range st.Nodes() {
			nodes[n.Id] = n
		}
	})
	f := m.locked()
	locs := make([][]string, len(recs))
	for i, b := range recs {
		locs[i] = f.recoveryLocationsLocked(b.ExpectedLocations, now, m.cfg.NodeStaleInterval, m.cfg.NodeDeadInterval)
	}
	n := f.node(id)
	w.SendFullReport = !n.fullReport
	safe := f.safeMode
	transfers, excess := n.takeWorkLocked()
	w.Cache, w.Uncache = n.cache.takeWork(now, m.cfg.CacheTimeout)
	var check []replicaCheck
	if !safe && n.fullReport {
		check = f.takeChecksLocked(n, invalidateChecksPerBeat)
	}
	f.mu.Unlock()
	for i, b := range recs {
		w.Recover = append(w.Recover, Recover{
			BlockID: b.Id, GS: b.Gs, NumBytes: b.NumBytes, RecoveryID: b.Recovery.GetRecoveryId(), Path: b.Path,
			Locations: locations(nodes, locs[i]), DeadlineUnixNanos: b.Recovery.GetDeadlineUnixNanos(),
		})
	}
	w.Transfers = transfers
	w.Invalidate = append(excess, m.invalidations(id, check, now)...)
}

// locations names nodes ids with their gRPC addresses.
func locations(nodes map[string]*fsmpb.NodeRecord, ids []string) []Location {
	out := make([]Location, 0, len(ids))
	for _, id := range ids {
		out = append(out, Location{NodeID: id, Addr: nodes[id].GetGrpcAddr()})
	}
	return out
}

// readRemovals reads the state machine's removal feed on from where this
// term read to and marks each replica of a removed block for a recheck,
// so that a deleted file's replicas are invalidated at the next heartbeats
// however large the sweep. Removals the feed lost (to its bound or a
// restore) are left to the sweep.
func (m *Manager) readRemovals() {
	f := m.locked()
	term, from, started := f.term, f.removedAt, f.removedRead
	f.mu.Unlock()
	var ids []uint64
	next := from
	m.fsm.View(func(st *fsm.State) {
		if !started {
			next = st.RemovalFeedEnd()
			return
		}
		ids, next, _ = st.RemovedBlocks(from, 1<<16)
	})
	f = m.locked()
	if f.term != term || (f.removedRead && f.removedAt >= next) {
		f.mu.Unlock()
		return // a new term, or another heartbeat read as far
	}
	f.removedAt, f.removedRead = next, true
	f.mu.Unlock()
	m.eachChunked(term, ids, func(f *fsSoft, id uint64) { f.recheckHolders(id, "") })
}

// invalidations classifies node id's replicas check with
// leaserecovery.ReconcileReplica: replicas of deleted (unknown) blocks,
// and replicas whose GS is older than their COMMITTED/COMPLETE block's
// while another live node holds a good copy, are invalidated. Those left
// unjudged by the per-heartbeat bound are rechecked at the next heartbeat.
func (m *Manager) invalidations(id string, check []replicaCheck, now time.Time) []*fsmpb.BlockRef {
	if len(check) == 0 {
		return nil
	}
	stale := m.cfg.NodeStaleInterval
	blocks := make([]*fsmpb.BlockRecord, len(check))
	var maxGS uint64
	chunk := m.lookupChunk()
	for i := 0; i < len(check); i += chunk {
		end := min(i+chunk, len(check))
		m.fsm.View(func(st *fsm.State) {
			for j := i; j < end; j++ {
				blocks[j], _ = st.Block(check[j].id)
			}
			// The highest GS allocated (NextGS is not yet), read with the
			// last lookups: no block looked up has a newer one.
			maxGS = st.NextGS() - 1
		})
	}
	var out []*fsmpb.BlockRef
	f := m.locked()
	defer f.mu.Unlock()
	n := f.node(id)
	for i, r := range check {
		if len(out) >= maxInvalidatePerBeat {
			for _, rest := range check[i:] {
				if _, ok := n.replicas[rest.id]; ok {
					n.markRecheck(rest.id)
				}
			}
			break
		}
		var stored *lr.Block
		b := blocks[i]
		if b != nil {
			rb := ruleBlock(b, 0)
			stored = &rb
		}
		rep := lr.ReportedReplica{Node: lr.NodeID(id), ID: r.id, GS: r.gs, NumBytes: r.numBytes, State: r.state}
		rc := lr.ReconcileReplica(stored, rep, lr.ReportContext{MaxGS: maxGS, Location: true})
		switch {
		case rc.Action == lr.ReportInvalidate:
			out = append(out, &fsmpb.BlockRef{Id: r.id, Gs: r.gs, NumBytes: uint64(max(r.numBytes, 0))})
		case rc.Action == lr.ReportMarkCorrupt && b != nil && r.gs < b.Gs &&
			(b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE || b.State == fsmpb.BlockState_BLOCK_STATE_COMMITTED):
			// Never the last good copy.
			if f.finalizedAt(r.id, b.Gs, int64(b.NumBytes), now, stale) >= 1 {
				out = append(out, &fsmpb.BlockRef{Id: r.id, Gs: r.gs, NumBytes: uint64(max(r.numBytes, 0))})
			}
		}
	}
	return out
}

// BlockReport installs a registered node's full block report: its
// replicas on storages that have not failed become what the leader
// counts, the blocks whose replicas changed are checked for replication,
// and the blocks it no longer reports are taken off it.
func (m *Manager) BlockReport(ctx context.Context, nodeID string, storages []StorageReplicas) error {
	if _, err := m.registeredNode(nodeID); err != nil {
		return err
	}
	var registered []string
	m.fsm.View(func(st *fsm.State) {
		for _, n := range st.Nodes() {
			registered = append(registered, n.Id)
		}
	})
	// The soft state's lock, which every node's heartbeats and reports
	// wait for, is held only to swap the node's replicas: they are
	// gathered and indexed before, and the blocks that changed are marked
	// for the replication check after, a chunk at a time. Only those that
	// changed, as HDFS's report diff: a block this node reports as it was
	// holds the same good replicas as before, so its check would find what
	// the last one found, and a large node's periodic report would bury the
	// blocks that do need a check under its own.
	total := 0
	for _, st := range storages {
		total += len(st.Replicas)
	}
	reps := make(map[uint64]softReplica, total)
	ids := make([]uint64, 0, total)
	var byState ReplicaCounts
	for _, st := range storages {
		if st.Failed {
			continue
		}
		for _, r := range st.Replicas {
			if was, dup := reps[r.BlockID]; !dup {
				ids = append(ids, r.BlockID)
			} else {
				byState.add(was.state, -1)
			}
			byState.add(r.State, 1)
			reps[r.BlockID] = softReplica{storage: st.StorageID, gs: r.GS, numBytes: r.NumBytes, state: r.State}
		}
	}
	term, n, old, err := m.installReport(ctx, nodeID, reps, byState, ids, registered)
	if err != nil {
		return err
	}
	m.eachChunked(term, ids, func(f *fsSoft, id uint64) {
		// reps is written only under f.mu (incremental reports); one
		// that changed it since the swap marked the block itself.
		if was, ok := old[id]; !ok || was != reps[id] {
			f.markDirty(id)
		}
	})
	slices.Sort(ids)
	var dropped []uint64
	for bid := range old {
		if _, found := slices.BinarySearch(ids, bid); !found {
			dropped = append(dropped, bid)
		}
	}
	m.forgetChunked(term, n, dropped)
	return nil
}

// installReport makes reps (of block ids) node id's replicas: it lists the
// node under each block in the holder index, lookupChunk per hold of the
// soft state's lock, then swaps the map in. It returns the term it did so
// in, the node's soft record and its previous replicas. One full report
// is installed at a time (Manager.fullReports): a report's holders must
// stay listed until its swap, which a concurrent one for the same node
// could undo. A term that moves on meanwhile starts it over (the new
// term's index is empty).
func (m *Manager) installReport(ctx context.Context, id string, reps map[uint64]softReplica, byState ReplicaCounts, ids []uint64, registered []string) (uint64, *nodeSoft, map[uint64]softReplica, error) {
	m.fullReports.Lock()
	defer m.fullReports.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, nil, nil, err // the node gave up waiting
	}
	for range 3 {
		f := m.locked()
		term := f.term
		n := f.node(id)
		n.incoming = reps
		f.mu.Unlock()
		if !m.eachChunked(term, ids, func(f *fsSoft, bid uint64) { f.indexHolder(bid, n) }) {
			continue
		}
		f = m.locked()
		if f.term != term {
			f.mu.Unlock()
			continue
		}
		old := n.replicas // no longer written once replaced
		n.setReplicas(reps, byState)
		n.lastFullReport = time.Now()
		n.incoming = nil
		n.invalidating = nil
		n.fullReport = true
		n.dead = false
		f.updateSafeMode(registered, time.Now(), m.cfg.NodeStaleInterval)
		f.mu.Unlock()
		return term, n, old, nil
	}
	return 0, nil, nil, ErrReportInterrupted
}

// eachChunked calls fn on each of ids with the soft state locked,
// lookupChunk ids per hold of its lock (which every node's heartbeats and
// reports wait for), while the term is still term. It reports whether it
// got through them all.
func (m *Manager) eachChunked(term uint64, ids []uint64, fn func(f *fsSoft, id uint64)) bool {
	for chunk := range slices.Chunk(ids, m.lookupChunk()) {
		f := m.locked()
		if f.term != term {
			f.mu.Unlock()
			return false
		}
		for _, id := range chunk {
			fn(f, id)
		}
		f.mu.Unlock()
	}
	return true
}

// IncrementalReport applies a registered node's incremental report.
func (m *Manager) IncrementalReport(nodeID string, changes []Change) error {
	if _, err := m.registeredNode(nodeID); err != nil {
		return err
	}
	f := m.locked()
	defer f.mu.Unlock()
	n := f.node(nodeID)
	n.lastIncremental = time.Now()
	for _, c := range changes {
		r := c.Replica
		f.markDirty(r.BlockID)
		if c.Deleted {
			f.deleteReplica(n, r.BlockID)
			delete(n.invalidating, r.BlockID)
			continue
		}
		f.setReplica(n, r.BlockID, softReplica{storage: c.StorageID, gs: r.GS, numBytes: r.NumBytes, state: r.State})
		n.markRecheck(r.BlockID)
		if r.State == lr.ReplicaFinalized {
			// A new good copy: the others' older ones may go now.
			f.recheckHolders(r.BlockID, nodeID)
		}
	}
	return nil
}

// CommitBlockSync replicates a recovery primary's commit (design §R4.2),
// with the blocks the leader vouches for as replicated. A leader in safe
// mode refuses it (design §R9 rule 12, as HDFS rejects
// commitBlockSynchronization in safe mode): it judges a recovery's
// outcome only once the nodes have reported; the primary retries until
// its deadline.
func (m *Manager) CommitBlockSync(op *fsmpb.CommitBlockSyncOp, primary string) (fsm.NamespaceResult, error) {
	if _, err := m.registeredNode(primary); err != nil {
		return fsm.NamespaceResult{}, err
	}
	if m.SafeMode() {
		return fsm.NamespaceResult{}, ErrSafeMode
	}
	if v, ok := m.viewFileOfBlock(op.BlockId); ok {
		soft := m.locked()
		op.ReplicatedBlocks = soft.replicatedLocked(v, &fsmpb.BlockRef{Id: op.BlockId, Gs: op.NewGs, NumBytes: op.NewLength}, time.Now(), m.cfg.NodeStaleInterval)
		soft.mu.Unlock()
	}
	return m.propose(op)
}

// Nodes lists the registered storage nodes (replicated) with the
// leader's soft view of each: liveness, last heartbeat, full report this
// term, replica count, storages, cache.
func (m *Manager) Nodes() NodesView {
	var recs []*fsmpb.NodeRecord
	m.fsm.View(func(st *fsm.State) { recs = st.Nodes() })
	now := time.Now()
	f := m.locked()
	defer f.mu.Unlock()
	out := NodesView{SafeMode: f.safeMode, UnderReplicated: uint64(len(f.repl.needed)),
		Missing: uint64(len(f.repl.missing)), PendingTransfers: uint64(len(f.repl.pending))}
	for _, r := range recs {
		ns := NodeStatus{Record: r, SinceHeartbeat: -1, Live: f.live(r.Id, now, m.cfg.NodeStaleInterval), Gossip: m.gossip.state(r.Id),
			Dead: f.deadLocked(r.Id, now, m.cfg.NodeDeadInterval)}
		if soft := f.nodes[r.Id]; soft != nil {
			if !soft.lastHeartbeat.IsZero() {
				ns.SinceHeartbeat = now.Sub(soft.lastHeartbeat)
			}
			ns.FullReport = soft.fullReport
			ns.Replicas = uint64(len(soft.replicas))
			ns.ReplicasByState = soft.byState
			ns.LastFullReport, ns.LastIncrementalReport = soft.lastFullReport, soft.lastIncremental
			ns.CacheCapacity, ns.CacheUsed, ns.CachedBlocks = soft.cache.capacity, soft.cache.used, uint64(len(soft.cache.cached))
			for _, st := range soft.storages {
				ns.Storages = append(ns.Storages, st)
			}
			slices.SortFunc(ns.Storages, func(a, b Storage) int { return strings.Compare(a.ID, b.ID) })
		}
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}
