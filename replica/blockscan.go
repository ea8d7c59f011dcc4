package replica

import (
	"context"
	"errors"
	"io"
	"time"
)

// verifyAll reads every chunk of br and verifies it, paced by th.
func verifyAll(ctx context.Context, br BlockReader, th *throttle) error {
	bpc := br.BytesPerChecksum()
	buf := make([]byte, max(bpc, (1<<20)/bpc*bpc))
	for off := int64(0); off < br.Length(); {
		if err := ctx.Err(); err != nil {
			return ioErr(err)
		}
		n, _, err := br.ReadChunks(off, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		off += int64(n)
		if err := th.wait(ctx, int64(n)); err != nil {
			return ioErr(err)
		}
	}
	return nil
}

// VerifyReplica checks every checksum of FINALIZED replica id now (the
// block scanner's unit of work). A corrupt replica is reported through
// Config.OnBadBlock and KindCorrupt is returned. A replica that changed or
// vanished meanwhile (append, delete, HDFS-17342) is not corrupt.
func (d *Dataset) VerifyReplica(ctx context.Context, bpid string, id uint64) error {
	return d.verifyReplica(ctx, bpid, id, nil)
}

func (d *Dataset) verifyReplica(ctx context.Context, bpid string, id uint64, th *throttle) error {
	info, err := d.GetReplica(bpid, id)
	if err != nil {
		return err
	}
	if info.State != StateFinalized {
		return nil
	}
	err = d.verifyOnce(ctx, bpid, info, th)
	if err == nil || KindOf(err) != KindCorrupt {
		if err == nil {
			d.stats.blocksVerified.Add(1)
			d.stats.bytesVerified.Add(info.NumBytes)
		}
		return err
	}
	// Re-check under the current state: only the same replica is corrupt.
	now, gerr := d.GetReplica(bpid, id)
	if gerr != nil || now.State != StateFinalized || now.GS != info.GS || now.NumBytes != info.NumBytes {
		return nil
	}
	d.log.Warn("block scanner: corrupt replica", "pool", bpid, "block-id", id, "gs", info.GS, "error", err)
	d.reportBad(BadBlock{Pool: bpid, Block: info.Block(), StorageID: info.StorageID, Reason: ReasonOf(err)})
	return err
}

func (d *Dataset) verifyOnce(ctx context.Context, bpid string, info ReplicaInfo, th *throttle) error {
	br, err := d.OpenBlock(bpid, info.Block())
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Reason == "file-missing" {
			return newErr(KindCorrupt, "file-missing", "replica files missing: %v", err)
		}
		return err
	}
	defer br.Close()
	if h, err := d.readHeaderOf(bpid, info); err != nil {
		return err
	} else if h.BytesPerChecksum != uint32(br.BytesPerChecksum()) {
		return newErr(KindCorrupt, "meta-header-mismatch", "meta header changed")
	}
	return verifyAll(ctx, br, th)
}

// readHeaderOf re-reads and validates the meta header from disk.
func (d *Dataset) readHeaderOf(bpid string, info ReplicaInfo) (MetaHeader, error) {
	var path string
	d.mu.RLock()
	if p, err := d.poolLocked(bpid); err == nil {
		if r := p.replicas[info.ID]; r != nil {
			path = r.metaPath()
		}
	}
	d.mu.RUnlock()
	h, err := d.readHeader(path)
	if err != nil && KindOf(err) == KindUnknown {
		return h, newErr(KindCorrupt, "meta-unreadable", "meta file: %v", err)
	}
	return h, err
}

// StartBlockScanner verifies every FINALIZED replica once per
// BlockScanPeriod, paced at BlockScanBytesPerSecond, reporting corrupt ones
// through Config.OnBadBlock. Open starts it when the rate is > 0.
func (d *Dataset) StartBlockScanner() {
	stop := make(chan struct{})
	d.closeMu.Lock()
	d.scanners = append(d.scanners, func() { close(stop) })
	d.closeMu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
			case <-d.stopCh:
			}
			cancel()
		}()
		for ctx.Err() == nil {
			start := time.Now()
			th := newThrottle(float64(d.cfg.BlockScanBytesPerSecond), stop)
			for _, bpid := range d.BlockPools() {
				infos, err := d.Replicas(bpid)
				if err != nil {
					continue
				}
				for _, ri := range infos {
					if ctx.Err() != nil {
						return
					}
					if ri.State == StateFinalized {
						d.verifyReplica(ctx, bpid, ri.ID, th)
					}
				}
			}
			t := time.NewTimer(max(time.Second, d.cfg.BlockScanPeriod-time.Since(start)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}()
}
