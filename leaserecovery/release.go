package leaserecovery

import (
	"fmt"
	"slices"
	"time"
)

// ReleaseAction is what releasing a file's lease does (§R3.2).
type ReleaseAction uint8

const (
	releaseUnspecified ReleaseAction = iota
	// ReleaseAlreadyClosed: the file is not under construction; nothing to
	// do (recoverLease answers true).
	ReleaseAlreadyClosed
	// ReleaseClose: close the file now and remove the lease; no GS is
	// allocated (§R3.2 rules 1 and 4 COMMITTED).
	ReleaseClose
	// ReleaseRemoveLastBlock: remove the empty last block, then close the
	// file (§R3.2 rule 4b: the client died before any pipeline or data).
	ReleaseRemoveLastBlock
	// ReleaseStartRecovery: allocate a recovery id from the GS counter and
	// start a recovery attempt of the last block (BeginRecovery) (§R3.2 rule
	// 4c). The lease is reassigned and renewed (rule 4d).
	ReleaseStartRecovery
	// ReleaseInProgress: an attempt is running and has not timed out;
	// allocate nothing, send nothing (§R3.2 rule 4c, §R7.14).
	ReleaseInProgress
)

func (a ReleaseAction) String() string {
	switch a {
	case ReleaseAlreadyClosed:
		return "already-closed"
	case ReleaseClose:
		return "close"
	case ReleaseRemoveLastBlock:
		return "remove-last-block"
	case ReleaseStartRecovery:
		return "start-recovery"
	case ReleaseInProgress:
		return "in-progress"
	}
	return fmt.Sprintf("ReleaseAction(%d)", uint8(a))
}

// ReleaseDecision is the result of DecideRelease.
type ReleaseDecision struct {
	Action ReleaseAction
	Reason string // for logs
}

// Closes reports whether applying the decision closes the file (recoverLease
// then answers true, §R3.5).
func (d ReleaseDecision) Closes() bool {
	return d.Action == ReleaseAlreadyClosed || d.Action == ReleaseClose || d.Action == ReleaseRemoveLastBlock
}

