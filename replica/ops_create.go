package replica

import (
	"context"
	"fmt"
	"strings"
)

func validBlock(b Block) error {
	switch {
	case b.ID == 0:
		return newErr(KindInvalidArgument, "bad-block-id", "block id 0 is reserved")
	case b.GS == 0:
		return newErr(KindInvalidArgument, "bad-gs", "generation stamp 0 is reserved")
	case b.NumBytes < 0:
		return newErr(KindInvalidArgument, "bad-length", "negative block length %d", b.NumBytes)
	}
	return nil
}

// newReplicaLocked chooses a volume, reserves space and creates the files
// of a new in-pipeline replica in dir; it returns the replica with its
// writer. The caller adds it to the map.
func (d *Dataset) newReplicaLocked(bpid string, b Block, st State, dir dirKind, opts CreateOptions) (*replica, *writer, error) {
	need := b.NumBytes
	if need == 0 {
		need = d.cfg.BlockSize
	}
	v, err := d.chooseVolume(need, opts)
	if err != nil {
		return nil, nil, err
	}
	r := &replica{pool: bpid, id: b.ID, gs: b.GS, state: st, vol: v, dir: dir,
		hdr: DefaultMetaHeader(d.cfg.BytesPerChecksum), reserved: need}
	if err := d.createFilesLocked(r); err != nil {
		releaseReservation(r, r.reserved)
		return nil, nil, err
	}
	w, err := d.newWriterLocked(r)
	if err != nil {
		releaseReservation(r, r.reserved)
		d.fs.Remove(r.dataPath())
		d.fs.Remove(r.metaPath())
		return nil, nil, err
	}
	return r, w, nil
}

// CreateRbw creates an RBW replica for a new block (PIPELINE_SETUP_CREATE).
// b.NumBytes is the expected size to reserve (0: Config.BlockSize). Any
// existing replica of the id → KindAlreadyExists. Publishes RECEIVING.
func (d *Dataset) CreateRbw(ctx context.Context, bpid string, b Block, opts CreateOptions) (Writer, error) {
	const op = "create-rbw"
	if err := validBlock(b); err != nil {
		return nil, at(err, op, bpid, b.ID)
	}
	var out *writer
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if r != nil {
			return newErr(KindAlreadyExists, "replica-exists", "replica exists in state %v", r.state)
		}
		nr, w, err := d.newReplicaLocked(bpid, b, StateRBW, inRbw, opts)
		if err != nil {
			return err
		}
		p.replicas[b.ID] = nr
		d.stats.blocksCreated.Add(1)
		d.publish(Change{Kind: ChangeReceiving, Pool: bpid, StorageID: nr.vol.storageID, Replica: nr.reported()})
		out = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateTemporary creates a TEMPORARY replica, the target of a node-to-node
// transfer (HDFS createTemporary). An existing replica with an older GS is
// replaced (its writer stopped) if it is in a pipeline or this is a
// transfer; otherwise → KindAlreadyExists. b.NumBytes is the size to reserve.
func (d *Dataset) CreateTemporary(ctx context.Context, bpid string, b Block, isTransfer bool, opts CreateOptions) (Writer, error) {
	const op = "create-temporary"
	if err := validBlock(b); err != nil {
		return nil, at(err, op, bpid, b.ID)
	}
	var out *writer
	var tasks []deleteTask
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if r != nil {
			if r.gs >= b.GS || !isTransfer && !r.state.InPipeline() {
				return newErr(KindAlreadyExists, "replica-exists", "replica exists in state %v with GS %d", r.state, r.gs)
			}
			if r.writer != nil {
				return &mustStopWriter{r.writer}
			}
			// Check for room before the old replica is deleted.
			need := b.NumBytes
			if need == 0 {
				need = d.cfg.BlockSize
			}
			v, err := d.chooseVolume(need, opts)
			if err != nil {
				return err
			}
			v.reservedForReplicas -= need
			task, err := d.removeReplicaLocked(p, r)
			tasks = append(tasks, task)
			if err != nil {
				return err
			}
		}
		nr, w, err := d.newReplicaLocked(bpid, b, StateTemporary, inTmp, opts)
		if err != nil {
			return err
		}
		p.replicas[b.ID] = nr
		d.stats.blocksCreated.Add(1)
		out = w
		return nil
	})
	for _, t := range tasks {
		d.deletes.push(t)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConvertTemporaryToRbw turns a received TEMPORARY replica into RBW (end of a
// TRANSFER_RBW): GS must equal b.GS, bytes received ≥ b.NumBytes (the
// visible length the source sent), which becomes bytesAcked. A writer still
// attached is stopped; the new RBW has no writer (the client takes it over
// with RecoverRbw).
func (d *Dataset) ConvertTemporaryToRbw(ctx context.Context, bpid string, b Block) (ReplicaInfo, error) {
	const op = "convert-temporary-to-rbw"
	var out ReplicaInfo
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		switch {
		case r == nil:
			return newErr(KindNotFound, "replica-not-found", "no replica")
		case r.state != StateTemporary:
			return newErr(KindAlreadyExists, "not-temporary", "replica is %v, not TEMPORARY", r.state)
		case r.gs != b.GS:
			return newErr(KindAlreadyExists, "gs-mismatch", "replica GS %d != expected %d", r.gs, b.GS)
		case r.numBytes < b.NumBytes:
			return newErr(KindOutOfRange, "visible-beyond-received", "received %d bytes < visible length %d", r.numBytes, b.NumBytes)
		case r.writer != nil:
			return &mustStopWriter{r.writer}
		}
		if err := d.moveFilesLocked(r, inRbw, r.gs, "convert"); err != nil {
			return err
		}
		r.dir, r.state = inRbw, StateRBW
		r.bytesAcked = b.NumBytes
		releaseReservation(r, r.reserved)
		out = r.info()
		return nil
	})
	return out, err
}

