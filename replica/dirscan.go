package replica

import (
	"context"
	"path/filepath"
	"time"
)

// ScanInfo is what the directory scanner found on disk for one block id on
// one volume (HDFS ScanInfo). Empty paths mean "no such file".
type ScanInfo struct {
	BlockID  uint64
	Volume   string // volume path
	DataPath string
	MetaPath string
}

// ScanReport summarises one Reconcile.
type ScanReport struct {
	Files          int // replica files seen on disk
	Differences    int // ids passed to CheckAndUpdate
	MissingInMem   int
	MissingOnDisk  int
	GSFixed        int
	LengthFixed    int // reported bad
	Duplicates     int
	OrphanMetaGone int
}

// StartDirectoryScanner runs Reconcile of every pool each interval until
// Close. Open starts it when Config.DirScanInterval > 0.
func (d *Dataset) StartDirectoryScanner(interval time.Duration) {
	stop := make(chan struct{})
	d.closeMu.Lock()
	d.scanners = append(d.scanners, func() { close(stop) })
	d.closeMu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-d.stopCh:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-stop:
				case <-d.stopCh:
				case <-ctx.Done():
				}
				cancel()
			}()
			for _, bpid := range d.BlockPools() {
				if _, err := d.Reconcile(ctx, bpid); err != nil && ctx.Err() == nil {
					d.log.Warn("directory scan failed", "pool", bpid, "error", err)
				}
			}
			cancel()
		}
	}()
}

type memView struct {
	vol    *volume
	gs     uint64
	length int64
}

// Reconcile walks the pool's finalized/ directories on every volume,
// compares them with the replica map and fixes the map (design §R2.14, §R6.3):
// differences go through CheckAndUpdate, which re-checks under the lock.
// Paced by Config.DirScanFilesPerSecond.
func (d *Dataset) Reconcile(ctx context.Context, bpid string) (ScanReport, error) {
	const op = "reconcile"
	var rep ScanReport
	d.mu.RLock()
	_, err := d.poolLocked(bpid)
	vols := append([]*volume(nil), d.vols...)
	d.mu.RUnlock()
	if err != nil {
		return rep, at(err, op, bpid, 0)
	}
	d.stats.dirScans.Add(1)
	th := newThrottle(float64(d.cfg.DirScanFilesPerSecond), d.stopCh)
	disk := map[*volume]map[uint64]ScanInfo{}
	for _, v := range vols {
		if v.failed {
			continue
		}
		found := map[uint64]ScanInfo{}
		var walk func(dir string) error
		walk = func(dir string) error {
			ents, err := d.fs.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := th.wait(ctx, 1); err != nil {
					return err
				}
				p := filepath.Join(dir, e.Name)
				if e.IsDir {
					if err := walk(p); err != nil {
						return err
					}
					continue
				}
				fn, ok := parseFileName(e.Name)
				if !ok || fn.trunc || fn.restart || fn.id == 0 {
					continue
				}
				rep.Files++
				si := found[fn.id]
				si.BlockID, si.Volume = fn.id, v.path
				if fn.meta {
					if si.MetaPath == "" || metaGS(si.MetaPath) < fn.gs {
						si.MetaPath = p
					}
				} else {
					si.DataPath = p
				}
				found[fn.id] = si
			}
			return nil
		}
		if err := walk(newPoolPaths(v.path, bpid).finalized); err != nil {
			if ctx.Err() != nil {
				return rep, at(ctx.Err(), op, bpid, 0)
			}
			d.scheduleCheck(v)
			continue
		}
		disk[v] = found
	}
	d.stats.dirScanFiles.Add(int64(rep.Files))
	// Memory view of FINALIZED replicas.
	mem := map[uint64]memView{}
	d.mu.RLock()
	if p, err := d.poolLocked(bpid); err == nil {
		for id, r := range p.replicas {
			if r.state == StateFinalized {
				mem[id] = memView{vol: r.vol, gs: r.gs, length: r.numBytes}
			}
		}
	}
	d.mu.RUnlock()
	var diffs []ScanInfo
	for v, found := range disk {
		for id, si := range found {
			m, ok := mem[id]
			switch {
			case !ok || m.vol != v:
				diffs = append(diffs, si)
			case si.MetaPath == "" || metaGS(si.MetaPath) != m.gs || si.DataPath == "":
				diffs = append(diffs, si)
			default:
				if st, err := d.fs.Stat(si.DataPath); err != nil || st.Size != m.length {
					diffs = append(diffs, si)
				}
			}
		}
	}
	for id, m := range mem {
		if found, ok := disk[m.vol]; ok {
			if _, ok := found[id]; !ok {
				diffs = append(diffs, ScanInfo{BlockID: id, Volume: m.vol.path})
			}
		}
	}
	rep.Differences = len(diffs)
	for _, si := range diffs {
		if err := ctx.Err(); err != nil {
			return rep, at(err, op, bpid, 0)
		}
		res, err := d.checkAndUpdate(bpid, si)
		if err != nil {
			return rep, err
		}
		rep.MissingInMem += res.MissingInMem
		rep.MissingOnDisk += res.MissingOnDisk
		rep.GSFixed += res.GSFixed
		rep.LengthFixed += res.LengthFixed
		rep.Duplicates += res.Duplicates
		rep.OrphanMetaGone += res.OrphanMetaGone
	}
	return rep, nil
}

