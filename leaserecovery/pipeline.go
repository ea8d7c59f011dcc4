package leaserecovery

import "slices"

// writableLastBlock applies the checks shared by updateBlockForPipeline,
// updatePipeline and commit (§R5.3 step 6, §R9.4): the block exists, the file
// is under construction, the caller holds the lease, the block is the last
// one. It returns the block's index.
func writableLastBlock(f *File, blockID uint64, caller string) (int, error) {
	i := -1
	if f != nil {
		i = f.blockIndex(blockID)
	}
	switch {
	case i < 0:
		return -1, newErr(KindNotFound, ReasonBlockNotFound, "blk_%d not found", blockID)
	case !f.UnderConstruction:
		return -1, newErr(KindFailedPrecondition, ReasonNotUnderConstruction, "%s is closed", f.Path)
	case caller == "" || caller != f.LeaseHolder:
		return -1, newErr(KindFailedPrecondition, ReasonLeaseMismatch, "%s: lease held by %q, not %q", f.Path, f.LeaseHolder, caller)
	case !f.isLast(i):
		return -1, newErr(KindFailedPrecondition, ReasonNotLastBlock, "blk_%d is not the last block of %s", blockID, f.Path)
	}
	return i, nil
}

// CheckUpdateBlockForPipeline checks a writer's request for a new pipeline GS
// (HDFS updateBlockForPipeline, §R5.3 step 6): the block exists
// (KindNotFound), the file is under construction, the caller holds the
// lease, the block is the last one and UNDER_CONSTRUCTION — not
// UNDER_RECOVERY or COMMITTED (KindFailedPrecondition ReasonUnexpectedState:
// once a recovery started the old writer is fenced, §R7.13). The caller then
// allocates the GS in the same Raft entry and returns it only once committed
// (§R9.2).
func CheckUpdateBlockForPipeline(f *File, blockID uint64, caller string) error {
	i, err := writableLastBlock(f, blockID, caller)
	if err != nil {
		return err
	}
	if b := f.Blocks[i]; b.State != BlockUnderConstruction {
		return newErr(KindFailedPrecondition, ReasonUnexpectedState, "blk_%d is %v, not UNDER_CONSTRUCTION", b.ID, b.State)
	}
	return nil
}

// PipelineUpdate is HDFS updatePipeline: the writer's new GS, acked length
// and pipeline after a pipeline recovery (§R5.3 step 8).
type PipelineUpdate struct {
	Caller    string
	BlockID   uint64
	OldGS     uint64
	NewGS     uint64
	NewLength int64
	Nodes     []NodeID
}

// CheckUpdatePipeline validates updatePipeline against the state at apply
// time (§R5.3 step 8, §R9.4) and returns the updated block (GS, length,
// Expected = Nodes, UNDER_CONSTRUCTION). maxGS is the GS counter.
//
// Rules, in order: malformed → KindInvalidArgument (NewGS ≤ OldGS:
// ReasonBadGS; negative length: ReasonBadLength; no node: ReasonNoTargets;
// empty or repeated node: ReasonBadNodes); NewGS above maxGS was never
// allocated → KindInvalidArgument ReasonGSNotAllocated (§R9.2); then the
// CheckUpdateBlockForPipeline checks; OldGS ≠ the stored GS (a stale or
// repeated update) → KindFailedPrecondition ReasonGSMismatch; NewLength
// below the stored length (bytes readers may have seen) → KindOutOfRange
// ReasonLengthShrinks. With OldGS equal to the stored GS, NewGS > OldGS is
// the rule "newGS > stored GS" of §R5.3 step 8.
func CheckUpdatePipeline(f *File, u PipelineUpdate, maxGS uint64) (Block, error) {
	switch {
	case u.NewGS <= u.OldGS:
		return Block{}, newErr(KindInvalidArgument, ReasonBadGS, "blk_%d: new GS %d not above old GS %d", u.BlockID, u.NewGS, u.OldGS)
	case u.NewLength < 0:
		return Block{}, newErr(KindInvalidArgument, ReasonBadLength, "blk_%d: length %d", u.BlockID, u.NewLength)
	case len(u.Nodes) == 0:
		return Block{}, newErr(KindInvalidArgument, ReasonNoTargets, "blk_%d: empty pipeline", u.BlockID)
	case !validNodes(u.Nodes):
		return Block{}, newErr(KindInvalidArgument, ReasonBadNodes, "blk_%d: empty or repeated node in %v", u.BlockID, u.Nodes)
	case u.NewGS > maxGS:
		return Block{}, newErr(KindInvalidArgument, ReasonGSNotAllocated, "blk_%d: GS %d was never allocated (counter %d)", u.BlockID, u.NewGS, maxGS)
	}
	if err := CheckUpdateBlockForPipeline(f, u.BlockID, u.Caller); err != nil {
		return Block{}, err
	}
	b := f.Blocks[f.blockIndex(u.BlockID)]
	if u.OldGS != b.GS {
		return Block{}, newErr(KindFailedPrecondition, ReasonGSMismatch, "blk_%d: update from GS %d, block has %d", b.ID, u.OldGS, b.GS)
	}
	if u.NewLength < b.NumBytes {
		return Block{}, newErr(KindOutOfRange, ReasonLengthShrinks, "blk_%d: length %d below stored %d", b.ID, u.NewLength, b.NumBytes)
	}
	b.GS, b.NumBytes, b.Expected = u.NewGS, u.NewLength, slices.Clone(u.Nodes)
	return b, nil
}

