package replica

import (
	"encoding/binary"
	"io"
	"os"
)

// OpenBlock opens replica b.ID for reading up to its visible length
// (HDFS getBlockInputStream). The replica's GS must be ≥ b.GS
// (KindStaleGS); TEMPORARY is not readable (KindInvalidState).
func (d *Dataset) OpenBlock(bpid string, b Block) (BlockReader, error) {
	var br *blockReader
	err := d.view("open-block", bpid, b.ID, func(p *blockPool, r *replica) error {
		if err := readable(r, b); err != nil {
			return err
		}
		// Opened under the lock: no rename of these files can interleave,
		// and the open descriptors survive a later finalize (HDFS-17342).
		data, err := d.fs.OpenFile(r.dataPath(), os.O_RDONLY, 0)
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		meta, err := d.fs.OpenFile(r.metaPath(), os.O_RDONLY, 0)
		if err != nil {
			data.Close()
			return d.volumeErr(r.vol, err)
		}
		st := r.state
		if st == StateRUR {
			st = r.origState
		}
		br = &blockReader{d: d, info: r.info(), hdr: r.hdr, data: data, meta: meta,
			length: r.visibleLength(), inPipeline: st == StateRBW}
		if r.cached != nil {
			br.cached = r.cached.acquire()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return br, nil
}

func readable(r *replica, b Block) error {
	switch {
	case r == nil:
		return errNoReplica()
	case r.state == StateTemporary:
		return newErr(KindInvalidState, "not-readable", "a TEMPORARY replica is not readable")
	case r.gs < b.GS:
		return newErr(KindStaleGS, "replica-gs-older", "replica GS %d < requested GS %d", r.gs, b.GS)
	}
	return nil
}

type blockReader struct {
	d          *Dataset
	info       ReplicaInfo
	hdr        MetaHeader
	data, meta File
	length     int64
	pos        int64
	inPipeline bool        // the tail chunk's checksum on disk may cover more bytes
	cached     *cacheEntry // served from locked memory when set
}

func (br *blockReader) Length() int64         { return br.length }
func (br *blockReader) Replica() ReplicaInfo  { return br.info }
func (br *blockReader) BytesPerChecksum() int { return int(br.hdr.BytesPerChecksum) }

func (br *blockReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, newErr(KindInvalidArgument, "negative-offset", "offset %d", off)
	}
	if off >= br.length {
		return 0, io.EOF
	}
	short := false
	if rem := br.length - off; int64(len(p)) > rem {
		p, short = p[:rem], true
	}
	var n int
	var err error
	if br.cached != nil {
		n = copy(p, br.cached.data[off:])
	} else {
		n, err = br.data.ReadAt(p, off)
	}
	br.d.stats.bytesRead.Add(int64(n))
	if err == io.EOF && n == len(p) {
		err = nil
	}
	if err != nil && err != io.EOF {
		return n, ioErr(err)
	}
	if err == io.EOF {
		return n, newErr(KindCorrupt, "data-short", "data file ends at %d, replica length %d", off+int64(n), br.length)
	}
	if short {
		return n, io.EOF
	}
	return n, nil
}

func (br *blockReader) Read(p []byte) (int, error) {
	n, err := br.ReadAt(p, br.pos)
	br.pos += int64(n)
	return n, err
}

func (br *blockReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += br.pos
	case io.SeekEnd:
		offset += br.length
	}
	if offset < 0 {
		return br.pos, newErr(KindInvalidArgument, "negative-offset", "seek to %d", offset)
	}
	br.pos = offset
	return offset, nil
}

func (br *blockReader) ReadChunks(off int64, p []byte) (int, []uint32, error) {
	bpc := int64(br.hdr.BytesPerChecksum)
	if off >= br.length && off >= 0 {
		return 0, nil, io.EOF
	}
	if off < 0 || off%bpc != 0 {
		return 0, nil, newErr(KindInvalidArgument, "misaligned-read", "offset %d is not a multiple of %d", off, bpc)
	}
	n := min(int64(len(p))/bpc*bpc, br.length-off)
	if n <= 0 {
		return 0, nil, newErr(KindInvalidArgument, "buffer-too-small", "buffer of %d bytes holds no chunk of %d", len(p), bpc)
	}
	if _, err := br.ReadAt(p[:n], off); err != nil && err != io.EOF {
		return 0, nil, err
	}
	chunks := br.hdr.Chunks(n)
	raw := make([]byte, chunks*ChecksumSize)
	if _, err := br.meta.ReadAt(raw, MetaHeaderSize+off/bpc*ChecksumSize); err != nil {
		if err == io.EOF {
			return 0, nil, newErr(KindCorrupt, "meta-short", "meta file lacks checksums for [%d,%d)", off, off+n)
		}
		return 0, nil, ioErr(err)
	}
	sums := make([]uint32, chunks)
	for i := range sums {
		sums[i] = binary.BigEndian.Uint32(raw[i*ChecksumSize:])
	}
	if end := off + n; br.inPipeline && end == br.length && end%bpc != 0 {
		// The writer may have extended this chunk (and its checksum) past the
		// visible length; checksum what the reader gets.
		sums[chunks-1] = br.hdr.Sum(p[(chunks-1)*bpc : n])
	}
	if bad := br.hdr.Verify(p[:n], sums); bad >= 0 {
		br.d.stats.checksumErrors.Add(1)
		return 0, nil, &Error{Kind: KindCorrupt, Reason: "checksum-mismatch", Op: "read-chunks", Pool: br.info.Pool, BlockID: br.info.ID,
			Msg: "chunk at offset " + itoa(off+int64(bad)*bpc) + " does not match its checksum"}
	}
	return int(n), sums, nil
}

func (br *blockReader) Close() error {
	if br.cached != nil {
		br.cached.releaseRef()
		br.cached = nil
	}
	br.data.Close()
	return br.meta.Close()
}

// OpenMeta opens replica b.ID's meta file (HDFS getMetaDataInputStream).
// Length covers the checksums of the visible length. For an RBW the last
// partial chunk's stored checksum may cover bytes past the visible length.
func (d *Dataset) OpenMeta(bpid string, b Block) (MetaReader, error) {
	var mr *metaReader
	err := d.view("open-meta", bpid, b.ID, func(p *blockPool, r *replica) error {
		if err := readable(r, b); err != nil {
			return err
		}
		f, err := d.fs.OpenFile(r.metaPath(), os.O_RDONLY, 0)
		if err != nil {
			return d.volumeErr(r.vol, err)
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			return d.volumeErr(r.vol, err)
		}
		mr = &metaReader{f: f, hdr: r.hdr, length: min(size, r.hdr.MetaFileSize(r.visibleLength()))}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mr, nil
}

type metaReader struct {
	f      File
	hdr    MetaHeader
	length int64
	pos    int64
}

func (m *metaReader) Header() MetaHeader { return m.hdr }
func (m *metaReader) Length() int64      { return m.length }
func (m *metaReader) Close() error       { return m.f.Close() }

func (m *metaReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= m.length {
		return 0, io.EOF
	}
	short := false
	if rem := m.length - off; int64(len(p)) > rem {
		p, short = p[:rem], true
	}
	n, err := m.f.ReadAt(p, off)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

func (m *metaReader) Read(p []byte) (int, error) {
	n, err := m.ReadAt(p, m.pos)
	m.pos += int64(n)
	return n, err
}

func (m *metaReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += m.pos
	case io.SeekEnd:
		offset += m.length
	}
	if offset < 0 {
		return m.pos, newErr(KindInvalidArgument, "negative-offset", "seek to %d", offset)
	}
	m.pos = offset
	return offset, nil
}
