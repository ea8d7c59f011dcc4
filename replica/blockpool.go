package replica

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// AddBlockPool creates the pool's directories on every volume in service
// and loads the replicas found there (restart semantics, doc.go "Load").
// Adding a loaded pool is a no-op. A volume whose load fails is failed.
func (d *Dataset) AddBlockPool(ctx context.Context, bpid string) error {
	const op = "add-block-pool"
	if err := ValidatePoolID(bpid); err != nil {
		return at(err, op, bpid, 0)
	}
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	d.mu.RLock()
	err := d.usableLocked()
	_, loaded := d.pools[bpid]
	var vols []*volume
	for _, v := range d.vols {
		if !v.failed {
			vols = append(vols, v)
		}
	}
	d.mu.RUnlock()
	if err != nil || loaded {
		return at(err, op, bpid, 0)
	}
	results := make([][]*replica, len(vols))
	errs := make([]error, len(vols))
	var wg sync.WaitGroup
	for i, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = d.loadVolumePool(ctx, v, bpid)
		}()
	}
	wg.Wait()
	if err := ctxErr(ctx); err != nil {
		return at(err, op, bpid, 0)
	}
	p := &blockPool{id: bpid, replicas: map[uint64]*replica{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, v := range vols {
		if errs[i] != nil {
			d.failVolumeLocked(v, errs[i])
			continue
		}
		for _, r := range results[i] {
			d.addLoadedLocked(p, r)
		}
	}
	if err := d.usableLocked(); err != nil {
		return at(err, op, bpid, 0)
	}
	d.pools[bpid] = p
	d.log.Info("block pool loaded", "pool", bpid, "replicas", len(p.replicas))
	return nil
}

// addLoadedLocked adds a replica found on disk, resolving a duplicate
// (HDFS resolveDuplicateReplicas, design §R2.15).
func (d *Dataset) addLoadedLocked(p *blockPool, r *replica) {
	r.vol.reservedForReplicas += r.reserved // a reloaded RBW's rest of block
	old := p.replicas[r.id]
	if old == nil {
		p.replicas[r.id] = r
		return
	}
	if old.dataPath() == r.dataPath() {
		releaseReservation(r, r.reserved)
		return // the same files: never delete anything
	}
	d.stats.dirScanDuplicates.Add(1)
	keep, lose := old, r
	if keepSecond(old, r) {
		keep, lose = r, old
	}
	d.log.Warn("duplicate replica", "pool", p.id, "block-id", r.id, "keep", keep.dataPath(), "drop", lose.dataPath())
	if !d.cfg.DeleteDuplicateReplicas {
		// Both stay on disk; the known one stays in the map and the other
		// holds no space (a reloaded RBW reserves the rest of its block).
		releaseReservation(r, r.reserved)
		return
	}
	p.replicas[r.id] = keep
	if lose.writer != nil {
		lose.writer.signalStop()
	}
	d.uncacheLocked(lose)
	releaseReservation(lose, lose.reserved)
	d.fs.Remove(lose.dataPath())
	d.fs.Remove(lose.metaPath())
	d.fs.SyncDir(lose.dirPath())
}

// keepSecond: higher GS, then longer, then persistent storage; else the
// already known one.
func keepSecond(r1, r2 *replica) bool {
	if r1.gs != r2.gs {
		return r2.gs > r1.gs
	}
	if r1.numBytes != r2.numBytes {
		return r2.numBytes > r1.numBytes
	}
	if r1.vol.typ.Persistent() != r2.vol.typ.Persistent() {
		return r2.vol.typ.Persistent()
	}
	return false
}

// BlockPools lists loaded block pools.
func (d *Dataset) BlockPools() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.pools))
	for id := range d.pools {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// ShutdownBlockPool drops a pool from memory (its writers stopped); files
// stay on disk and are loaded again by AddBlockPool.
func (d *Dataset) ShutdownBlockPool(bpid string) error {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return at(err, "shutdown-block-pool", bpid, 0)
	}
	d.dropPoolLocked(p)
	return nil
}

func (d *Dataset) dropPoolLocked(p *blockPool) {
	for _, r := range p.replicas {
		if r.writer != nil {
			r.writer.signalStop()
			r.writer = nil
		}
		d.uncacheLocked(r)
		releaseReservation(r, r.reserved)
	}
	delete(d.pools, p.id)
}