// UnfinalizeBlock deletes a TEMPORARY replica matching b (id and GS), the
// cleanup of a failed transfer; anything else is left alone.
func (d *Dataset) UnfinalizeBlock(ctx context.Context, bpid string, b Block) error {
	const op = "unfinalize-block"
	var task *deleteTask
	err := d.mutate(ctx, op, bpid, b.ID, func(p *blockPool, r *replica) error {
		if r == nil || r.gs != b.GS || r.state != StateTemporary {
			return nil
		}
		t, err := d.removeReplicaLocked(p, r)
		task = &t
		return err
	})
	if task != nil {
		d.deletes.push(*task)
	}
	return err
}

// Invalidate deletes replicas matching (id, GS) (the coordinator's
// invalidate command). A replica of the id with another GS is kept and
// reported in the error (KindStaleGS); unknown ids are skipped. Files are
// deleted asynchronously; DELETED is published once they are gone. During
// an upgrade window (EnableTrash) files move to trash/ instead.
func (d *Dataset) Invalidate(ctx context.Context, bpid string, blocks []Block) error {
	const op = "invalidate"
	if err := ctxErr(ctx); err != nil {
		return at(err, op, bpid, 0)
	}
	var tasks []deleteTask
	var problems []string
	kind := KindStaleGS
	d.mu.Lock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		d.mu.Unlock()
		return at(err, op, bpid, 0)
	}
	for _, b := range blocks {
		r := p.replicas[b.ID]
		switch {
		case r == nil:
			d.log.Info("invalidate: no such replica", "pool", bpid, "block-id", b.ID)
			continue
		case r.gs != b.GS:
			problems = append(problems, fmt.Sprintf("blk_%d: GenerationStamp not matched (replica %d, asked %d)", b.ID, r.gs, b.GS))
			continue
		}
		t, err := d.removeReplicaLocked(p, r)
		tasks = append(tasks, t)
		if err != nil {
			kind = KindIO
			problems = append(problems, fmt.Sprintf("blk_%d: %v", b.ID, err))
		}
	}
	d.mu.Unlock()
	for _, t := range tasks {
		d.deletes.push(t)
	}
	if len(problems) > 0 {
		return at(newErr(kind, "invalidate-failed", "%d of %d blocks not invalidated: %s", len(problems), len(blocks), strings.Join(problems, "; ")), op, bpid, 0)
	}
	return nil
}
