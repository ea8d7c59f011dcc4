package replica

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// diskFile is one replica file found by a scan.
type diskFile struct {
	kind dirKind
	dir  string
	gs   uint64 // meta files
}

// fileGroup is every file of one block id on one volume's pool.
type fileGroup struct {
	data, meta, trunc []diskFile
	restart           []diskFile // restart markers (rbw/ only is meaningful)
}

func (d *Dataset) addToGroup(groups map[uint64]*fileGroup, kind dirKind, dir, name string) bool {
	fn, ok := parseFileName(name)
	if !ok || fn.id == 0 {
		return false
	}
	g := groups[fn.id]
	if g == nil {
		g = &fileGroup{}
		groups[fn.id] = g
	}
	f := diskFile{kind: kind, dir: dir, gs: fn.gs}
	switch {
	case fn.restart:
		g.restart = append(g.restart, f)
	case fn.trunc:
		g.trunc = append(g.trunc, f)
	case fn.meta:
		g.meta = append(g.meta, f)
	default:
		g.data = append(g.data, f)
	}
	return true
}

// gatherGroups lists the replica files of finalized/ (recursively) and rbw/.
func (d *Dataset) gatherGroups(ctx context.Context, pp poolPaths) (map[uint64]*fileGroup, error) {
	groups := map[uint64]*fileGroup{}
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := d.fs.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.IsDir {
				if err := walk(filepath.Join(dir, e.Name)); err != nil {
					return err
				}
			} else if !d.addToGroup(groups, inFinalized, dir, e.Name) {
				d.log.Warn("unexpected file in finalized", "path", filepath.Join(dir, e.Name))
			}
		}
		return nil
	}
	if err := walk(pp.finalized); err != nil {
		return nil, err
	}
	ents, err := d.fs.ReadDir(pp.rbw)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !e.IsDir && !d.addToGroup(groups, inRbw, pp.rbw, e.Name) {
			d.log.Warn("unexpected file in rbw", "path", filepath.Join(pp.rbw, e.Name))
		}
	}
	return groups, nil
}

// loadVolumePool is the restart of one pool on one volume (design §R1.4):
// tmp/ is wiped, half-done truncations and moves are completed or undone,
// rbw/ replicas load as RWR with their checksum-validated length (as RBW
// while an unexpired restart marker says the node was restarted for an
// upgrade), finalized/ as FINALIZED. Duplicates are resolved by the caller.
func (d *Dataset) loadVolumePool(ctx context.Context, v *volume, bpid string) ([]*replica, error) {
	pp := newPoolPaths(v.path, bpid)
	// TEMPORARY replicas and pending deletions vanish (never reported).
	if err := d.fs.RemoveAll(pp.tmp); err != nil {
		return nil, err
	}
	for _, dir := range []string{pp.finalized, pp.rbw, pp.tmp} {
		if err := mkdirAllDurable(d.fs, dir); err != nil {
			return nil, err
		}
	}
	groups, err := d.gatherGroups(ctx, pp)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []*replica
	for _, id := range ids {
		out = append(out, d.resolveGroup(v, bpid, id, groups[id])...)
	}
	return out, nil
}

