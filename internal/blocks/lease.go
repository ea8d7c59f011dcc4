package blocks

import (
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// ruleFileLocked is v as the lease rules see it: each block's live
// replicas are the live nodes that reported it finalized at its GS and
// length. A last block without expected locations takes the nodes that
// reported it (design §R3.2 rule 4a, as the FSM does with
// StartRecoveryOp.reported_locations).
func (m *Manager) ruleFileLocked(f *fsSoft, v FileView, now time.Time) lr.File {
	stale := m.cfg.NodeStaleInterval
	rf := lr.File{Path: v.File.Path, UnderConstruction: v.File.UnderConstruction, LeaseHolder: v.File.LeaseHolder, MinReplication: 1}
	for i, b := range v.Blocks {
		rb := ruleBlock(b, f.finalizedAt(b.Id, b.Gs, int64(b.NumBytes), now, stale))
		if i == len(v.Blocks)-1 && len(rb.Expected) == 0 {
			for _, id := range f.reporters(b.Id) {
				if _, ok := v.Nodes[id]; ok {
					rb.Expected = append(rb.Expected, lr.NodeID(id))
				}
			}
		}
		rf.Blocks = append(rf.Blocks, rb)
	}
	return rf
}

// releaseFile applies the release decision for the lease on path (hard
// limit, soft-limit takeover, recover-lease): close it, drop an empty last
// block, or start (re-drive) a block recovery whose lease goes to
// newHolder ("" for the coordinator's holder). It returns the decision.
func (m *Manager) releaseFile(path, newHolder, reason string) (lr.ReleaseDecision, error) {
	v, ok := m.viewFile(path)
	if !ok {
		return lr.ReleaseDecision{}, notFound(path)
	}
	now := time.Now()
	cfg := m.cfg
	var load map[string]int
	m.fsm.View(func(st *fsm.State) { load = st.RecoveryLoad() })
	soft := m.locked()
	rf := m.ruleFileLocked(soft, v, now)
	replicated := soft.replicatedLocked(v, nil, now, cfg.NodeStaleInterval)
	var locs []lr.Location
	var reported []string
	var last *fsmpb.BlockRecord
	if k := len(v.Blocks); k > 0 {
		last = v.Blocks[k-1]
		if len(last.ExpectedLocations) == 0 {
			for _, id := range rf.Blocks[k-1].Expected {
				reported = append(reported, string(id))
			}
		}
		for _, id := range rf.Blocks[k-1].Expected {
			l := lr.Location{Node: id, Alive: soft.live(string(id), now, cfg.NodeStaleInterval), Load: load[string(id)]}
			l.Fresh = l.Alive
			if n := soft.nodes[string(id)]; n != nil {
				l.LastHeartbeat = n.lastHeartbeat
			}
			locs = append(locs, l)
		}
	}
	soft.mu.Unlock()
	d, err := lr.DecideRelease(rf, now)
	if err != nil {
		return d, err
	}
	switch d.Action {
	case lr.ReleaseAlreadyClosed, lr.ReleaseInProgress:
		return d, nil
	case lr.ReleaseClose, lr.ReleaseRemoveLastBlock:
		_, err := m.propose(&fsmpb.ReleaseLeaseOp{Path: path, Holder: v.File.LeaseHolder, ReplicatedBlocks: replicated})
		if err == nil {
			m.met.leaseReleases.WithLabelValues(d.Action.String()).Inc()
			m.log.Info("lease released", "path", path, "holder", v.File.LeaseHolder, "action", d.Action.String(), "why", reason)
		}
		return d, err
	case lr.ReleaseStartRecovery:
		var tried []lr.NodeID
		if last.State == fsmpb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
			tried = rf.Blocks[len(rf.Blocks)-1].Recovery.Chosen
		}
		pc, ok := lr.ChoosePrimary(locs, tried)
		if !ok && last.State == fsmpb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
			// A re-drive with no live location: the attempt stays as it
			// is (no new id, no command) until a location is heard from
			// again (§R7.17); recoverLease answers "in progress".
			m.log.Debug("recovery not re-driven: no live location", "path", path, "block", last.Id, "why", reason)
			return lr.ReleaseDecision{Action: lr.ReleaseInProgress, Reason: fmt.Sprintf("no live location of block %d", last.Id)}, nil
		}
		// !ok on a first attempt: the block still goes UNDER_RECOVERY with
		// a recovery id and no primary (§R3.3: "no alive candidate → no
		// command"), which fences the writer and hands the lease over; the
		// monitor re-drives it once a location is live.
		why := reason
		if len(why) > fsm.MaxReasonBytes {
			why = why[:fsm.MaxReasonBytes]
		}
		r, err := m.propose(&fsmpb.StartRecoveryOp{
			Path: path, BlockId: last.Id, Primary: string(pc.Node), DeadlineUnixNanos: now.Add(cfg.RecoveryTimeout).UnixNano(),
			Reason: why, NewHolder: newHolder, ReportedLocations: reported,
		})
		if err == nil {
			m.met.leaseReleases.WithLabelValues(d.Action.String()).Inc()
			m.log.Info("block recovery started", "path", path, "block", last.Id, "primary", pc.Node,
				"recovery-id", r.Result.GetBlock().GetRecovery().GetRecoveryId(), "why", reason)
		}
		return d, err
	}
	return d, fmt.Errorf("%w: %s: %v", ErrBadDecision, path, d.Action)
}