// BlockCommit is the client's commit of its last block (complete, or
// addBlock with this block as previous, §R5.1, §R5.4).
type BlockCommit struct {
	Caller   string
	BlockID  uint64
	GS       uint64
	NumBytes int64
}

// CommitBlockOutcome is the result of CheckCommitBlock.
type CommitBlockOutcome struct {
	// Noop: already committed or completed with this GS and length (a
	// retried call, HDFS-3031).
	Noop bool
	// Block is the block, COMMITTED with the client's length (not for Noop).
	Block Block
}

// CheckCommitBlock validates a client's commit of its last block at apply
// time (§R5.1, §R5.4, §R9.4).
//
// Rules, in order: negative length → KindInvalidArgument ReasonBadLength; no
// block → KindNotFound; file closed → Noop if this is its last block with
// the same GS (retried complete, HDFS-3031), else KindFailedPrecondition
// ReasonNotUnderConstruction; caller not the lease holder →
// ReasonLeaseMismatch; not the last block → ReasonNotLastBlock;
// UNDER_RECOVERY → KindFailedPrecondition ReasonUnderRecovery (the writer is
// fenced, §R3.5, §R7.13); COMMITTED/COMPLETE → Noop with the same GS and
// length, else ReasonAlreadyCommitted; GS ≠ stored GS →
// KindFailedPrecondition ReasonGSMismatch ("commit block with mismatching
// GS"); length below the stored (acked) length → KindOutOfRange
// ReasonLengthShrinks; else the block, COMMITTED.
func CheckCommitBlock(f *File, c BlockCommit) (CommitBlockOutcome, error) {
	if c.NumBytes < 0 {
		return CommitBlockOutcome{}, newErr(KindInvalidArgument, ReasonBadLength, "blk_%d: length %d", c.BlockID, c.NumBytes)
	}
	if f != nil && !f.UnderConstruction {
		if i := f.blockIndex(c.BlockID); i >= 0 && f.isLast(i) && f.Blocks[i].GS == c.GS {
			return CommitBlockOutcome{Noop: true}, nil
		}
	}
	i, err := writableLastBlock(f, c.BlockID, c.Caller)
	if err != nil {
		return CommitBlockOutcome{}, err
	}
	b := f.Blocks[i]
	switch b.State {
	case BlockUnderConstruction:
	case BlockUnderRecovery:
		return CommitBlockOutcome{}, newErr(KindFailedPrecondition, ReasonUnderRecovery, "blk_%d is under recovery", b.ID)
	case BlockCommitted, BlockComplete:
		if b.GS == c.GS && b.NumBytes == c.NumBytes {
			return CommitBlockOutcome{Noop: true}, nil
		}
		return CommitBlockOutcome{}, newErr(KindFailedPrecondition, ReasonAlreadyCommitted,
			"blk_%d is %v with GS %d length %d", b.ID, b.State, b.GS, b.NumBytes)
	default:
		return CommitBlockOutcome{}, newErr(KindInternal, ReasonUnknownBlockState, "blk_%d in state %v", b.ID, b.State)
	}
	if c.GS != b.GS {
		return CommitBlockOutcome{}, newErr(KindFailedPrecondition, ReasonGSMismatch,
			"commit blk_%d with mismatching GS: coordinator has %d, client %d", b.ID, b.GS, c.GS)
	}
	if c.NumBytes < b.NumBytes {
		return CommitBlockOutcome{}, newErr(KindOutOfRange, ReasonLengthShrinks, "blk_%d: length %d below stored %d", b.ID, c.NumBytes, b.NumBytes)
	}
	b.NumBytes, b.State = c.NumBytes, BlockCommitted
	b.Expected = slices.Clone(b.Expected)
	return CommitBlockOutcome{Block: b}, nil
}

// CanComplete reports whether block b, COMMITTED, may become COMPLETE now
// that finalized live FINALIZED replicas at its GS are known: finalized ≥
// minReplication (at least 1) (§R5.4, §R6.2 step 5). Any other state → false.
func CanComplete(b Block, finalized, minReplication int) bool {
	return b.State == BlockCommitted && finalized >= max(1, minReplication)
}

// CanClose reports whether complete(file) may close f: it is under
// construction and every block is COMPLETE (§R5.4, with HDFS's default of no
// COMMITTED block allowed). Until then complete answers false and the
// client retries.
func CanClose(f File) bool {
	if !f.UnderConstruction {
		return false
	}
	for _, b := range f.Blocks {
		if b.State != BlockComplete {
			return false
		}
	}
	return true
}
