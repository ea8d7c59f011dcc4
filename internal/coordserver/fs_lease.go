package coordserver

import (
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/grpc/codes"
)

// ruleFileLocked is v as the lease rules see it: each block's live
// replicas are the live nodes that reported it finalized at its GS and
// length. A last block without expected locations takes the nodes that
// reported it (design §R3.2 rule 4a, as the FSM does with
// StartRecoveryOp.reported_locations).
func (s *Server) ruleFileLocked(f *fsSoft, v fileView, now time.Time) lr.File {
	stale := s.fsCfg().NodeStaleInterval
	rf := lr.File{Path: v.file.Path, UnderConstruction: v.file.UnderConstruction, LeaseHolder: v.file.LeaseHolder, MinReplication: 1}
	for i, b := range v.blocks {
		rb := ruleBlock(b, f.finalizedAt(b.Id, b.Gs, int64(b.NumBytes), now, stale))
		if i == len(v.blocks)-1 && len(rb.Expected) == 0 {
			for _, id := range f.reporters(b.Id) {
				if _, ok := v.nodes[id]; ok {
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
func (s *Server) releaseFile(path, newHolder, reason string) (lr.ReleaseDecision, error) {
	v, ok := s.viewFile(path)
	if !ok {
		return lr.ReleaseDecision{}, s.fsErr(notFound(path))
	}
	now := time.Now()
	cfg := s.fsCfg()
	var load map[string]int
	s.fsm.View(func(st *fsm.State) { load = st.RecoveryLoad() })
	soft := s.fsLocked()
	rf := s.ruleFileLocked(soft, v, now)
	replicated := soft.replicatedLocked(v, nil, now, cfg.NodeStaleInterval)
	var locs []lr.Location
	var reported []string
	var last *fsmpb.BlockRecord
	if k := len(v.blocks); k > 0 {
		last = v.blocks[k-1]
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
		return d, s.fsErr(err)
	}
	switch d.Action {
	case lr.ReleaseAlreadyClosed, lr.ReleaseInProgress:
		return d, nil
	case lr.ReleaseClose, lr.ReleaseRemoveLastBlock:
		_, err := s.proposeNS(nil, nsOp(&fsmpb.ReleaseLeaseOp{Path: path, Holder: v.file.LeaseHolder, ReplicatedBlocks: replicated}))
		if err == nil {
			s.metrics.leaseReleases.WithLabelValues(d.Action.String()).Inc()
			s.log.Info("lease released", "path", path, "holder", v.file.LeaseHolder, "action", d.Action.String(), "why", reason)
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
			s.log.Debug("recovery not re-driven: no live location", "path", path, "block", last.Id, "why", reason)
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
		r, err := s.proposeNS(nil, nsOp(&fsmpb.StartRecoveryOp{
			Path: path, BlockId: last.Id, Primary: string(pc.Node), DeadlineUnixNanos: now.Add(cfg.RecoveryTimeout).UnixNano(),
			Reason: why, NewHolder: newHolder, ReportedLocations: reported,
		}))
		if err == nil {
			s.metrics.leaseReleases.WithLabelValues(d.Action.String()).Inc()
			s.log.Info("block recovery started", "path", path, "block", last.Id, "primary", pc.Node,
				"recovery-id", r.Result.GetBlock().GetRecovery().GetRecoveryId(), "why", reason)
		}
		return d, err
	}
	return d, s.statusErr(codes.Internal, "BAD_DECISION", fmt.Sprintf("%s: release decision %v", path, d.Action))
}

// leaseMonitor is the leader's lease loop: every LeaseCheckInterval it
// releases or recovers the leases past the hard limit and re-drives the
// recoveries past their deadline, at most MaxLeaseActionsPerCycle a cycle.
func (s *Server) leaseMonitor() {
	s.leaderEvery(s.fsCfg().LeaseCheckInterval, fsm.NamespaceFormat, s.leaseCycle)
}

func (s *Server) leaseCycle(now time.Time) {
	cfg := s.fsCfg()
	var open []fsm.OpenFile
	var registered []string
	s.fsm.View(func(st *fsm.State) {
		open = st.UnderConstruction()
		for _, n := range st.Nodes() {
			registered = append(registered, n.Id)
		}
	})
	type due struct{ path, holder, why string }
	var work []due
	soft := s.fsLocked()
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
		if !s.isLeader() {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := s.releaseFile(w.path, w.holder, w.why); err != nil {
				s.log.Debug("lease release failed; will retry", "path", w.path, "why", w.why, "err", err)
			}
		})
	}
	wg.Wait()
}

// leaseWorkers bounds the releases one lease cycle proposes at once.
const leaseWorkers = 16