// leaseCycle is one round of the leader's lease monitor (every
// LeaseCheckInterval): it releases or recovers the leases past the hard
// limit and re-drives the recoveries past their deadline, at most
// MaxLeaseActionsPerCycle a cycle.
func (m *Manager) leaseCycle(now time.Time) {
	cfg := m.cfg
	var open []fsm.OpenFile
	var registered []string
	m.fsm.View(func(st *fsm.State) {
		open = st.UnderConstruction()
		for _, n := range st.Nodes() {
			registered = append(registered, n.Id)
		}
	})
	type due struct{ path, holder, why string }
	var work []due
	soft := m.locked()
	soft.updateSafeMode(registered, now, cfg.NodeStaleInterval)
	if soft.safeMode {
		// Design §R9.12: no lease is released and no recovery started
		// or re-driven before the nodes have reported to this leader (a
		// primary chosen now would be judged on liveness it has not seen).
		soft.mu.Unlock()
		return
	}
	for _, o := range open {
		if len(work) >= cfg.MaxLeaseActionsPerCycle {
			break
		}
		switch {
		case o.Last != nil && o.Last.State == fsmpb.BlockState_BLOCK_STATE_UNDER_RECOVERY:
			if now.UnixNano() > o.Last.Recovery.GetDeadlineUnixNanos() {
				// A re-drive keeps a recover-lease caller's lease.
				holder := o.Holder
				if holder == fsm.RecoveryLeaseHolder {
					holder = ""
				}
				work = append(work, due{o.Path, holder, fmt.Sprintf("recovery %d passed its deadline", o.Last.Recovery.GetRecoveryId())})
			}
		case cfg.rules().HardExpired(soft.renewed(o.Holder), now):
			work = append(work, due{o.Path, "", "lease of " + o.Holder + " passed the hard limit"})
		}
	}
	soft.mu.Unlock()
	// Up to leaseWorkers proposals in flight: the leader's batcher puts
	// them into shared Raft entries instead of one round trip each.
	var wg sync.WaitGroup
	sem := make(chan struct{}, leaseWorkers)
	for _, w := range work {
		if !m.lead.IsLeader() {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := m.releaseFile(w.path, w.holder, w.why); err != nil {
				m.log.Debug("lease release failed; will retry", "path", w.path, "why", w.why, "err", err)
			}
		})
	}
	wg.Wait()
}

// leaseWorkers bounds the releases one lease cycle proposes at once.
const leaseWorkers = 16
