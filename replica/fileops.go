package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The file-level steps of every state change. Each names its failpoints
// (doc.go lists them). All run with d.mu held for writing. A failpoint
// error returns at once, leaving the disk as a crash at that step would; a
// real error undoes what it can.

// createFilesLocked creates r's empty meta (header only) and data files in
// r's directory, fsyncs both and the directory.
func (d *Dataset) createFilesLocked(r *replica) error {
	dir := r.dirPath()
	if err := mkdirAllDurable(d.fs, dir); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if r.dir == inTmp {
		// Stale leftovers of an earlier attempt are garbage in tmp/.
		d.fs.Remove(r.dataPath())
		d.fs.Remove(r.metaPath())
	} else if exists(d.fs, r.dataPath()) {
		return newErr(KindAlreadyExists, "file-exists", "%s exists on disk", r.dataPath())
	}
	// Meta first: a crash before the data file exists leaves an orphan
	// meta, which Load deletes (the replica never existed).
	if err := writeFileDurable(d.fs, r.metaPath(), r.hdr.Encode()); err != nil {
		d.fs.Remove(r.metaPath())
		return d.volumeErr(r.vol, err)
	}
	if err := writeFileDurable(d.fs, r.dataPath(), nil); err != nil {
		d.fs.Remove(r.dataPath())
		d.fs.Remove(r.metaPath())
		return d.volumeErr(r.vol, err)
	}
	if err := d.fs.SyncDir(dir); err != nil {
		return d.volumeErr(r.vol, err)
	}
	return nil
}

// syncFiles fsyncs r's data and meta files.
func (d *Dataset) syncFiles(r *replica) error {
	for _, p := range []string{r.dataPath(), r.metaPath()} {
		f, err := d.fs.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
	}
	return nil
}

// moveFilesLocked moves r's files to directory kind dst, naming the meta
// for newGS. Durability order: meta first, then data, then both
// directories fsynced. The meta file's location is the commit point: Load
// moves a data file to its meta file's directory if a crash split them.
// r itself is not changed.
func (d *Dataset) moveFilesLocked(r *replica, dst dirKind, newGS uint64, fp string) error {
	srcDir, dstDir := r.dirPath(), r.paths().dir(dst, r.id)
	if err := mkdirAllDurable(d.fs, dstDir); err != nil {
		return d.volumeErr(r.vol, err)
	}
	srcMeta, dstMeta := r.metaPath(), filepath.Join(dstDir, metaName(r.id, newGS))
	srcData, dstData := r.dataPath(), filepath.Join(dstDir, blockName(r.id))
	if err := d.fs.Rename(srcMeta, dstMeta); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/after-meta-rename"); err != nil {
		return err
	}
	if err := d.fs.Rename(srcData, dstData); err != nil {
		d.fs.Rename(dstMeta, srcMeta)
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/after-data-rename"); err != nil {
		return err
	}
	if err := d.fs.SyncDir(dstDir); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if srcDir != dstDir {
		if err := d.fs.SyncDir(srcDir); err != nil {
			return d.volumeErr(r.vol, err)
		}
	}
	return failpoint(fp + "/after-dir-sync")
}

// bumpGSLocked renames r's meta file for newGS (HDFS bumpReplicaGS) and
// fsyncs the directory; r.gs changes only if that worked.
func (d *Dataset) bumpGSLocked(r *replica, newGS uint64, fp string) error {
	if newGS == r.gs {
		return nil
	}
	dst := filepath.Join(r.dirPath(), metaName(r.id, newGS))
	if err := d.fs.Rename(r.metaPath(), dst); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/after-gs-rename"); err != nil {
		return err
	}
	if err := d.fs.SyncDir(r.dirPath()); err != nil {
		d.fs.Rename(dst, r.metaPath())
		return d.volumeErr(r.vol, err)
	}
	r.gs = newGS
	return nil
}

