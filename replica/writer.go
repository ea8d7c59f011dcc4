package replica

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"time"
)

// writer implements Writer for one in-pipeline replica.
//
// sem is held during every call; a writer that is stopped or done keeps it
// forever, so "sem acquired by stopWriter" means "no call in progress and
// none will start" (the HDFS thread join).
type writer struct {
	d        *Dataset
	r        *replica
	hdr      MetaHeader
	sem      chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	data     File
	meta     File
	lastSum  uint32 // checksum of the partial last chunk on disk
	dead     bool   // guarded by sem
}

var _ Writer = (*writer)(nil)

// newWriterLocked opens r's files and makes the writer its owner. d.mu held.
func (d *Dataset) newWriterLocked(r *replica) (*writer, error) {
	data, err := d.fs.OpenFile(r.dataPath(), os.O_RDWR, 0)
	if err != nil {
		return nil, d.volumeErr(r.vol, err)
	}
	meta, err := d.fs.OpenFile(r.metaPath(), os.O_RDWR, 0)
	if err != nil {
		data.Close()
		return nil, d.volumeErr(r.vol, err)
	}
	w := &writer{d: d, r: r, hdr: r.hdr, sem: make(chan struct{}, 1), stop: make(chan struct{}), data: data, meta: meta}
	// The last partial chunk's checksum comes from disk, so that appending
	// to it extends the right checksum (HDFS-4660, HDFS-10587).
	if bpc := int64(r.hdr.BytesPerChecksum); r.bytesOnDisk%bpc != 0 {
		var b [ChecksumSize]byte
		off := int64(MetaHeaderSize) + (r.bytesOnDisk/bpc)*ChecksumSize
		if _, err := meta.ReadAt(b[:], off); err != nil {
			w.closeFiles()
			return nil, newErr(KindCorrupt, "meta-short", "cannot read last chunk checksum: %v", err)
		}
		w.lastSum = binary.BigEndian.Uint32(b[:])
	}
	r.writer = w
	return w, nil
}

func (w *writer) closeFiles() {
	w.data.Close()
	w.meta.Close()
}

func (w *writer) signalStop() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *writer) Stopped() <-chan struct{} { return w.stop }

func errWriterStopped() error {
	return newErr(KindAborted, "writer-stopped", "writer was stopped by a newer operation or closed")
}

func (w *writer) acquire() error {
	select {
	case <-w.stop:
		return errWriterStopped()
	default:
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.stop:
		return errWriterStopped()
	}
	if w.dead {
		<-w.sem
		return errWriterStopped()
	}
	return nil
}

func (w *writer) release() { <-w.sem }

// finish ends the writer while holding sem (kept forever). Caller holds sem.
func (w *writer) finish() {
	w.dead = true
	w.closeFiles()
	w.signalStop()
}

// stopWriter stops w and waits (until deadline) for a call in progress to
// return. Called without d.mu.
func (d *Dataset) stopWriter(ctx context.Context, w *writer, deadline time.Time) error {
	w.signalStop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case w.sem <- struct{}{}:
	case <-timer.C:
		return newErr(KindDeadlineExceeded, "writer-stop-timeout", "unable to stop existing writer within %v", d.cfg.WriterStopTimeout)
	case <-ctx.Done():
		return ioErr(ctx.Err())
	}
	if !w.dead {
		w.dead = true
		w.closeFiles()
	}
	d.mu.Lock()
	if w.r.writer == w {
		w.r.writer = nil
	}
	d.mu.Unlock()
	return nil
}

func (w *writer) Replica() ReplicaInfo {
	w.d.mu.RLock()
	defer w.d.mu.RUnlock()
	return w.r.info()
}

// owned checks, under d.mu, that w still owns its replica.
func (w *writer) ownedLocked() error {
	if w.r.writer != w {
		return errWriterStopped()
	}
	return nil
}

func (w *writer) opErr(op string, err error) error { return at(err, op, w.r.pool, w.r.id) }

func (w *writer) WritePacket(ctx context.Context, offset int64, data []byte, sums []uint32) error {
	if err := w.acquire(); err != nil {
		return w.opErr("write-packet", err)
	}
	defer w.release()
	return w.opErr("write-packet", w.writePacket(ctx, offset, data, sums))
}

