package blocks

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/google/btree"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// Re-replication and excess replicas (design §R6), the
// analogue of HDFS's RedundancyMonitor, kept in the leader's soft state:
//
//   - A block is checked when something about it changed: a report added,
//     changed or dropped one of its replicas, a node holding it died, or a
//     transfer for it timed out (the dirty set). A block not COMPLETE yet
//     stays dirty and is checked again next cycle, so it is judged once it
//     completes.
//   - Replicas count as good when they are FINALIZED at the block's GS and
//     length on a node that is not dead; a stale node's replicas still
//     count (a slow node must not trigger a storm of copies) but a stale
//     node is neither a source nor a target.
//   - Fewer good replicas (plus transfers in flight) than the file's
//     replication factor: the block is needed, with priority by how few
//     good replicas remain; each cycle the neediest blocks get a transfer
//     from a good live replica to new distinct live targets with space, at
//     most ReplicationStreams transfers in flight per source node. A block
//     with no good replica left is missing: nothing can copy it.
//   - A replica reported corrupt (ReportBadBlocks, from a reader or the
//     node's scanner) is not good; once the block has its factor of good
//     replicas again the corrupt ones are invalidated.
//   - More good replicas than the factor (and nothing in flight): the
//     extra ones are invalidated, stale nodes first, then the fullest;
//     never below the factor, so never the last good copy.
//
// Nothing here is replicated: transfers and excess invalidations are not
// journal events (they change no FSM state), and a new leader starts over
// from the nodes' full reports (safe mode holds all of it until then).
//
// A check costs the block's replicas, not the cluster's nodes: the holder
// index (holders.go) gives a block's holders, and transfer targets come
// from the live nodes kept in picking order (targetPicker).

// pendingTransfer is a transfer the leader sent and waits to see reported.
type pendingTransfer struct {
	source  string
	targets []string
	gs      uint64
	expires time.Time
}

// replState is the leader's replication soft state (reset each term).
type replState struct {
	// dirty: the blocks to check, oldest first, so that a cycle's bound
	// (a failover's reports, many open blocks that stay dirty until they
	// complete) delays a block by the cycles queued before it.
	dirty   idQueue
	needed  map[uint64]int // block id → good replicas (lower is needier)
	missing map[uint64]struct{}
	pending map[uint64]*pendingTransfer
	// corrupt: block id → node → GS of the replica reported corrupt.
	corrupt map[uint64]map[string]uint64
}

func newReplState() replState {
	return replState{
		needed:  map[uint64]int{},
		missing: map[uint64]struct{}{},
		pending: map[uint64]*pendingTransfer{},
		corrupt: map[uint64]map[string]uint64{},
	}
}

// markDirty queues block id for a check.
func (f *fsSoft) markDirty(id uint64) { f.repl.dirty.add(id) }

// alive reports whether node id's replicas count: it is not dead (a node
// that sent a report but no heartbeat yet this term counts).
func (f *fsSoft) alive(id string, now time.Time, dead time.Duration) bool {
	n := f.nodes[id]
	if n == nil || n.dead {
		return false
	}
	return n.lastHeartbeat.IsZero() || now.Sub(n.lastHeartbeat) < dead
}

// blockInfo is what a replication check needs from the FSM.
type blockInfo struct {
	block       *fsmpb.BlockRecord
	replication int
}

