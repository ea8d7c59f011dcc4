package leaserecovery

import (
	"cmp"
	"fmt"
	"slices"
)

// ReplyKind is the outcome of initReplicaRecovery on one location (§R2.12).
type ReplyKind uint8

const (
	// ReplyReplica: the node returned its replica's recovery info.
	ReplyReplica ReplyKind = iota
	// ReplyNoReplica: the node has no replica of the block (null reply).
	ReplyNoReplica
	// ReplyFailed: the call failed (I/O, stale GS, unreachable): an error.
	ReplyFailed
	// ReplyRecoveryInProgress: a recovery with an equal or higher id owns
	// the replica; this attempt is preempted.
	ReplyRecoveryInProgress
)

func (k ReplyKind) String() string {
	switch k {
	case ReplyReplica:
		return "replica"
	case ReplyNoReplica:
		return "no-replica"
	case ReplyFailed:
		return "failed"
	case ReplyRecoveryInProgress:
		return "recovery-in-progress"
	}
	return fmt.Sprintf("ReplyKind(%d)", uint8(k))
}

// ReplicaReply is one location's answer to initReplicaRecovery
// (replica.RecoveryInfo plus how the call went). For ReplyReplica, State,
// GS and NumBytes are the original replica's state, GS and bytes on disk.
type ReplicaReply struct {
	Node     NodeID
	Kind     ReplyKind
	State    ReplicaState
	GS       uint64
	NumBytes int64
}

// PlanAction is what the primary does next.
type PlanAction uint8

const (
	planUnspecified PlanAction = iota
	// PlanSync: updateReplicaUnderRecovery(R, NewLength) on every
	// participant, then commit the successes (BuildCommit).
	PlanSync
	// PlanDelete: no location has data; commit with deleteBlock (§R4.1 step 4).
	PlanDelete
)

func (a PlanAction) String() string {
	switch a {
	case PlanSync:
		return "sync"
	case PlanDelete:
		return "delete"
	}
	return fmt.Sprintf("PlanAction(%d)", uint8(a))
}

// Plan is the primary's decision for one recovery attempt.
type Plan struct {
	Action PlanAction
	// BestState is the best original state among the usable replicas
	// (PlanSync only).
	BestState ReplicaState
	// Participants are the replies chosen to be synchronised, in reply
	// order (PlanSync only).
	Participants []ReplicaReply
	// NewLength is the length every participant is truncated to (0 for
	// PlanDelete).
	NewLength int64
	Reason    string // for logs
}