func (w *writer) writePacket(ctx context.Context, offset int64, data []byte, sums []uint32) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	bpc := int64(w.hdr.BytesPerChecksum)
	w.d.mu.RLock()
	err := w.ownedLocked()
	onDisk, reserved, vol := w.r.bytesOnDisk, w.r.reserved, w.r.vol
	w.d.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case offset < 0 || offset%bpc != 0:
		return newErr(KindInvalidArgument, "misaligned-packet", "packet offset %d is not a multiple of %d", offset, bpc)
	case int64(len(sums)) != w.hdr.Chunks(int64(len(data))):
		return newErr(KindInvalidArgument, "checksum-count", "%d data bytes need %d checksums, got %d", len(data), w.hdr.Chunks(int64(len(data))), len(sums))
	case offset > onDisk:
		return newErr(KindOutOfRange, "packet-gap", "packet offset %d beyond %d bytes on disk", offset, onDisk)
	}
	if bad := w.hdr.Verify(data, sums); bad >= 0 {
		w.d.stats.checksumErrors.Add(1)
		return newErr(KindCorrupt, "checksum-mismatch", "chunk %d of packet at offset %d does not match its checksum", bad, offset)
	}
	end := offset + int64(len(data))
	if end <= onDisk {
		return nil // a resent packet wholly on disk already
	}
	first := onDisk / bpc // first chunk (of the block) that gains bytes
	if onDisk%bpc != 0 {
		// Resent bytes of the partial chunk on disk must be the same bytes.
		prefix := data[first*bpc-offset : onDisk-offset]
		if w.hdr.Sum(prefix) != w.lastSum {
			return newErr(KindCorrupt, "resent-data-mismatch", "resent bytes [%d,%d) differ from the bytes on disk", first*bpc, onDisk)
		}
	}
	growth := end - onDisk
	if growth > reserved {
		w.d.mu.RLock()
		avail, err := w.d.available(vol)
		w.d.mu.RUnlock()
		if err == nil && avail < growth-reserved {
			return newErr(KindDiskOutOfSpace, "disk-out-of-space", "volume %s has %d bytes available, packet needs %d", vol.path, avail, growth-reserved)
		}
	}
	if err := failpoint("write/before-data"); err != nil {
		return err
	}
	pk := first - offset/bpc // first packet chunk to store
	if _, err := w.data.WriteAt(data[onDisk-offset:], onDisk); err != nil {
		w.data.Truncate(onDisk)
		return w.d.volumeErr(vol, err)
	}
	if err := failpoint("write/after-data"); err != nil {
		return err
	}
	if _, err := w.meta.WriteAt(encodeSums(sums[pk:]), MetaHeaderSize+first*ChecksumSize); err != nil {
		w.data.Truncate(onDisk)
		w.meta.Truncate(w.hdr.MetaFileSize(onDisk))
		if onDisk%bpc != 0 {
			w.meta.WriteAt(encodeSums([]uint32{w.lastSum}), MetaHeaderSize+first*ChecksumSize)
		}
		return w.d.volumeErr(vol, err)
	}
	w.d.mu.Lock()
	w.r.bytesOnDisk = end
	w.r.numBytes = max(w.r.numBytes, end)
	releaseReservation(w.r, growth)
	w.d.mu.Unlock()
	if end%bpc != 0 {
		w.lastSum = sums[len(sums)-1]
	}
	w.d.stats.bytesWritten.Add(growth)
	return nil
}

func (w *writer) SetBytesAcked(n int64) error {
	if err := w.acquire(); err != nil {
		return w.opErr("set-bytes-acked", err)
	}
	defer w.release()
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if err := w.ownedLocked(); err != nil {
		return w.opErr("set-bytes-acked", err)
	}
	switch {
	case n > w.r.bytesOnDisk:
		return w.opErr("set-bytes-acked", newErr(KindOutOfRange, "acked-beyond-disk", "bytes acked %d > bytes on disk %d", n, w.r.bytesOnDisk))
	case n < w.r.bytesAcked:
		return w.opErr("set-bytes-acked", newErr(KindInvalidArgument, "acked-backwards", "bytes acked %d < %d already acked", n, w.r.bytesAcked))
	}
	w.r.bytesAcked = n
	return nil
}

func (w *writer) Sync() error {
	if err := w.acquire(); err != nil {
		return w.opErr("sync", err)
	}
	defer w.release()
	return w.opErr("sync", w.sync())
}

// sync: data first, then the checksums that cover it.
func (w *writer) sync() error {
	if err := w.data.Sync(); err != nil {
		return w.d.volumeErr(w.r.vol, err)
	}
	if err := w.meta.Sync(); err != nil {
		return w.d.volumeErr(w.r.vol, err)
	}
	return nil
}

func (w *writer) Finalize(ctx context.Context) (ReplicaInfo, error) {
	const op = "finalize"
	if err := w.acquire(); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	defer w.release()
	if err := ctxErr(ctx); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	// Durability: data and meta fsynced before the rename into finalized/.
	if err := w.sync(); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	if err := failpoint("finalize/after-sync"); err != nil {
		return ReplicaInfo{}, err
	}
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if err := w.d.usableLocked(); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	if err := w.ownedLocked(); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	if err := w.d.finalizeLocked(w.r, true); err != nil {
		return ReplicaInfo{}, w.opErr(op, err)
	}
	w.r.writer = nil
	w.finish()
	return w.r.info(), nil
}

func (w *writer) Close() error {
	if err := w.acquire(); err != nil {
		return nil // already stopped or closed
	}
	defer w.release()
	w.d.mu.Lock()
	if w.r.writer == w {
		w.r.writer = nil
	}
	w.d.mu.Unlock()
	w.finish()
	return nil
}