// resolveGroup turns the files of one id into replicas (more than one if
// duplicated), repairing what a crash left half done.
func (d *Dataset) resolveGroup(v *volume, bpid string, id uint64, g *fileGroup) []*replica {
	// 0. Restart markers: an unexpired one keeps the rbw/ replica RBW. Each
	// is read once and deleted, whatever it says (design §R1.4 step 5).
	keepRbw := false
	for _, m := range g.restart {
		path := filepath.Join(m.dir, restartName(id))
		if m.kind == inRbw && d.restartMarkerLive(path) {
			keepRbw = true
		}
		if err := d.fs.Remove(path); err == nil {
			d.fs.SyncDir(m.dir)
		}
	}
	has := func(files []diskFile, dir string) bool {
		for _, f := range files {
			if f.dir == dir {
				return true
			}
		}
		return false
	}
	// 1. A leftover <meta>.trunc: roll forward if the data file was already
	// truncated to match it (it verifies), else drop it.
	for _, t := range g.trunc {
		tmp := filepath.Join(t.dir, metaName(id, t.gs)+truncSuffix)
		final := filepath.Join(t.dir, metaName(id, t.gs))
		if has(g.data, t.dir) && d.truncMatches(filepath.Join(t.dir, blockName(id)), tmp) {
			if err := d.fs.Rename(tmp, final); err == nil {
				d.fs.SyncDir(t.dir)
				if !hasMeta(g.meta, t.dir, t.gs) {
					g.meta = append(g.meta, diskFile{kind: t.kind, dir: t.dir, gs: t.gs})
				}
				d.log.Info("load: completed interrupted truncate", "pool", bpid, "block-id", id)
				continue
			}
		}
		d.fs.Remove(tmp)
	}
	// 2. One meta per directory: the highest GS wins.
	best := map[string]diskFile{}
	for _, m := range g.meta {
		if b, ok := best[m.dir]; !ok || m.gs > b.gs {
			if ok {
				d.fs.Remove(filepath.Join(b.dir, metaName(id, b.gs)))
			}
			best[m.dir] = m
		} else {
			d.fs.Remove(filepath.Join(m.dir, metaName(id, m.gs)))
		}
	}
	// 3. Pair data and meta per directory; a data file whose meta is alone in
	// another directory was being moved (meta moves first): finish the move.
	type pair struct {
		data diskFile
		meta *diskFile
	}
	var pairs []pair
	var lonelyData []diskFile
	for _, df := range g.data {
		if m, ok := best[df.dir]; ok {
			pairs = append(pairs, pair{data: df, meta: &m})
			delete(best, df.dir)
		} else {
			lonelyData = append(lonelyData, df)
		}
	}
	for _, df := range lonelyData {
		var target *diskFile
		for dir, m := range best {
			if dir != df.dir {
				m := m
				target = &m
				delete(best, dir)
				break
			}
		}
		if target == nil {
			pairs = append(pairs, pair{data: df})
			continue
		}
		src, dst := filepath.Join(df.dir, blockName(id)), filepath.Join(target.dir, blockName(id))
		if err := d.fs.Rename(src, dst); err != nil {
			d.log.Warn("load: cannot complete move", "pool", bpid, "block-id", id, "error", err)
			pairs = append(pairs, pair{data: df})
			continue
		}
		d.fs.SyncDir(target.dir)
		d.fs.SyncDir(df.dir)
		d.log.Info("load: completed interrupted move", "pool", bpid, "block-id", id, "to", target.dir)
		pairs = append(pairs, pair{data: diskFile{kind: target.kind, dir: target.dir}, meta: target})
	}
	// 4. Meta files without data: the replica never existed or was deleted.
	for _, m := range best {
		d.fs.Remove(filepath.Join(m.dir, metaName(id, m.gs)))
	}
	var out []*replica
	for _, p := range pairs {
		if r := d.loadPair(v, bpid, id, p.data, p.meta, keepRbw); r != nil {
			out = append(out, r)
		}
	}
	return out
}

func hasMeta(files []diskFile, dir string, gs uint64) bool {
	for _, f := range files {
		if f.dir == dir && f.gs == gs {
			return true
		}
	}
	return false
}

// truncMatches: the data file's length needs exactly the temp meta's
// checksums and its last chunk verifies against them.
func (d *Dataset) truncMatches(dataPath, tmpMeta string) bool {
	b, err := readFile(d.fs, tmpMeta)
	if err != nil {
		return false
	}
	hdr, sums, err := ParseMeta(b)
	if err != nil {
		return false
	}
	st, err := d.fs.Stat(dataPath)
	if err != nil || hdr.Chunks(st.Size) != int64(len(sums)) {
		return false
	}
	if st.Size == 0 {
		return true
	}
	bpc := int64(hdr.BytesPerChecksum)
	last := (st.Size - 1) / bpc * bpc
	buf := make([]byte, st.Size-last)
	f, err := d.fs.OpenFile(dataPath, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, last); err != nil && err != io.EOF {
		return false
	}
	return hdr.Sum(buf) == sums[len(sums)-1]
}

