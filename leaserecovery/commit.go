package leaserecovery

import "slices"

// CommitOutcome is what an accepted commitBlockSynchronization changes.
type CommitOutcome struct {
	// Noop: the commit was already applied (a retry, §R7.11) or asks to
	// delete a block that is already gone (§R7.12). Change nothing, answer
	// success, journal nothing.
	Noop bool
	// RemoveBlock: remove the last block from the file (deleteBlock).
	RemoveBlock bool
	// CloseFile: close the file and remove its lease.
	CloseFile bool
	// Block is the block after the commit (not for Noop or RemoveBlock): GS
	// and length from the request, Expected = the targets, no recovery, and
	// COMPLETE when closing — a recovery commit always completes the block,
	// whatever the replica count (§R4.2 step 7, §R9.5) — else
	// UNDER_CONSTRUCTION.
	Block Block
	// Dropped are the expected locations left out of the targets: their
	// replicas keep the old GS and are marked corrupt once reported (§R4.2
	// step 6).
	Dropped []NodeID
}

// CheckCommit validates commitBlockSynchronization against the current
// state and says what it changes (§R4.2, §R9.4). The FSM runs it at apply
// time, with the state as of that entry: a check made by the leader before
// proposing is not enough, because two proposals can race. f is the file
// holding req.BlockID, nil if none (a deleted file holds no blocks).
//
// Rules, in order:
//   - malformed request → KindInvalidArgument: NewGS ≠ RecoveryID or NewGS
//     ≤ OldGS (ReasonBadGS); negative length, or a deleteBlock with a
//     length (ReasonBadLength); deleteBlock with targets
//     (ReasonTargetsWithDelete); no targets otherwise (ReasonNoTargets);
//     empty or repeated target (ReasonBadNodes);
//   - no such block: deleteBlock → Noop (§R7.12), else KindNotFound
//     ReasonBlockNotFound (§R4.2 steps 2-3);
//   - block not UNDER_RECOVERY: it already has GS NewGS (this recovery was
//     applied) → Noop if the length matches (§R4.2 step 4, §R7.11), else
//     KindFailedPrecondition ReasonLengthMismatch; otherwise
//     KindFailedPrecondition ReasonNotUnderConstruction (file closed) or
//     ReasonNotUnderRecovery;
//   - file not under construction → KindFailedPrecondition
//     ReasonNotUnderConstruction;
//   - not the file's last block → KindFailedPrecondition ReasonNotLastBlock;
//   - RecoveryID ≠ the block's current recovery id → KindAborted
//     ReasonRecoveryIDMismatch: a stale or preempted attempt changes
//     nothing (§R4.2 step 5, invariant 5);
//   - OldGS ≠ the block's GS → KindInvalidArgument ReasonOldGSMismatch;
//   - closing while an earlier block is not COMPLETE → KindUnavailable
//     ReasonPenultimateNotComplete (a file closes only with every block
//     COMPLETE, §R5.4; the penultimate completes once reported);
//   - else deleteBlock → RemoveBlock (+ CloseFile), or the synchronised
//     block (§R4.2 steps 6-7).
func CheckCommit(f *File, req CommitRequest) (CommitOutcome, error) {
	if err := validateCommit(req); err != nil {
		return CommitOutcome{}, err
	}
	i := -1
	if f != nil {
		i = f.blockIndex(req.BlockID)
	}
	if i < 0 {
		if req.DeleteBlock {
			return CommitOutcome{Noop: true}, nil
		}
		return CommitOutcome{}, newErr(KindNotFound, ReasonBlockNotFound, "blk_%d not found", req.BlockID)
	}
	b := f.Blocks[i]
	if b.State != BlockUnderRecovery {
		switch {
		case b.GS == req.NewGS && !req.DeleteBlock && b.NumBytes == req.NewLength:
			return CommitOutcome{Noop: true}, nil
		case b.GS == req.NewGS:
			return CommitOutcome{}, newErr(KindFailedPrecondition, ReasonLengthMismatch,
				"blk_%d was already synchronised to GS %d with length %d", b.ID, b.GS, b.NumBytes)
		case !f.UnderConstruction:
			return CommitOutcome{}, newErr(KindFailedPrecondition, ReasonNotUnderConstruction, "%s is closed", f.Path)
		}
		return CommitOutcome{}, newErr(KindFailedPrecondition, ReasonNotUnderRecovery, "blk_%d is %v", b.ID, b.State)
	}
	if !f.UnderConstruction {
		return CommitOutcome{}, newErr(KindFailedPrecondition, ReasonNotUnderConstruction, "%s is closed", f.Path)
	}
	if !f.isLast(i) {
		return CommitOutcome{}, newErr(KindFailedPrecondition, ReasonNotLastBlock, "blk_%d is not the last block of %s", b.ID, f.Path)
	}
	if req.RecoveryID != b.Recovery.ID {
		return CommitOutcome{}, newErr(KindAborted, ReasonRecoveryIDMismatch,
			"blk_%d: recovery id %d does not match the current recovery id %d", b.ID, req.RecoveryID, b.Recovery.ID)
	}
	if req.OldGS != b.GS {
		return CommitOutcome{}, newErr(KindInvalidArgument, ReasonOldGSMismatch, "blk_%d: old GS %d, block has %d", b.ID, req.OldGS, b.GS)
	}
	if req.CloseFile {
		for _, e := range f.Blocks[:i] {
			if e.State != BlockComplete {
				return CommitOutcome{}, newErr(KindUnavailable, ReasonPenultimateNotComplete,
					"%s: blk_%d is %v, try again later", f.Path, e.ID, e.State)
			}
		}
	}
	if req.DeleteBlock {
		return CommitOutcome{RemoveBlock: true, CloseFile: req.CloseFile}, nil
	}
	out := CommitOutcome{CloseFile: req.CloseFile}
	out.Block = Block{
		ID:       b.ID,
		GS:       req.NewGS,
		NumBytes: req.NewLength,
		State:    BlockUnderConstruction,
		Expected: slices.Clone(req.Targets),
	}
	if req.CloseFile {
		out.Block.State = BlockComplete
	}
	for _, n := range b.Expected {
		if !slices.Contains(req.Targets, n) {
			out.Dropped = append(out.Dropped, n)
		}
	}
	return out, nil
}

func validateCommit(req CommitRequest) error {
	switch {
	case req.NewGS != req.RecoveryID || req.NewGS <= req.OldGS:
		return newErr(KindInvalidArgument, ReasonBadGS,
			"blk_%d: new GS %d must equal the recovery id %d and exceed old GS %d", req.BlockID, req.NewGS, req.RecoveryID, req.OldGS)
	case req.NewLength < 0 || (req.DeleteBlock && req.NewLength != 0):
		return newErr(KindInvalidArgument, ReasonBadLength, "blk_%d: length %d (delete %t)", req.BlockID, req.NewLength, req.DeleteBlock)
	case req.DeleteBlock && len(req.Targets) > 0:
		return newErr(KindInvalidArgument, ReasonTargetsWithDelete, "blk_%d: deleteBlock with targets %v", req.BlockID, req.Targets)
	case !req.DeleteBlock && len(req.Targets) == 0:
		return newErr(KindInvalidArgument, ReasonNoTargets, "blk_%d: no targets", req.BlockID)
	case !validNodes(req.Targets):
		return newErr(KindInvalidArgument, ReasonBadNodes, "blk_%d: empty or repeated target in %v", req.BlockID, req.Targets)
	}
	return nil
}
