package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// volume is one data directory (HDFS FsVolumeImpl). Mutable fields are
// guarded by Dataset.mu.
type volume struct {
	idx       int
	path      string
	typ       StorageType
	storageID string
	reserved  int64
	// reservedForReplicas is space promised to in-pipeline replicas
	// (estimated block size minus bytes written).
	reservedForReplicas int64
	failed              bool
	failErr             error
}

// VolumeInfo describes one volume (HDFS getVolumeInfoMap).
type VolumeInfo struct {
	Path                string
	StorageID           string
	StorageType         StorageType
	Capacity            int64 // file system size
	Free                int64 // file system free space (statfs available)
	Available           int64 // Free minus Reserved minus ReservedForReplicas
	Used                int64 // bytes of replica data and meta files in the map
	Reserved            int64
	ReservedForReplicas int64
	NumBlocks           int
	Failed              bool
	FailureReason       string
}

func (d *Dataset) diskUsage(v *volume) (DiskUsage, error) {
	if d.cfg.DiskUsage != nil {
		return d.cfg.DiskUsage(v.path)
	}
	return d.fs.DiskUsage(v.path)
}

// available is the space a new replica may take on v. Called with d.mu held.
func (d *Dataset) available(v *volume) (int64, error) {
	du, err := d.diskUsage(v)
	if err != nil {
		return 0, err
	}
	return max(0, int64(du.Available)-v.reserved-v.reservedForReplicas), nil
}

// chooseVolume picks a volume with room for need bytes and reserves them.
// Called with d.mu held for writing.
func (d *Dataset) chooseVolume(need int64, opts CreateOptions) (*volume, error) {
	var cands []*volume
	for _, v := range d.vols {
		if v.failed || opts.StorageType != StorageUnspecified && v.typ != opts.StorageType ||
			opts.StorageID != "" && v.storageID != opts.StorageID {
			continue
		}
		cands = append(cands, v)
	}
	if len(cands) == 0 {
		return nil, newErr(KindUnavailable, "no-volume", "no usable volume of storage type %v (storage id %q)", opts.StorageType, opts.StorageID)
	}
	var best *volume
	var bestAvail, maxAvail int64
	for i := range cands {
		v := cands[i]
		if d.cfg.VolumeChoice == RoundRobin {
			v = cands[(d.rrNext+i)%len(cands)]
		}
		avail, err := d.available(v)
		if err != nil {
			d.scheduleCheck(v)
			continue
		}
		maxAvail = max(maxAvail, avail)
		if avail < need {
			continue
		}
		if d.cfg.VolumeChoice == RoundRobin {
			best = v
			d.rrNext = (d.rrNext + i + 1) % len(cands)
			break
		}
		if best == nil || avail > bestAvail {
			best, bestAvail = v, avail
		}
	}
	if best == nil {
		return nil, newErr(KindDiskOutOfSpace, "disk-out-of-space", "no volume has %d bytes available (most available: %d)", need, maxAvail)
	}
	best.reservedForReplicas += need
	return best, nil
}

// releaseReservation gives back up to n bytes reserved by r. d.mu held.
func releaseReservation(r *replica, n int64) {
	n = min(n, r.reserved)
	if n <= 0 {
		return
	}
	r.reserved -= n
	r.vol.reservedForReplicas -= n
}

// VolumeInfo returns one entry per configured volume.
func (d *Dataset) VolumeInfo() []VolumeInfo {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]VolumeInfo, len(d.vols))
	for i, v := range d.vols {
		vi := VolumeInfo{Path: v.path, StorageID: v.storageID, StorageType: v.typ, Reserved: v.reserved,
			ReservedForReplicas: v.reservedForReplicas, Failed: v.failed}
		if v.failErr != nil {
			vi.FailureReason = v.failErr.Error()
		}
		if du, err := d.diskUsage(v); err == nil && !v.failed {
			vi.Capacity, vi.Free = int64(du.Capacity), int64(du.Available)
			vi.Available = max(0, vi.Free-v.reserved-v.reservedForReplicas)
		}
		out[i] = vi
	}
	for _, p := range d.pools {
		for _, r := range p.replicas {
			vi := &out[r.vol.idx]
			vi.NumBlocks++
			vi.Used += r.bytesOnDisk + r.hdr.MetaFileSize(r.bytesOnDisk)
		}
	}
	return out
}

