package replica

import (
	"context"
)

// checkFilesLocked is HDFS checkReplicaFiles: the data file exists with
// bytesOnDisk bytes and the meta file exists with at least its header.
func (d *Dataset) checkFilesLocked(r *replica) error {
	st, err := d.fs.Stat(r.dataPath())
	if err != nil {
		if isNotExist(err) {
			return newErr(KindCorrupt, "data-missing", "data file %s missing", r.dataPath())
		}
		return d.volumeErr(r.vol, err)
	}
	if st.Size != r.bytesOnDisk {
		return newErr(KindCorrupt, "data-length-mismatch", "data file has %d bytes, replica %d", st.Size, r.bytesOnDisk)
	}
	mst, err := d.fs.Stat(r.metaPath())
	if err != nil {
		if isNotExist(err) {
			return newErr(KindCorrupt, "meta-missing", "meta file %s missing", r.metaPath())
		}
		return d.volumeErr(r.vol, err)
	}
	if mst.Size < MetaHeaderSize {
		return newErr(KindCorrupt, "meta-short", "meta file has %d bytes", mst.Size)
	}
	return nil
}

// InitReplicaRecovery starts block recovery recoveryID on this replica
// (HDFS initReplicaRecovery): a writer is stopped, the replica becomes RUR
// (or an RUR's recovery id is raised). It returns nil, nil if there is no
// replica. Replica GS < b.GS or ≥ recoveryID → KindStaleGS; an RUR with a
// recovery id ≥ recoveryID → KindRecoveryInProgress; TEMPORARY →
// KindInvalidState. GS and length on disk are unchanged.
func (d *Dataset) InitReplicaRecovery(ctx context.Context, bpid string, b Block, recoveryID uint64) (*RecoveryInfo, error) {
	const op = "init-replica-recovery"
	var out *RecoveryInfo
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if r == nil {
			return nil
		}
		if r.state.InPipeline() {
			if r.writer != nil {
				return &mustStopWriter{r.writer}
			}
			if r.bytesOnDisk < r.visibleLength() {
				return newErr(KindCorrupt, "fewer-bytes-on-disk-than-visible", "bytes on disk %d < visible %d", r.bytesOnDisk, r.visibleLength())
			}
			if err := d.checkFilesLocked(r); err != nil {
				return err
			}
		}
		switch {
		case r.gs < b.GS:
			return newErr(KindStaleGS, "replica-gs-older", "replica GS %d < block GS %d", r.gs, b.GS)
		case r.gs >= recoveryID:
			return newErr(KindStaleGS, "replica-gs-not-below-recovery-id", "replica GS %d >= recovery id %d", r.gs, recoveryID)
		}
		switch r.state {
		case StateRUR:
			if r.recoveryID >= recoveryID {
				return newErr(KindRecoveryInProgress, "recovery-in-progress", "recovery %d already in progress (asked %d)", r.recoveryID, recoveryID)
			}
			d.log.Info("newer recovery preempts", "pool", bpid, "block-id", r.id, "recovery-id", recoveryID, "old-recovery-id", r.recoveryID)
			r.recoveryID = recoveryID
		case StateTemporary:
			return newErr(KindInvalidState, "cannot-recover-temporary", "a TEMPORARY replica cannot be recovered")
		default:
			r.origState, r.state, r.recoveryID = r.state, StateRUR, recoveryID
			releaseReservation(r, r.reserved)
		}
		out = &RecoveryInfo{ID: r.id, BytesOnDisk: r.bytesOnDisk, GS: r.gs, OriginalState: r.origState}
		return nil
	})
	return out, err
}

// UpdateReplicaUnderRecovery finishes recovery recoveryID on this replica
// (HDFS updateReplicaUnderRecovery): the RUR is truncated to newLength
// (never extended), gets GS recoveryID and becomes FINALIZED. old is the
// block from this replica's RecoveryInfo (old.NumBytes = bytes on disk at
// init). Every check runs before any change. Copy-on-truncate (newBlockID ≠
// old.ID) is not supported. Publishes RECEIVED.
//
// Crash-safe order (doc.go): truncate at the old GS; then, for an original
// in rbw/, the meta rename into finalized/ with the new GS is the commit
// point; for a FINALIZED original, the meta rename to the new GS is.
func (d *Dataset) UpdateReplicaUnderRecovery(ctx context.Context, bpid string, old Block, recoveryID, newBlockID uint64, newLength int64) (ReplicaInfo, error) {
	const op = "update-replica-under-recovery"
	var out ReplicaInfo
	err := d.mutate(ctx, op, bpid, old.ID, func(p *blockPool, r *replica) error {
		switch {
		case newBlockID != old.ID:
			return newErr(KindInvalidArgument, "copy-on-truncate-unsupported", "new block id %d != %d: copy-on-truncate is not supported", newBlockID, old.ID)
		case newLength < 0:
			return newErr(KindInvalidArgument, "bad-length", "negative new length %d", newLength)
		case r == nil:
			return errNoReplica()
		case r.state != StateRUR:
			return newErr(KindInvalidState, "not-under-recovery", "replica is %v, not RUR", r.state)
		case r.bytesOnDisk != old.NumBytes:
			return newErr(KindFailedPrecondition, "replica-changed", "bytes on disk %d != %d at recovery init", r.bytesOnDisk, old.NumBytes)
		}
		if err := d.checkFilesLocked(r); err != nil {
			return err
		}
		switch {
		case recoveryID < r.recoveryID:
			return newErr(KindRecoveryInProgress, "preempted", "recovery %d was preempted by %d", recoveryID, r.recoveryID)
		case recoveryID > r.recoveryID:
			return newErr(KindFailedPrecondition, "recovery-id-not-initialized", "recovery %d was never initialized here (current %d)", recoveryID, r.recoveryID)
		case newLength > r.numBytes:
			return newErr(KindOutOfRange, "cannot-grow", "new length %d > replica length %d", newLength, r.numBytes)
		}
		if newLength < r.numBytes {
			if err := d.truncateLocked(r, newLength, "update-recovery"); err != nil {
				return err
			}
		}
		if r.origState == StateFinalized {
			if err := d.bumpGSLocked(r, recoveryID, "update-recovery"); err != nil {
				return err
			}
			if err := d.finalizeLocked(r, true); err != nil {
				return err
			}
		} else {
			if err := d.syncFiles(r); err != nil {
				return err
			}
			if err := d.moveFilesLocked(r, inFinalized, recoveryID, "update-recovery"); err != nil {
				return err
			}
			r.gs, r.dir, r.state = recoveryID, inFinalized, StateRBW
			if err := d.finalizeLocked(r, true); err != nil {
				return err
			}
		}
		out = r.info()
		return nil
	})
	return out, err
}
