package replica

import (
	"context"
)

func errNoReplica() error { return newErr(KindNotFound, "replica-not-found", "no replica") }

// appendLocked reopens FINALIZED r for writing at newGS: uncache, move to
// rbw/ renaming the meta for newGS, RBW with bytesAcked = length, a writer.
func (d *Dataset) appendLocked(r *replica, newGS uint64, fp string) (*writer, error) {
	need := max(0, d.cfg.BlockSize-r.numBytes)
	avail, err := d.available(r.vol)
	if err != nil {
		return nil, d.volumeErr(r.vol, err)
	}
	if avail < need {
		return nil, newErr(KindDiskOutOfSpace, "disk-out-of-space", "volume %s has %d bytes available, append reserves %d", r.vol.path, avail, need)
	}
	d.uncacheLocked(r)
	if err := d.moveFilesLocked(r, inRbw, newGS, fp); err != nil {
		return nil, err
	}
	r.gs, r.dir, r.state, r.recoveryID = newGS, inRbw, StateRBW, 0
	r.bytesOnDisk, r.bytesAcked = r.numBytes, r.numBytes
	r.reserved = need
	r.vol.reservedForReplicas += need
	w, err := d.newWriterLocked(r)
	if err != nil {
		return nil, err
	}
	d.publish(Change{Kind: ChangeReceiving, Pool: r.pool, StorageID: r.vol.storageID, Replica: r.reported()})
	return w, nil
}