// truncateLocked cuts r to newLen bytes, recomputing the checksum of the new
// last partial chunk. Crash-safe order:
//  1. write the new meta to <meta>.trunc and fsync it;
//  2. truncate the data file and fsync it;
//  3. rename <meta>.trunc over <meta> and fsync the directory.
//
// Load rolls a leftover .trunc forward if the data file verifies against it
// (the crash was after 2) and deletes it otherwise (before 2).
func (d *Dataset) truncateLocked(r *replica, newLen int64, fp string) error {
	if newLen < 0 || newLen > r.bytesOnDisk {
		return newErr(KindOutOfRange, "bad-truncate", "truncate to %d of %d bytes", newLen, r.bytesOnDisk)
	}
	metaBytes, err := readFile(d.fs, r.metaPath())
	if err != nil {
		return d.volumeErr(r.vol, err)
	}
	hdr, sums, err := ParseMeta(metaBytes)
	if err != nil {
		return err
	}
	chunks := hdr.Chunks(newLen)
	if int64(len(sums)) < chunks {
		return newErr(KindCorrupt, "meta-short", "meta file has %d checksums, %d bytes need %d", len(sums), newLen, chunks)
	}
	sums = sums[:chunks]
	bpc := int64(hdr.BytesPerChecksum)
	if tail := newLen % bpc; tail != 0 {
		buf := make([]byte, tail)
		f, err := d.fs.OpenFile(r.dataPath(), os.O_RDONLY, 0)
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		_, err = f.ReadAt(buf, newLen-tail)
		f.Close()
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		sums[chunks-1] = hdr.Sum(buf)
	}
	tmp := r.metaPath() + truncSuffix
	if err := writeFileDurable(d.fs, tmp, append(hdr.Encode(), encodeSums(sums)...)); err != nil {
		d.fs.Remove(tmp)
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/truncate/after-temp-meta"); err != nil {
		return err
	}
	f, err := d.fs.OpenFile(r.dataPath(), os.O_RDWR, 0)
	if err != nil {
		d.fs.Remove(tmp)
		return d.volumeErr(r.vol, err)
	}
	if err := f.Truncate(newLen); err != nil {
		f.Close()
		d.fs.Remove(tmp)
		return d.volumeErr(r.vol, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/truncate/after-data-truncate"); err != nil {
		return err
	}
	if err := d.fs.Rename(tmp, r.metaPath()); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if err := d.fs.SyncDir(r.dirPath()); err != nil {
		return d.volumeErr(r.vol, err)
	}
	if err := failpoint(fp + "/truncate/after-meta-rename"); err != nil {
		return err
	}
	r.numBytes, r.bytesOnDisk = newLen, newLen
	r.bytesAcked = min(r.bytesAcked, newLen)
	return nil
}

// finalizeLocked moves r (RBW, RWR, TEMPORARY or RUR) to FINALIZED. Unless
// synced, the files are fsynced first. HDFS finalizeReplica.
func (d *Dataset) finalizeLocked(r *replica, synced bool) error {
	if r.state == StateRUR && r.origState == StateFinalized {
		r.state, r.recoveryID = StateFinalized, 0
		d.publish(Change{Kind: ChangeReceived, Pool: r.pool, StorageID: r.vol.storageID, Replica: r.reported()})
		return nil
	}
	if !synced {
		// Durability: data and meta fsynced before the rename into finalized/.
		if err := d.syncFiles(r); err != nil {
			return err
		}
	}
	if r.dir != inFinalized {
		if err := d.moveFilesLocked(r, inFinalized, r.gs, "finalize"); err != nil {
			return err
		}
	}
	r.dir, r.state, r.recoveryID = inFinalized, StateFinalized, 0
	r.numBytes = r.bytesOnDisk
	r.bytesAcked = r.bytesOnDisk
	releaseReservation(r, r.reserved)
	d.stats.blocksFinalized.Add(1)
	d.publish(Change{Kind: ChangeReceived, Pool: r.pool, StorageID: r.vol.storageID, Replica: r.reported()})
	return nil
}

// removeReplicaLocked takes r out of the map and out of the way on disk:
// into trash/ (if the pool has trash enabled and r is not TEMPORARY), or
// renamed into tmp/ for the asynchronous deleter (tmp/ is wiped at restart,
// so a crash before the unlink loses nothing). Data is moved before meta: a
// crash between leaves an orphan meta, which Load deletes. The DELETED
// change is published once the files are gone (or in trash).
func (d *Dataset) removeReplicaLocked(p *blockPool, r *replica) (deleteTask, error) {
	if r.writer != nil {
		r.writer.signalStop()
		r.writer = nil
	}
	d.uncacheLocked(r)
	releaseReservation(r, r.reserved)
	delete(p.replicas, r.id)
	var change *Change
	if r.state != StateTemporary {
		change = &Change{Kind: ChangeDeleted, Pool: r.pool, StorageID: r.vol.storageID, Replica: r.reported()}
	}
	task := deleteTask{change: change, vol: r.vol}
	srcs := []string{r.dataPath(), r.metaPath()}
	if p.trash && r.state != StateTemporary {
		pp := r.paths()
		rel, _ := filepath.Rel(filepath.Join(pp.root, dirCurrent), r.dirPath())
		if strings.HasPrefix(rel, "..") {
			rel = dirRbw
		}
		dst := filepath.Join(pp.trash, rel)
		if err := mkdirAllDurable(d.fs, dst); err != nil {
			return task, d.volumeErr(r.vol, err)
		}
		for _, src := range srcs {
			if err := d.fs.Rename(src, filepath.Join(dst, filepath.Base(src))); err != nil && !isNotExist(err) {
				return task, d.volumeErr(r.vol, err)
			}
		}
		d.fs.SyncDir(dst)
		d.fs.SyncDir(r.dirPath())
		d.stats.blocksDeleted.Add(1)
		if change != nil {
			d.publish(*change)
		}
		task.change = nil
		return task, nil
	}
	tmpDir := r.paths().tmp
	if err := mkdirAllDurable(d.fs, tmpDir); err != nil {
		task.paths = srcs
		return task, nil
	}
	for _, src := range srcs {
		dst := filepath.Join(tmpDir, fmt.Sprintf("deleting-%d-%s", d.seq.Add(1), filepath.Base(src)))
		switch err := d.fs.Rename(src, dst); {
		case err == nil:
			task.paths = append(task.paths, dst)
		case !isNotExist(err):
			task.paths = append(task.paths, src)
		}
	}
	d.fs.SyncDir(r.dirPath())
	return task, nil
}