// replicationCycle marks dead nodes, checks the dirty blocks and schedules
// transfers for the neediest blocks. Outside safe mode only, except the
// dead-node check and the transfer timeouts.
func (m *Manager) replicationCycle(now time.Time) {
	cfg := m.cfg
	f := m.locked()
	term := f.term
	dead := m.markDeadLocked(f, now, cfg.NodeDeadInterval)
	for id, p := range f.repl.pending {
		if now.After(p.expires) {
			delete(f.repl.pending, id)
			f.markDirty(id)
			m.log.Warn("transfer not reported in time; rescheduling", "block-id", id, "source", p.source, "targets", p.targets)
		}
	}
	safe := f.safeMode
	f.mu.Unlock()
	for n, old := range dead {
		m.forgetChunked(term, n, slices.Collect(maps.Keys(old)))
	}
	if safe {
		return
	}
	f = m.locked()
	ids := f.repl.dirty.take(maxReplChecksPerCycle)
	f.mu.Unlock()

	infos, _ := m.blockInfos(ids)
	// Checked a chunk per hold of the lock: heartbeats and reports wait
	// while it is held.
	for chunk := range slices.Chunk(ids, m.lookupChunk()) {
		f = m.locked()
		for _, id := range chunk {
			if !f.repl.dirty.has(id) {
				continue
			}
			f.repl.dirty.done(id)
			info, ok := infos[id]
			switch {
			case !ok: // deleted
				delete(f.repl.needed, id)
				delete(f.repl.missing, id)
				delete(f.repl.pending, id)
				delete(f.repl.corrupt, id)
			case info.block.State != fsmpb.BlockState_BLOCK_STATE_COMPLETE:
				delete(f.repl.needed, id)
				f.markDirty(id) // judged once it completes
			default:
				m.checkBlockLocked(f, info, now, cfg)
			}
		}
		f.mu.Unlock()
	}
	f = m.locked()
	cands := f.neediestLocked(cfg.ReplicationStreams * max(len(f.nodes), 1))
	f.mu.Unlock()
	if len(cands) == 0 {
		return
	}
	infos, nodes := m.blockInfos(cands)
	f = m.locked()
	defer f.mu.Unlock()
	m.scheduleTransfersLocked(f, cands, nodes, infos, now, cfg)
}

// blockInfos reads the blocks ids (absent: deleted) and the registered
// nodes from the FSM.
func (m *Manager) blockInfos(ids []uint64) (map[uint64]blockInfo, map[string]*fsmpb.NodeRecord) {
	infos := make(map[uint64]blockInfo, len(ids))
	nodes := map[string]*fsmpb.NodeRecord{}
	// In holds of the read lock of lookupChunk blocks: a cycle checks up
	// to maxReplChecksPerCycle, and applies wait while the lock is held.
	for chunk := range slices.Chunk(ids, m.lookupChunk()) {
		m.fsm.View(func(st *fsm.State) {
			for _, id := range chunk {
				b, ok := st.Block(id)
				if !ok {
					continue
				}
				rep := 0
				if fr, ok := st.File(b.Path); ok {
					rep = int(fr.Replication)
				}
				infos[id] = blockInfo{block: b, replication: rep}
			}
		})
	}
	m.fsm.View(func(st *fsm.State) {
		for _, n := range st.Nodes() {
			nodes[n.Id] = n
		}
	})
	return infos, nodes
}

// neediestLocked returns up to limit needed blocks without a transfer in
// flight, fewest good replicas first (one pass over the needed set).
func (f *fsSoft) neediestLocked(limit int) []uint64 {
	var buckets [fsm.MaxReplication + 1][]uint64
	for id, good := range f.repl.needed {
		if _, busy := f.repl.pending[id]; busy {
			continue
		}
		good = min(max(good, 0), fsm.MaxReplication)
		if len(buckets[good]) < limit {
			buckets[good] = append(buckets[good], id)
		}
	}
	var out []uint64
	for _, b := range buckets {
		slices.Sort(b)
		out = append(out, b[:min(len(b), limit-len(out))]...)
		if len(out) >= limit {
			break
		}
	}
	return out
}

// markDeadLocked declares dead every node silent for longer than dead: its
// replicas stop counting, its queued work is dropped and, if it returns,
// it must send a full report again. It returns the dead nodes' replicas,
// whose blocks the caller marks for the check (forgetChunked) once it
// has unlocked f.
func (m *Manager) markDeadLocked(f *fsSoft, now time.Time, dead time.Duration) map[*nodeSoft]map[uint64]softReplica {
	var out map[*nodeSoft]map[uint64]softReplica
	for id, n := range f.nodes {
		if n.dead || n.lastHeartbeat.IsZero() || now.Sub(n.lastHeartbeat) < dead {
			continue
		}
		n.dead = true
		m.log.Warn("storage node dead: its replicas no longer count", "node", id, "replicas", len(n.replicas),
			"silent-for", now.Sub(n.lastHeartbeat).Round(time.Millisecond))
		if out == nil {
			out = map[*nodeSoft]map[uint64]softReplica{}
		}
		out[n] = n.replicas // no longer written once replaced
		n.setReplicas(map[uint64]softReplica{}, ReplicaCounts{})
		n.fullReport = false
		n.transfers, n.invalidate, n.invalidating = nil, nil, nil
		for bid, p := range f.repl.pending {
			if p.source == id || slices.Contains(p.targets, id) {
				delete(f.repl.pending, bid)
				f.markDirty(bid)
			}
		}
	}
	return out
}