// PlanRecovery is the primary's algorithm (§R4.1, contiguous blocks, no
// truncate): from the replies of initReplicaRecovery on every location of b
// (b.GS is the coordinator's GS, b.Recovery.ID the recovery id R), choose the
// participants and the target length.
//
// Rules, in order:
//   - malformed input → KindInvalidArgument: R ≤ b.GS (ReasonBadRecoveryID),
//     no replies (ReasonNoLocations: the coordinator sends no command without
//     locations, §R3.3), empty or repeated node (ReasonBadNodes);
//   - any ReplyRecoveryInProgress → KindAborted ReasonPreempted: a newer
//     recovery owns the block; no commit (step 1, §R7.9);
//   - a reply is an error if the call failed or the replica could not have
//     been returned by a conforming node: GS < b.GS (stale, §R2.12 step 3,
//     §R7.8), GS ≥ R (§R2.12 step 4) or negative length;
//   - a reply is a candidate iff GS ≥ b.GS and length > 0; a candidate is
//     usable iff its state is FINALIZED, RBW or RWR (step 1);
//   - every reply an error → KindUnavailable ReasonAllFailed (step 2);
//   - candidates but none usable → KindFailedPrecondition
//     ReasonNoRWROrBetter (step 3);
//   - no candidate: every node answered no replica or a zero-length one →
//     PlanDelete (step 4, §R7.2); if some node failed instead →
//     KindUnavailable ReasonIncompleteReplies (its data may exist);
//   - FINALIZED lengths differ → KindFailedPrecondition
//     ReasonInconsistentLength, no commit (step 5, §R7.6);
//   - best FINALIZED: length = the FINALIZED length, participants = every
//     FINALIZED + every RBW of exactly that length (RWR never) (step 6);
//   - best RBW: participants = every RBW (RWR excluded), length = their
//     minimum (§R7.5);
//   - best RWR: participants = every RWR, length = their minimum (§R7.7).
func PlanRecovery(b Block, replies []ReplicaReply) (Plan, error) {
	r := b.Recovery.ID
	if r <= b.GS {
		return Plan{}, newErr(KindInvalidArgument, ReasonBadRecoveryID, "recovery id %d not above GS %d of blk_%d", r, b.GS, b.ID)
	}
	if len(replies) == 0 {
		return Plan{}, newErr(KindInvalidArgument, ReasonNoLocations, "blk_%d: no locations to recover from", b.ID)
	}
	nodes := make([]NodeID, len(replies))
	for i, rep := range replies {
		nodes[i] = rep.Node
	}
	if !validNodes(nodes) {
		return Plan{}, newErr(KindInvalidArgument, ReasonBadNodes, "blk_%d: empty or repeated node in %v", b.ID, nodes)
	}
	if slices.ContainsFunc(replies, func(rep ReplicaReply) bool { return rep.Kind == ReplyRecoveryInProgress }) {
		return Plan{}, newErr(KindAborted, ReasonPreempted, "blk_%d: a newer recovery than %d owns a replica", b.ID, r)
	}

	failed, candidates := 0, 0
	var usable []ReplicaReply
	for _, rep := range replies {
		switch {
		case rep.Kind == ReplyNoReplica:
		case rep.Kind != ReplyReplica, rep.GS < b.GS, rep.GS >= r, rep.NumBytes < 0:
			failed++
		case rep.NumBytes == 0:
		default:
			candidates++
			if rep.State.Recoverable() {
				usable = append(usable, rep)
			}
		}
	}
	switch {
	case failed == len(replies):
		return Plan{}, newErr(KindUnavailable, ReasonAllFailed, "blk_%d: all %d locations failed", b.ID, failed)
	case candidates > 0 && len(usable) == 0:
		return Plan{}, newErr(KindFailedPrecondition, ReasonNoRWROrBetter,
			"blk_%d: %d replicas found but none is RWR or better", b.ID, candidates)
	case len(usable) == 0 && failed > 0:
		return Plan{}, newErr(KindUnavailable, ReasonIncompleteReplies,
			"blk_%d: no replica with data among the answers, but %d locations failed", b.ID, failed)
	case len(usable) == 0:
		return Plan{Action: PlanDelete, Reason: "no location has data"}, nil
	}

	best, finalized := ReplicaRWR, int64(-1)
	for _, rep := range usable {
		best = min(best, rep.State)
		if rep.State != ReplicaFinalized {
			continue
		}
		if finalized >= 0 && rep.NumBytes != finalized {
			return Plan{}, newErr(KindFailedPrecondition, ReasonInconsistentLength,
				"blk_%d: finalized replicas of %d and %d bytes", b.ID, finalized, rep.NumBytes)
		}
		finalized = rep.NumBytes
	}

	p := Plan{Action: PlanSync, BestState: best}
	if best == ReplicaFinalized {
		p.NewLength = finalized
		for _, rep := range usable {
			if rep.State == ReplicaFinalized || (rep.State == ReplicaRBW && rep.NumBytes == finalized) {
				p.Participants = append(p.Participants, rep)
			}
		}
		p.Reason = fmt.Sprintf("finalized length %d", finalized)
		return p, nil
	}
	for _, rep := range usable {
		if rep.State == best {
			p.Participants = append(p.Participants, rep)
		}
	}
	p.NewLength = slices.MinFunc(p.Participants, func(a, b ReplicaReply) int { return cmp.Compare(a.NumBytes, b.NumBytes) }).NumBytes
	p.Reason = fmt.Sprintf("minimum length %d among %d %v replicas", p.NewLength, len(p.Participants), best)
	return p, nil
}

// CommitRequest is commitBlockSynchronization (§R4.2, §R4.3).
type CommitRequest struct {
	BlockID uint64
	// OldGS is the coordinator GS the recovery started from.
	OldGS uint64
	// NewGS is the GS the block takes: always the recovery id (§R4.3).
	NewGS      uint64
	NewLength  int64
	RecoveryID uint64
	CloseFile  bool
	// DeleteBlock: no location had data; remove the block (§R4.1 step 4).
	DeleteBlock bool
	// Targets are the participants that synchronised (§R4.1 step 9).
	Targets []NodeID
}

// BuildCommit builds the commit of a finished plan (§R4.1 steps 7-9, §R4.3).
// synced lists the participants whose updateReplicaUnderRecovery succeeded.
// PlanDelete → {newLength 0, closeFile, deleteBlock, no targets}; PlanSync →
// targets = the participants in synced (plan order), closeFile; none →
// KindUnavailable ReasonCannotRecover (no commit; a later attempt retries).
// Failed participants are left out: their old-GS replicas become corrupt
// once reported.
func BuildCommit(b Block, p Plan, synced []NodeID) (CommitRequest, error) {
	c := CommitRequest{BlockID: b.ID, OldGS: b.GS, NewGS: b.Recovery.ID, RecoveryID: b.Recovery.ID, CloseFile: true}
	switch p.Action {
	case PlanDelete:
		c.DeleteBlock = true
		return c, nil
	case PlanSync:
		for _, rep := range p.Participants {
			if slices.Contains(synced, rep.Node) && !slices.Contains(c.Targets, rep.Node) {
				c.Targets = append(c.Targets, rep.Node)
			}
		}
		if len(c.Targets) == 0 {
			return CommitRequest{}, newErr(KindUnavailable, ReasonCannotRecover, "blk_%d: no participant synchronised", b.ID)
		}
		c.NewLength = p.NewLength
		return c, nil
	}
	return CommitRequest{}, newErr(KindInvalidArgument, ReasonBadPlan, "blk_%d: plan action %v", b.ID, p.Action)
}