func metaGS(path string) uint64 {
	fn, _ := parseFileName(filepath.Base(path))
	return fn.gs
}

// CheckAndUpdate reconciles one block id's files on disk with the replica
// map (HDFS checkAndUpdate, design §R2.14). Only an absent or FINALIZED memory
// replica is touched. A length mismatch fixes the memory length and reports
// the replica bad (Config.OnBadBlock).
func (d *Dataset) CheckAndUpdate(bpid string, si ScanInfo) error {
	_, err := d.checkAndUpdate(bpid, si)
	return err
}

func (d *Dataset) checkAndUpdate(bpid string, si ScanInfo) (ScanReport, error) {
	const op = "check-and-update"
	var rep ScanReport
	var bad *BadBlock
	d.mu.Lock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		d.mu.Unlock()
		return rep, at(err, op, bpid, si.BlockID)
	}
	var vol *volume
	for _, v := range d.vols {
		if v.path == si.Volume && !v.failed {
			vol = v
		}
	}
	if vol == nil {
		d.mu.Unlock()
		return rep, at(newErr(KindNotFound, "volume-not-found", "no volume %s in service", si.Volume), op, bpid, si.BlockID)
	}
	id := si.BlockID
	mem := p.replicas[id]
	if mem != nil && mem.state != StateFinalized {
		d.mu.Unlock()
		return rep, nil // being written or recovered: not the scanner's business
	}
	metaOK := si.MetaPath != "" && exists(d.fs, si.MetaPath)
	dataOK := si.DataPath != "" && exists(d.fs, si.DataPath)
	var diskGS uint64
	if metaOK {
		diskGS = metaGS(si.MetaPath)
	}
	switch {
	case !dataOK && mem == nil:
		if metaOK && d.fs.Remove(si.MetaPath) == nil {
			rep.OrphanMetaGone++
			d.log.Warn("scanner: deleted meta file without block", "path", si.MetaPath)
		}
	case !dataOK:
		if !exists(d.fs, mem.dataPath()) {
			d.uncacheLocked(mem)
			delete(p.replicas, id)
			rep.MissingOnDisk++
			d.log.Warn("scanner: removed replica whose block file is gone", "pool", bpid, "block-id", id)
			d.publish(Change{Kind: ChangeDeleted, Pool: bpid, StorageID: mem.vol.storageID, Replica: mem.reported()})
			if metaOK {
				d.fs.Remove(si.MetaPath)
			}
		}
	case mem == nil:
		st, err := d.fs.Stat(si.DataPath)
		if err != nil {
			break
		}
		r := &replica{pool: bpid, id: id, gs: diskGS, state: StateFinalized, vol: vol, dir: inFinalized,
			numBytes: st.Size, bytesOnDisk: st.Size, bytesAcked: st.Size, hdr: DefaultMetaHeader(d.cfg.BytesPerChecksum)}
		if r.dataPath() != si.DataPath {
			if !metaOK || filepath.Dir(si.MetaPath) != filepath.Dir(si.DataPath) || d.moveToCanonical(r, filepath.Dir(si.DataPath)) != nil {
				break
			}
		}
		if metaOK {
			if h, err := d.readHeader(r.metaPath()); err == nil {
				r.hdr = h
			}
		}
		p.replicas[id] = r
		rep.MissingInMem++
		d.log.Warn("scanner: added replica missing from memory", "pool", bpid, "block-id", id, "gs", diskGS)
		d.publish(Change{Kind: ChangeReceived, Pool: bpid, StorageID: vol.storageID, Replica: r.reported()})
	default:
		if mem.vol != vol {
			// The same id on two volumes.
			switch {
			case exists(d.fs, mem.dataPath()) && metaOK && exists(d.fs, mem.metaPath()):
				st, _ := d.fs.Stat(si.DataPath)
				other := &replica{pool: bpid, id: id, gs: diskGS, state: StateFinalized, vol: vol, dir: inFinalized,
					numBytes: st.Size, bytesOnDisk: st.Size, bytesAcked: st.Size, hdr: mem.hdr}
				if other.dataPath() == si.DataPath {
					d.addLoadedLocked(p, other)
					rep.Duplicates++
				}
			case exists(d.fs, mem.dataPath()) && !metaOK:
				d.fs.Remove(si.DataPath) // a stray copy without checksums
			case !exists(d.fs, mem.dataPath()):
				mem.vol, mem.gs = vol, diskGS
				rep.GSFixed++
			}
			break
		}
		if mem.gs != diskGS && !exists(d.fs, mem.metaPath()) {
			gs := uint64(0)
			if metaOK && filepath.Dir(si.MetaPath) == mem.dirPath() {
				gs = diskGS
			}
			d.log.Warn("scanner: fixed generation stamp", "pool", bpid, "block-id", id, "from", mem.gs, "to", gs)
			mem.gs = gs
			rep.GSFixed++
		}
		if st, err := d.fs.Stat(mem.dataPath()); err == nil && st.Size != mem.numBytes {
			d.log.Warn("scanner: length mismatch, reporting bad replica", "pool", bpid, "block-id", id, "memory", mem.numBytes, "disk", st.Size)
			bad = &BadBlock{Pool: bpid, Block: Block{ID: id, GS: mem.gs, NumBytes: mem.numBytes}, StorageID: mem.vol.storageID, Reason: "length-mismatch"}
			mem.numBytes, mem.bytesOnDisk, mem.bytesAcked = st.Size, st.Size, st.Size
			d.uncacheLocked(mem)
			rep.LengthFixed++
		}
	}
	d.mu.Unlock()
	d.stats.dirScanMissingMem.Add(int64(rep.MissingInMem))
	d.stats.dirScanMissingDisk.Add(int64(rep.MissingOnDisk))
	d.stats.dirScanGSFixed.Add(int64(rep.GSFixed))
	d.stats.dirScanLenFixed.Add(int64(rep.LengthFixed))
	d.stats.dirScanOrphanMeta.Add(int64(rep.OrphanMetaGone))
	if bad != nil {
		d.reportBad(*bad)
	}
	return rep, nil
}

func (d *Dataset) reportBad(b BadBlock) {
	d.stats.corruptBlocks.Add(1)
	if d.cfg.OnBadBlock != nil {
		d.cfg.OnBadBlock(b)
	}
}