// forgetChunked finishes taking replicas off node n (dropped from its
// replicas, which the caller swapped): it marks their blocks ids for the
// replication check and takes n off their holders, lookupChunk ids per
// hold of the soft state's lock, while the term is still term.
func (m *Manager) forgetChunked(term uint64, n *nodeSoft, ids []uint64) {
	m.eachChunked(term, ids, func(f *fsSoft, id uint64) {
		f.markDirty(id)
		f.unindexHolder(id, n)
	})
}

// checkBlockLocked classifies one COMPLETE block: enough, needed, missing
// or over-replicated (invalidating the excess).
func (m *Manager) checkBlockLocked(f *fsSoft, info blockInfo, now time.Time, cfg Config) {
	b := info.block
	var good []string
	for h := range f.holdersOf(b.Id) {
		if f.goodReplicaLocked(h.id, b, now, cfg.NodeDeadInterval) {
			good = append(good, h.id)
		}
	}
	if _, ok := f.repl.corrupt[b.Id]; ok {
		m.dropCorruptLocked(f, b, len(good), info.replication, now, cfg.NodeStaleInterval)
	}
	inFlight := 0
	if p := f.repl.pending[b.Id]; p != nil {
		if p.gs != b.Gs {
			delete(f.repl.pending, b.Id)
		} else {
			p.targets = slices.DeleteFunc(p.targets, func(t string) bool { return slices.Contains(good, t) })
			if len(p.targets) == 0 {
				delete(f.repl.pending, b.Id)
			}
			inFlight = len(p.targets)
		}
	}
	want := info.replication
	switch {
	case len(good) == 0:
		delete(f.repl.needed, b.Id)
		if _, ok := f.repl.missing[b.Id]; !ok {
			m.log.Error("block missing: no good replica on a live node", "block-id", b.Id, "gs", b.Gs, "path", b.Path)
		}
		f.repl.missing[b.Id] = struct{}{}
	case len(good)+inFlight < want:
		delete(f.repl.missing, b.Id)
		f.repl.needed[b.Id] = len(good)
	case len(good) > want && inFlight == 0:
		delete(f.repl.missing, b.Id)
		delete(f.repl.needed, b.Id)
		m.invalidateExcessLocked(f, b, good, want, now, cfg)
	default:
		delete(f.repl.missing, b.Id)
		delete(f.repl.needed, b.Id)
	}
}