// DeleteBlockPool removes a pool's directories from every volume. A pool
// holding replicas (in memory or on disk) is refused with
// KindFailedPrecondition unless force.
func (d *Dataset) DeleteBlockPool(bpid string, force bool) error {
	const op = "delete-block-pool"
	if err := ValidatePoolID(bpid); err != nil {
		return at(err, op, bpid, 0)
	}
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usableLocked(); err != nil {
		return at(err, op, bpid, 0)
	}
	p := d.pools[bpid]
	if !force {
		if p != nil && len(p.replicas) > 0 {
			return at(newErr(KindFailedPrecondition, "block-pool-not-empty", "block pool holds %d replicas", len(p.replicas)), op, bpid, 0)
		}
		for _, v := range d.vols {
			if !v.failed && d.poolHasFiles(newPoolPaths(v.path, bpid)) {
				return at(newErr(KindFailedPrecondition, "block-pool-not-empty", "volume %s holds block files", v.path), op, bpid, 0)
			}
		}
	}
	if p != nil {
		d.dropPoolLocked(p)
	}
	for _, v := range d.vols {
		if v.failed {
			continue
		}
		pp := newPoolPaths(v.path, bpid)
		if err := d.fs.RemoveAll(pp.root); err != nil {
			return at(d.volumeErr(v, err), op, bpid, 0)
		}
		d.fs.SyncDir(filepath.Dir(pp.root))
	}
	return nil
}

// poolHasFiles reports whether finalized/ or rbw/ hold any block file.
func (d *Dataset) poolHasFiles(pp poolPaths) bool {
	var walk func(dir string) bool
	walk = func(dir string) bool {
		ents, _ := d.fs.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir && walk(filepath.Join(dir, e.Name)) || !e.IsDir && strings.HasPrefix(e.Name, blockPrefix) {
				return true
			}
		}
		return false
	}
	return walk(pp.finalized) || walk(pp.rbw)
}

// EnableTrash makes deletions of the pool move files to trash/ (the rolling
// upgrade window) instead of deleting them.
func (d *Dataset) EnableTrash(bpid string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return at(err, "enable-trash", bpid, 0)
	}
	p.trash = true
	return nil
}

// TrashEnabled reports whether deletions of the pool go to trash/.
func (d *Dataset) TrashEnabled(bpid string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, err := d.poolLocked(bpid)
	return err == nil && p.trash
}

// ClearTrash deletes the pool's trash/ on every volume and stops trashing
// (the upgrade was finalized).
func (d *Dataset) ClearTrash(bpid string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return at(err, "clear-trash", bpid, 0)
	}
	p.trash = false
	for _, v := range d.vols {
		if v.failed {
			continue
		}
		pp := newPoolPaths(v.path, bpid)
		if err := d.fs.RemoveAll(pp.trash); err != nil {
			return at(d.volumeErr(v, err), "clear-trash", bpid, 0)
		}
		d.fs.SyncDir(pp.root)
	}
	return nil
}

// RestoreTrash moves every file in the pool's trash/ back where it was and
// loads the restored replicas (the upgrade was rolled back). Restored
// replicas reach the coordinator with the next full block report.
func (d *Dataset) RestoreTrash(ctx context.Context, bpid string) (restored int, err error) {
	const op = "restore-trash"
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return 0, at(err, op, bpid, 0)
	}
	for _, v := range d.vols {
		if v.failed {
			continue
		}
		pp := newPoolPaths(v.path, bpid)
		if !exists(d.fs, pp.trash) {
			continue
		}
		groups := map[uint64]*fileGroup{}
		var moveBack func(rel string) error
		moveBack = func(rel string) error {
			ents, err := d.fs.ReadDir(filepath.Join(pp.trash, rel))
			if err != nil {
				return err
			}
			for _, e := range ents {
				if e.IsDir {
					if err := moveBack(filepath.Join(rel, e.Name)); err != nil {
						return err
					}
					continue
				}
				dst := filepath.Join(pp.root, dirCurrent, rel)
				if err := mkdirAllDurable(d.fs, dst); err != nil {
					return err
				}
				if err := d.fs.Rename(filepath.Join(pp.trash, rel, e.Name), filepath.Join(dst, e.Name)); err != nil {
					return err
				}
				d.fs.SyncDir(dst)
				kind := inFinalized
				if rel == dirRbw {
					kind = inRbw
				}
				d.addToGroup(groups, kind, dst, e.Name)
			}
			return nil
		}
		if err := moveBack("."); err != nil {
			return restored, at(d.volumeErr(v, err), op, bpid, 0)
		}
		d.fs.RemoveAll(pp.trash)
		for id, g := range groups {
			if p.replicas[id] != nil {
				continue // a live replica of the id; the scanner settles duplicates
			}
			for _, r := range d.resolveGroup(v, bpid, id, g) {
				d.addLoadedLocked(p, r)
				restored++
			}
		}
	}
	return restored, nil
}