// loadPair builds the replica of one data file (and its meta, if any);
// keepRbw loads an rbw/ replica as RBW instead of RWR.
func (d *Dataset) loadPair(v *volume, bpid string, id uint64, data diskFile, meta *diskFile, keepRbw bool) *replica {
	r := &replica{pool: bpid, id: id, vol: v, dir: data.kind, hdr: DefaultMetaHeader(d.cfg.BytesPerChecksum)}
	if meta != nil {
		r.gs = meta.gs
	}
	dataPath := filepath.Join(data.dir, blockName(id))
	st, err := d.fs.Stat(dataPath)
	if err != nil {
		d.log.Warn("load: cannot stat block file", "path", dataPath, "error", err)
		return nil
	}
	if data.kind == inFinalized {
		// FINALIZED: length = file length; GS from the meta name (0 if there
		// is no meta: the coordinator will find it stale). Checksums are the
		// block scanner's job.
		r.state = StateFinalized
		r.numBytes = st.Size
		if meta != nil {
			metaPath := filepath.Join(meta.dir, metaName(id, meta.gs))
			if mst, err := d.fs.Stat(metaPath); err != nil || mst.Size != r.hdr.MetaFileSize(st.Size) {
				if h, err := d.readHeader(metaPath); err == nil {
					r.hdr = h
				}
			}
		}
		if r.dataPath() != dataPath && meta != nil && meta.dir == data.dir {
			// Not in its canonical subdir (another layout): move it there,
			// meta first as always.
			if err := d.moveToCanonical(r, data.dir); err != nil {
				d.log.Warn("load: cannot move finalized replica to its subdir", "path", dataPath, "error", err)
				return nil
			}
		}
	} else {
		r.state = StateRWR
		if meta != nil {
			r.numBytes, r.hdr = d.validateRbw(dataPath, filepath.Join(meta.dir, metaName(id, meta.gs)), st.Size)
			if keepRbw {
				// Back from a restart for upgrade: RBW with no writer, every
				// validated byte acked; its writer resumes it with a pipeline
				// recovery (RecoverRbw). It reserves the rest of its block.
				r.state = StateRBW
				r.reserved = max(0, d.cfg.BlockSize-r.numBytes)
			}
		}
	}
	r.bytesOnDisk, r.bytesAcked = r.numBytes, r.numBytes
	return r
}

func (d *Dataset) readHeader(path string) (MetaHeader, error) {
	f, err := d.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return MetaHeader{}, err
	}
	defer f.Close()
	return ReadMetaHeader(io.NewSectionReader(f, 0, MetaHeaderSize))
}

// validateRbw returns the length of the longest prefix of the data file
// whose chunks all verify, and truncates data then meta to it (a torn tail
// is dropped; data first, so a crash in between still validates the same).
func (d *Dataset) validateRbw(dataPath, metaPath string, dataLen int64) (int64, MetaHeader) {
	hdr := DefaultMetaHeader(d.cfg.BytesPerChecksum)
	mb, err := readFile(d.fs, metaPath)
	if err != nil {
		return 0, hdr
	}
	if len(mb) < MetaHeaderSize {
		return 0, hdr
	}
	h, err := ParseMetaHeader(mb)
	if err != nil {
		return 0, hdr
	}
	nsums := (len(mb) - MetaHeaderSize) / ChecksumSize
	_, sums, _ := ParseMeta(mb[:MetaHeaderSize+nsums*ChecksumSize])
	f, err := d.fs.OpenFile(dataPath, os.O_RDWR, 0)
	if err != nil {
		return 0, h
	}
	defer f.Close()
	bpc := int64(h.BytesPerChecksum)
	chunks := min(h.Chunks(dataLen), int64(len(sums)))
	var good int64
	buf := make([]byte, max(bpc, 1<<20/bpc*bpc))
	for k := int64(0); k < chunks; {
		n := min(int64(len(buf))/bpc, chunks-k)
		off := k * bpc
		want := min(n*bpc, dataLen-off)
		got, err := f.ReadAt(buf[:want], off)
		if err != nil && err != io.EOF {
			break
		}
		bad := h.Verify(buf[:got], sums[k:k+h.Chunks(int64(got))])
		if bad >= 0 {
			good = off + int64(bad)*bpc
			if k+int64(bad) == int64(len(sums))-1 {
				// The last stored checksum may cover a shorter prefix of its
				// chunk (data written, checksum not yet): keep that prefix.
				chunk := buf[int64(bad)*bpc : min(int64(got), int64(bad+1)*bpc)]
				good += h.longestMatchingPrefix(chunk, sums[k+int64(bad)])
			}
			break
		}
		good = off + int64(got)
		if int64(got) < want {
			break
		}
		k += n
	}
	if dataLen > good {
		if f.Truncate(good) == nil {
			f.Sync()
		}
		d.log.Info("load: dropped unverified rbw tail", "path", dataPath, "from", dataLen, "to", good)
	}
	if int64(len(mb)) > h.MetaFileSize(good) {
		if d.fs.Truncate(metaPath, h.MetaFileSize(good)) == nil {
			syncFile(d.fs, metaPath)
		}
	}
	return good, h
}

// moveToCanonical moves a finalized replica's files from dir into its
// canonical subdir.
func (d *Dataset) moveToCanonical(r *replica, dir string) error {
	dst := r.dirPath()
	if err := mkdirAllDurable(d.fs, dst); err != nil {
		return err
	}
	if err := d.fs.Rename(filepath.Join(dir, metaName(r.id, r.gs)), r.metaPath()); err != nil {
		return err
	}
	if err := d.fs.Rename(filepath.Join(dir, blockName(r.id)), r.dataPath()); err != nil {
		return err
	}
	d.fs.SyncDir(dst)
	return d.fs.SyncDir(dir)
}