// invalidateExcessLocked drops len(good)-want good replicas of b: stale
// nodes first, then the one with the least free space, then by id.
func (m *Manager) invalidateExcessLocked(f *fsSoft, b *fsmpb.BlockRecord, good []string, want int, now time.Time, cfg Config) {
	slices.SortFunc(good, func(x, y string) int {
		lx, ly := f.live(x, now, cfg.NodeStaleInterval), f.live(y, now, cfg.NodeStaleInterval)
		if lx != ly {
			if !lx {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(f.nodes[x].free, f.nodes[y].free); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, nid := range good[:len(good)-want] {
		f.dropReplicaLocked(f.nodes[nid], b.Id, b.Gs, int64(b.NumBytes))
		m.met.replExcess.Inc()
		m.log.Info("excess replica invalidated", "block-id", b.Id, "gs", b.Gs, "node", nid, "replicas", len(good), "replication", want)
	}
}

// scheduleTransfersLocked sends transfers for ids (neediest first) within
// the per-source stream limit.
func (m *Manager) scheduleTransfersLocked(f *fsSoft, ids []uint64, nodes map[string]*fsmpb.NodeRecord, infos map[uint64]blockInfo, now time.Time, cfg Config) {
	streams := map[string]int{} // node → transfers in flight as source
	targeted := map[string]int{}
	for _, p := range f.repl.pending {
		streams[p.source]++
		for _, t := range p.targets {
			targeted[t]++
		}
	}
	var live []string
	for id := range nodes {
		if f.live(id, now, cfg.NodeStaleInterval) && !f.nodes[id].dead {
			live = append(live, id)
		}
	}
	picker := newTargetPicker(f, live, targeted)
	for _, id := range ids {
		info, ok := infos[id]
		good, needed := f.repl.needed[id]
		if _, busy := f.repl.pending[id]; !ok || !needed || busy || info.block.State != fsmpb.BlockState_BLOCK_STATE_COMPLETE {
			continue
		}
		b := info.block
		var source string
		var holders []string
		for h := range f.holdersOf(id) {
			nid, r := h.id, h.replica
			holders = append(holders, nid)
			if r.state == lr.ReplicaFinalized && r.gs == b.Gs && r.numBytes == int64(b.NumBytes) &&
				f.live(nid, now, cfg.NodeStaleInterval) && streams[nid] < cfg.ReplicationStreams && !f.corruptLocked(id, nid, r) &&
				(source == "" || streams[nid] < streams[source] || streams[nid] == streams[source] && nid < source) {
				source = nid
			}
		}
		if source == "" {
			continue
		}
		cands := picker.pick(id, holders, b.NumBytes, info.replication-good)
		if len(cands) == 0 {
			continue
		}
		targets := make([]Location, 0, len(cands))
		for _, t := range cands {
			targets = append(targets, Location{NodeID: t, Addr: nodes[t].GrpcAddr})
		}
		streams[source]++
		f.repl.pending[id] = &pendingTransfer{source: source, targets: cands, gs: b.Gs, expires: now.Add(cfg.ReplicationTimeout)}
		src := f.nodes[source]
		src.transfers = append(src.transfers, Transfer{Block: &fsmpb.BlockRef{Id: id, Gs: b.Gs, NumBytes: b.NumBytes}, Targets: targets})
		m.met.replScheduled.Inc()
		m.log.Info("re-replicating block", "block-id", id, "gs", b.Gs, "path", b.Path, "good", good,
			"replication", info.replication, "source", source, "targets", cands)
	}
}

// targetPicker hands out one cycle's transfer targets: the live nodes
// with the fewest transfers targeted at them first, then the most free
// space, then by id. It keeps them in that order (a B-tree), so a block
// costs its targets and the nodes it skips (its holders, nodes deleting
// it or without space for it), not a sort of every node.
type targetPicker struct {
	f        *fsSoft
	order    *btree.BTreeG[targetKey]
	targeted map[string]int // transfers in flight or picked this cycle, by target
}

type targetKey struct {
	targeted int
	free     uint64 // bytes
	id       string
}

func targetLess(a, b targetKey) bool {
	if a.targeted != b.targeted {
		return a.targeted < b.targeted
	}
	if a.free != b.free {
		return a.free > b.free
	}
	return a.id < b.id
}

func newTargetPicker(f *fsSoft, live []string, targeted map[string]int) *targetPicker {
	p := &targetPicker{f: f, order: btree.NewG(16, targetLess), targeted: targeted}
	for _, id := range live {
		p.order.ReplaceOrInsert(p.key(id))
	}
	return p
}

func (p *targetPicker) key(id string) targetKey {
	return targetKey{p.targeted[id], p.f.nodes[id].free, id}
}

// pick returns up to need targets for block id of size bytes, none of
// them a holder or a node deleting it, and counts them targeted.
func (p *targetPicker) pick(id uint64, holders []string, size uint64, need int) []string {
	if need <= 0 {
		return nil
	}
	var out []string
	p.order.Ascend(func(k targetKey) bool {
		_, deleting := p.f.nodes[k.id].invalidating[id]
		if !slices.Contains(holders, k.id) && !deleting && k.free >= size {
			out = append(out, k.id)
		}
		return len(out) < need
	})
	for _, t := range out {
		p.order.Delete(p.key(t))
		p.targeted[t]++
		p.order.ReplaceOrInsert(p.key(t))
	}
	return out
}

// dropReplicaLocked forgets n's replica of block id and queues its
// deletion at gs.
func (f *fsSoft) dropReplicaLocked(n *nodeSoft, id, gs uint64, numBytes int64) {
	f.deleteReplica(n, id)
	n.invalidate = append(n.invalidate, &fsmpb.BlockRef{Id: id, Gs: gs, NumBytes: uint64(max(numBytes, 0))})
	if n.invalidating == nil {
		n.invalidating = map[uint64]struct{}{}
	}
	n.invalidating[id] = struct{}{}
}

// takeWorkLocked drains node n's queued transfers and excess
// invalidations (at most maxInvalidatePerBeat of those) for a heartbeat
// reply.
func (n *nodeSoft) takeWorkLocked() (transfers []Transfer, invalidate []*fsmpb.BlockRef) {
	transfers, n.transfers = n.transfers, nil
	k := min(len(n.invalidate), maxInvalidatePerBeat)
	invalidate = append(invalidate, n.invalidate[:k]...)
	n.invalidate = slices.Delete(n.invalidate, 0, k)
	return transfers, invalidate
}

// ReplicationStats reports this leader's replication state (zero on a
// follower).
func (m *Manager) ReplicationStats() ReplicationStats {
	if !m.lead.IsLeader() {
		return ReplicationStats{}
	}
	f := m.locked()
	defer f.mu.Unlock()
	st := ReplicationStats{UnderReplicated: len(f.repl.needed), Missing: len(f.repl.missing), Pending: len(f.repl.pending)}
	for _, n := range f.nodes {
		if n.dead {
			st.DeadNodes++
		}
	}
	return st
}

// MaxBadReplicas bounds one ReportBadBlocks call.
const MaxBadReplicas = 1000

// ReportBadBlocks marks the named replicas corrupt in the leader's soft
// state (as HDFS's CorruptReplicasMap, not journaled: it changes no FSM
// state) and queues their blocks for a check; it returns how many it
// accepted. Entries naming a deleted block, an unknown node or a replica
// the node does not hold at that GS are ignored. fromNode: the reporter
// is a storage node (its scanners or reads), which must be registered;
// otherwise a reader.
func (m *Manager) ReportBadBlocks(reporter string, fromNode bool, bad []BadReplica) (uint32, error) {
	if fromNode {
		if _, err := m.registeredNode(reporter); err != nil {
			return 0, err
		}
	}
	known := map[uint64]bool{}
	m.fsm.View(func(st *fsm.State) {
		for _, r := range bad {
			_, known[r.BlockID] = st.Block(r.BlockID)
		}
	})
	f := m.locked()
	defer f.mu.Unlock()
	var accepted uint32
	for _, r := range bad {
		n := f.nodes[r.NodeID]
		if !known[r.BlockID] || n == nil {
			continue
		}
		if rep, ok := n.replicas[r.BlockID]; !ok || rep.gs != r.GS {
			continue
		}
		if f.repl.corrupt[r.BlockID] == nil {
			f.repl.corrupt[r.BlockID] = map[string]uint64{}
		}
		f.repl.corrupt[r.BlockID][r.NodeID] = r.GS
		f.markDirty(r.BlockID)
		accepted++
		m.log.Warn("replica reported corrupt", "block-id", r.BlockID, "gs", r.GS, "node", r.NodeID, "reporter", reporter, "reason", r.Reason)
	}
	return accepted, nil
}

// corruptLocked reports whether node's replica r of block id was reported
// corrupt.
func (f *fsSoft) corruptLocked(id uint64, node string, r softReplica) bool {
	gs, ok := f.repl.corrupt[id][node]
	return ok && gs == r.gs
}

// dropCorruptLocked invalidates block b's corrupt replicas once it has
// want good ones, or has a good one and no live node without a replica to
// copy it to (the corrupt copy's node becomes the target); never with no
// good copy, since a corrupt one may be all there is. It forgets marks
// whose replica is gone.
func (m *Manager) dropCorruptLocked(f *fsSoft, b *fsmpb.BlockRecord, good, want int, now time.Time, stale time.Duration) {
	marks := f.repl.corrupt[b.Id]
	if good >= 1 && good < want {
		free := false
		for nid, n := range f.nodes {
			if _, holds := n.replicas[b.Id]; !holds && !n.dead && f.live(nid, now, stale) {
				free = true
				break
			}
		}
		if !free {
			want = good
		}
	}
	for nid, gs := range marks {
		n := f.nodes[nid]
		r, ok := n.replicaLocked(b.Id)
		if !ok || r.gs != gs {
			delete(marks, nid)
			continue
		}
		if good >= want && good >= 1 {
			f.dropReplicaLocked(n, b.Id, gs, r.numBytes)
			delete(marks, nid)
			m.log.Info("corrupt replica invalidated", "block-id", b.Id, "gs", gs, "node", nid, "good", good)
		}
	}
	if len(marks) == 0 {
		delete(f.repl.corrupt, b.Id)
	}
}

// replicaLocked returns n's replica of id (n may be nil).
func (n *nodeSoft) replicaLocked(id uint64) (softReplica, bool) {
	if n == nil {
		return softReplica{}, false
	}
	r, ok := n.replicas[id]
	return r, ok
}