// Append reopens a FINALIZED replica b (id and GS) of length expectedLen for
// writing at newGS > b.GS (PIPELINE_SETUP_APPEND). Publishes RECEIVING.
func (d *Dataset) Append(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (Writer, error) {
	const op = "append"
	var out *writer
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		switch {
		case newGS <= b.GS:
			return newErr(KindStaleGS, "new-gs-not-newer", "new GS %d must exceed the block's GS %d", newGS, b.GS)
		case r == nil:
			return errNoReplica()
		case r.gs != b.GS:
			return newErr(KindStaleGS, "gs-mismatch", "replica GS %d != %d", r.gs, b.GS)
		case r.state != StateFinalized:
			return newErr(KindNotFound, "unfinalized-replica", "cannot append to a %v replica", r.state)
		case r.numBytes != expectedLen:
			return newErr(KindOutOfRange, "length-mismatch", "replica length %d != expected %d (corrupted replica?)", r.numBytes, expectedLen)
		}
		w, err := d.appendLocked(r, newGS, "append")
		out = w
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recoverCheck is HDFS recoverCheck, shared by RecoverAppend/RecoverClose.
func recoverCheck(r *replica, b Block, newGS uint64, expectedLen int64) error {
	switch {
	case r == nil:
		return errNoReplica()
	case r.state != StateFinalized && r.state != StateRBW:
		return newErr(KindNotFound, "unexpected-state", "replica is %v, want FINALIZED or RBW", r.state)
	case r.gs < b.GS || r.gs > newGS:
		return newErr(KindStaleGS, "unexpected-gs", "replica GS %d outside [%d, %d]", r.gs, b.GS, newGS)
	}
	if r.state == StateRBW {
		if r.writer != nil {
			return &mustStopWriter{r.writer}
		}
		if r.numBytes != r.bytesOnDisk || r.bytesOnDisk != r.bytesAcked {
			return newErr(KindAlreadyExists, "unacked-bytes", "RBW has received %d, on disk %d, acked %d", r.numBytes, r.bytesOnDisk, r.bytesAcked)
		}
	}
	if r.numBytes != expectedLen {
		return newErr(KindOutOfRange, "length-mismatch", "replica length %d != expected %d (corrupted replica?)", r.numBytes, expectedLen)
	}
	return nil
}

// RecoverAppend recovers a failed append pipeline
// (PIPELINE_SETUP_APPEND_RECOVERY): a FINALIZED replica is appended, an RBW
// gets GS newGS and a new writer. Publishes RECEIVING.
func (d *Dataset) RecoverAppend(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (Writer, error) {
	const op = "recover-append"
	var out *writer
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if err := recoverCheck(r, b, newGS, expectedLen); err != nil {
			return err
		}
		if r.state == StateFinalized {
			w, err := d.appendLocked(r, newGS, "recover-append")
			out = w
			return err
		}
		if err := d.bumpGSLocked(r, newGS, "recover-append"); err != nil {
			return err
		}
		w, err := d.newWriterLocked(r)
		if err != nil {
			return err
		}
		out = w
		d.publish(Change{Kind: ChangeReceiving, Pool: bpid, StorageID: r.vol.storageID, Replica: r.reported()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecoverClose recovers a pipeline that failed while closing
// (PIPELINE_CLOSE_RECOVERY): GS := newGS and an RBW is finalized; a
// FINALIZED replica stays FINALIZED with the new GS. Publishes RECEIVED.
func (d *Dataset) RecoverClose(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (ReplicaInfo, error) {
	const op = "recover-close"
	var out ReplicaInfo
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if err := recoverCheck(r, b, newGS, expectedLen); err != nil {
			return err
		}
		if err := d.bumpGSLocked(r, newGS, "recover-close"); err != nil {
			return err
		}
		if r.state == StateRBW {
			if err := d.finalizeLocked(r, false); err != nil {
				return err
			}
		} else {
			d.publish(Change{Kind: ChangeReceived, Pool: bpid, StorageID: r.vol.storageID, Replica: r.reported()})
		}
		out = r.info()
		return nil
	})
	return out, err
}

// RecoverRbw recovers a streaming pipeline (PIPELINE_SETUP_STREAMING_RECOVERY):
// the RBW's writer is stopped, GS must be in [b.GS, newGS], bytesAcked ≥
// minBytesRcvd and bytes received ≤ maxBytesRcvd; an unacked tail is
// truncated; GS := newGS; a new writer is returned.
func (d *Dataset) RecoverRbw(ctx context.Context, bpid string, b Block, newGS uint64, minBytesRcvd, maxBytesRcvd int64) (Writer, error) {
	const op = "recover-rbw"
	var out *writer
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		switch {
		case r == nil:
			return errNoReplica()
		case r.state != StateRBW:
			return newErr(KindNotFound, "non-rbw-replica", "replica is %v, not RBW", r.state)
		case r.writer != nil:
			return &mustStopWriter{r.writer}
		case r.gs < b.GS || r.gs > newGS:
			return newErr(KindStaleGS, "unexpected-gs", "replica GS %d outside [%d, %d]", r.gs, b.GS, newGS)
		case r.bytesAcked < minBytesRcvd || r.numBytes > maxBytesRcvd:
			return newErr(KindOutOfRange, "unmatched-length", "acked %d, received %d not in [%d, %d]", r.bytesAcked, r.numBytes, minBytesRcvd, maxBytesRcvd)
		}
		st, err := d.fs.Stat(r.dataPath())
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		if st.Size < r.bytesAcked {
			return newErr(KindCorrupt, "fewer-bytes-on-disk-than-acked", "data file has %d bytes, %d acked", st.Size, r.bytesAcked)
		}
		// The unacked tail may be corrupt if the last node was lost.
		if r.bytesOnDisk > r.bytesAcked || st.Size > r.bytesAcked {
			if err := d.truncateLocked(r, r.bytesAcked, "recover-rbw"); err != nil {
				return err
			}
		}
		if err := d.bumpGSLocked(r, newGS, "recover-rbw"); err != nil {
			return err
		}
		w, err := d.newWriterLocked(r)
		out = w
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinalizeBlock finalizes replica b (id and GS): RBW, TEMPORARY, RWR or RUR
// → FINALIZED (a writer still attached is stopped first); FINALIZED is a
// no-op. Publishes RECEIVED.
func (d *Dataset) FinalizeBlock(ctx context.Context, bpid string, b Block) (ReplicaInfo, error) {
	const op = "finalize"
	var out ReplicaInfo
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		switch {
		case r == nil:
			return errNoReplica()
		case r.gs != b.GS:
			return newErr(KindStaleGS, "gs-mismatch", "replica GS %d != %d", r.gs, b.GS)
		case r.state == StateFinalized:
			out = r.info()
			return nil
		case r.writer != nil:
			return &mustStopWriter{r.writer}
		}
		if err := d.finalizeLocked(r, false); err != nil {
			return err
		}
		out = r.info()
		return nil
	})
	return out, err
}