// DecideRelease is HDFS internalReleaseLease (§R3.2): what to do with an open
// file whose lease is being released (hard limit, recoverLease, or another
// writer after the soft limit). now is the time of the command or of the
// leader's monitor tick, compared with the running attempt's deadline. The
// caller must fill LiveReplicas of the last two blocks. Rule 4a (an empty
// expected list is filled from the reported locations) is the caller's: this
// rule counts a last block with LiveReplicas > 0 as having locations, and
// the caller puts those nodes in Expected before choosing a primary.
//
// Rules, in order:
//   - not under construction → ReleaseAlreadyClosed;
//   - 1: every block COMPLETE (or no block) → ReleaseClose;
//   - 2: only the last two blocks may be incomplete, and an incomplete
//     penultimate must be COMMITTED → else KindInternal ReasonBadBlockStates;
//   - 3/4 COMMITTED (or COMPLETE after a COMMITTED penultimate): penultimate
//     (if any) and last have ≥ MinReplication live replicas → ReleaseClose,
//     else KindUnavailable ReasonCommittedNotReplicated (HDFS
//     AlreadyBeingCreated; no recovery for a committed block, §R7.4);
//   - 4b UNDER_CONSTRUCTION/UNDER_RECOVERY with no expected or reported
//     location and length 0 → ReleaseRemoveLastBlock (§R7.1);
//   - 4c UNDER_RECOVERY before its deadline → ReleaseInProgress (§R7.10,
//     §R7.14); otherwise → ReleaseStartRecovery.
func DecideRelease(f File, now time.Time) (ReleaseDecision, error) {
	if !f.UnderConstruction {
		return ReleaseDecision{Action: ReleaseAlreadyClosed, Reason: "file is not under construction"}, nil
	}
	n := len(f.Blocks)
	complete := 0
	for complete < n && f.Blocks[complete].State == BlockComplete {
		complete++
	}
	if complete == n {
		return ReleaseDecision{Action: ReleaseClose, Reason: "all blocks are complete"}, nil
	}
	if complete < n-2 || (complete == n-2 && f.Blocks[n-2].State != BlockCommitted) {
		return ReleaseDecision{}, newErr(KindInternal, ReasonBadBlockStates,
			"%s: only the last two blocks may be incomplete and an incomplete penultimate must be COMMITTED", f.Path)
	}
	last := f.Blocks[n-1]
	need := f.minReplication()
	switch last.State {
	case BlockCommitted, BlockComplete:
		// BlockComplete here means the penultimate is COMMITTED: it may have
		// completed out of order.
		penultimateOK := n < 2 || f.Blocks[n-2].LiveReplicas >= need
		if penultimateOK && last.LiveReplicas >= need {
			return ReleaseDecision{Action: ReleaseClose, Reason: "committed blocks are minimally replicated"}, nil
		}
		return ReleaseDecision{}, newErr(KindUnavailable, ReasonCommittedNotReplicated,
			"%s: committed blocks are waiting to be minimally replicated (%d), try again later", f.Path, need)
	case BlockUnderConstruction, BlockUnderRecovery:
		if len(last.Expected) == 0 && last.LiveReplicas == 0 && last.NumBytes == 0 {
			return ReleaseDecision{Action: ReleaseRemoveLastBlock, Reason: "last block has no locations and no data"}, nil
		}
		if last.State == BlockUnderRecovery && now.Before(last.Recovery.Deadline) {
			return ReleaseDecision{Action: ReleaseInProgress,
				Reason: fmt.Sprintf("recovery %d attempt %d runs until %s", last.Recovery.ID, last.Recovery.Attempt, last.Recovery.Deadline.UTC().Format(time.RFC3339))}, nil
		}
		return ReleaseDecision{Action: ReleaseStartRecovery, Reason: "last block needs recovery"}, nil
	}
	return ReleaseDecision{}, newErr(KindInternal, ReasonUnknownBlockState, "%s: last block in state %v", f.Path, last.State)
}

// BeginRecovery returns b moved to UNDER_RECOVERY under a new attempt (§R3.3,
// §R9.1): recovery id id (freshly allocated from the GS counter by the same
// Raft entry), primary and chosen set from ChoosePrimary, and the attempt's
// deadline (now + Config.RecoveryTimeout, now from the command). The FSM
// applies it; it never reads a clock.
//
// Rules: b must be UNDER_CONSTRUCTION or UNDER_RECOVERY
// (KindFailedPrecondition ReasonUnexpectedState); id must be above b's GS
// and above the current recovery id, so a newer attempt always preempts an
// older one and GS only grows (invariant 3) (KindInvalidArgument
// ReasonBadRecoveryID). An empty primary is allowed: no expected location is
// alive, so no command is sent until the next attempt (§R3.3, §R7.17).
func BeginRecovery(b Block, id uint64, p PrimaryChoice, deadline time.Time) (Block, error) {
	if b.State != BlockUnderConstruction && b.State != BlockUnderRecovery {
		return Block{}, newErr(KindFailedPrecondition, ReasonUnexpectedState, "blk_%d is %v", b.ID, b.State)
	}
	if id <= b.GS || id <= b.Recovery.ID {
		return Block{}, newErr(KindInvalidArgument, ReasonBadRecoveryID,
			"recovery id %d must be above GS %d and recovery id %d of blk_%d", id, b.GS, b.Recovery.ID, b.ID)
	}
	attempt := 1
	if b.State == BlockUnderRecovery {
		attempt = b.Recovery.Attempt + 1
	}
	out := b
	out.Expected = slices.Clone(b.Expected)
	out.State = BlockUnderRecovery
	out.Recovery = Recovery{
		ID:       id,
		Primary:  p.Node,
		Attempt:  attempt,
		Chosen:   slices.Clone(p.Chosen),
		Deadline: deadline,
	}
	return out, nil
}