// CheckVolumes probes every volume in service (directories present, a file
// can be created, written, synced and removed) and takes failed ones out of
// service. It returns the paths of newly failed volumes, and a KindUnavailable
// error once more than VolumeFailuresTolerated volumes have failed.
func (d *Dataset) CheckVolumes(ctx context.Context) ([]string, error) {
	d.mu.RLock()
	vols := append([]*volume(nil), d.vols...)
	d.mu.RUnlock()
	var failed []string
	for _, v := range vols {
		if err := ctx.Err(); err != nil {
			return failed, ioErr(err)
		}
		if d.checkVolume(v) {
			failed = append(failed, v.path)
		}
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return failed, d.failedErr
}

// checkVolume probes v and fails it on error; it reports whether v failed now.
func (d *Dataset) checkVolume(v *volume) bool {
	d.mu.RLock()
	if v.failed {
		d.mu.RUnlock()
		return false
	}
	pools := make([]string, 0, len(d.pools))
	for id := range d.pools {
		pools = append(pools, id)
	}
	d.mu.RUnlock()
	err := d.probeVolume(v, pools)
	if err == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v.failed {
		return false
	}
	d.failVolumeLocked(v, err)
	return true
}

func (d *Dataset) probeVolume(v *volume, pools []string) error {
	dirs := []string{filepath.Join(v.path, dirCurrent)}
	for _, bpid := range pools {
		pp := newPoolPaths(v.path, bpid)
		dirs = append(dirs, pp.finalized, pp.rbw, pp.tmp)
	}
	for _, dir := range dirs {
		st, err := d.fs.Stat(dir)
		if err != nil {
			return err
		}
		if !st.IsDir {
			return fmt.Errorf("%s is not a directory", dir)
		}
	}
	probe := filepath.Join(v.path, dirCurrent, fmt.Sprintf(".probe-%d", d.seq.Add(1)))
	if err := writeFileDurable(d.fs, probe, []byte("probe")); err != nil {
		d.fs.Remove(probe)
		return err
	}
	return d.fs.Remove(probe)
}

// failVolumeLocked takes v out of service: its replicas leave the map (their
// writers are stopped) and are reported deleted. d.mu held for writing.
func (d *Dataset) failVolumeLocked(v *volume, cause error) {
	v.failed, v.failErr = true, cause
	d.stats.volumeFailures.Add(1)
	n := 0
	for _, p := range d.pools {
		for id, r := range p.replicas {
			if r.vol != v {
				continue
			}
			if r.writer != nil {
				r.writer.signalStop()
			}
			d.uncacheLocked(r)
			delete(p.replicas, id)
			if r.state != StateTemporary {
				d.publish(Change{Kind: ChangeDeleted, Pool: p.id, StorageID: v.storageID, Replica: r.reported()})
			}
			n++
		}
	}
	v.reservedForReplicas = 0
	failures := 0
	for _, x := range d.vols {
		if x.failed {
			failures++
		}
	}
	d.log.Error("volume failed", "volume", v.path, "storage-id", v.storageID, "replicas-removed", n, "error", cause)
	if failures > d.cfg.VolumeFailuresTolerated && d.failedErr == nil {
		d.failedErr = newErr(KindUnavailable, "too-many-volume-failures",
			"%d volumes failed, %d tolerated", failures, d.cfg.VolumeFailuresTolerated)
		d.log.Error("dataset failed: too many volume failures", "failed", failures, "tolerated", d.cfg.VolumeFailuresTolerated)
	}
}

// scheduleCheck asks the checker goroutine to probe v (after an I/O error).
func (d *Dataset) scheduleCheck(v *volume) {
	select {
	case d.checkCh <- v:
	default:
	}
}

// volumeErr classifies an I/O error on v: ENOSPC → KindDiskOutOfSpace,
// anything else also schedules a check of the volume.
func (d *Dataset) volumeErr(v *volume, err error) error {
	if err == nil {
		return nil
	}
	e := ioErr(err)
	if e.Kind == KindIO {
		d.scheduleCheck(v)
	}
	return e
}

func isNotExist(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT)
}

// loadStorageID reads or creates <vol>/current/.storage-id.
func loadStorageID(fsys FS, volPath string) (string, error) {
	cur := filepath.Join(volPath, dirCurrent)
	if err := mkdirAllDurable(fsys, cur); err != nil {
		return "", err
	}
	name := filepath.Join(cur, storageIDFile)
	b, err := readFile(fsys, name)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !strings.HasPrefix(id, "DS-") || len(id) > 64 {
			return "", newErr(KindCorrupt, "bad-storage-id", "volume %s: bad storage id file", volPath)
		}
		return id, nil
	}
	if !isNotExist(err) {
		return "", err
	}
	id := "DS-" + randomHex(16)
	// Durability: id file synced, then its directory, before it is used.
	tmp := name + ".tmp"
	if err := writeFileDurable(fsys, tmp, []byte(id+"\n")); err != nil {
		return "", err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return "", err
	}
	return id, fsys.SyncDir(cur)
}
