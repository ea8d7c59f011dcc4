package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"

	"github.com/logbookhq/logbook/internal/durable"
)

// zeroedSegments is raft-wal's file system with one change: a new segment
// file is one that was written full of zeros and synced ahead of use,
// instead of one preallocated with fallocate.
//
// Why: raft-wal fsyncs after every batch it appends. Into fallocated
// blocks each such sync also converts the written range from "unwritten"
// to "written" in the file system's extent tree, a metadata change that
// costs a journal commit; into blocks that already hold zeros it is a plain
// data flush. Every commit waits for the leader's sync and then a
// follower's, and on a disk the members share their journal commits queue
// behind each other. Measured on the reference machine
// (BenchmarkWALStoreLogs, medians of four, fallocated against zeroed): a
// 10 KB StoreLogs (100 clients' batch) 264 against 180 µs, three logs at
// once 428 against 298 µs; 400 bytes, three logs 358 against 281 µs, one
// log the same (183 and 182 µs); coord dev with 100 clients, +11% appends/s
// (median of six alternating pairs) (docs/benchmarks.md, "Raft log store:
// one synced write"). etcd's WAL preallocates with fallocate too; log
// writers that recycle or zero their files (RocksDB's recycled logs) avoid
// the same cost.
//
// How: one spare segment, spareName in the WAL directory, is kept ready.
// raft-wal ignores files without its .wal suffix. Create renames the spare
// to the segment's name and syncs the directory; once that segment is half
// full the next spare is written in the background. If none is ready when
// a segment is needed, Create falls back to raft-wal's fallocate (and
// starts the next spare at once). A spare is written under a temporary
// name, synced, then renamed, so a file named spareName is always
// complete. Reading a zeroed segment is the same as reading a fallocated
// one: raft-wal stops at the first all-zero frame header. Cost: one extra
// segment of disk per member, and each segment is written twice (zeros,
// then entries). The zeros are written with O_DIRECT where the file
// system allows it (openZeroWriter): through the page cache, copying them
// in and writing them back cost the members more CPU under load than the
// log's own syncs (coord dev, 100 clients spread: buffered, the spare's
// writes took 7.8% of the process, 5 µs more of the members' CPU per
// append and 6% of appends/s; docs/benchmarks.md, "Raft log store: one
// synced write").
type zeroedSegments struct {
	*walfs.FS
	dir  string
	size uint64
	log  *slog.Logger

	mu        sync.Mutex
	preparing bool
	closed    bool
	wg        sync.WaitGroup

	// Segments created from a spare, and by the fallocate fallback.
	zeroed, fallocated atomic.Int64
}

// WALSpareName is the zeroed spare segment kept in the WAL directory.
const WALSpareName = spareName

const (
	spareName     = "next-segment.zeroed"
	spareTmpName  = "next-segment.zeroed.tmp"
	zeroChunk     = 1 << 20
	zeroSyncEvery = 4 << 20
	// A spare written in the background is paced (spareRate): the log's
	// own syncs share the disk with it. zeroRate (64 MiB a second) is the
	// fastest pace, minZeroRate the slowest.
	zeroRate    = 64 << 20
	minZeroRate = 8 << 20
)

// spareRate is the pace, in bytes a second, of a spare written while a
// segment of size bytes fills, once its first half took halfFill: at the
// same rate of appends the second half takes about as long, and the spare
// is paced to be ready in half that time. Writing it at the fastest pace
// instead puts a burst of writes on the disk in the middle of the log's
// syncs (three members at about the same moment, when they share a disk)
// for no gain: the spare waits unused until the segment is full.
func spareRate(size uint64, halfFill time.Duration) uint64 {
	if halfFill <= 0 {
		return zeroRate
	}
	r := uint64(float64(size) / (halfFill.Seconds() / 2))
	return min(max(r, minZeroRate), zeroRate)
}

// newZeroedSegments returns the file system for the WAL in dir with
// segments of size bytes. With no complete spare it writes one before it
// returns, so that the first segment of a new log is a zeroed one too.
func newZeroedSegments(dir string, size uint64, log *slog.Logger) (*zeroedSegments, error) {
	z := &zeroedSegments{FS: walfs.New(), dir: dir, size: size, log: log}
	if err := removeSpares(dir, spareTmpName); err != nil {
		return nil, err
	}
	ok, err := z.spareReady()
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := z.writeSpare(0); err != nil {
			return nil, err
		}
	}
	return z, nil
}

// spareReady reports whether a complete spare of the right size is there;
// one of another size (the segment size changed) is removed.
func (z *zeroedSegments) spareReady() (bool, error) {
	p := filepath.Join(z.dir, spareName)
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("raftnode: %w", err)
	case uint64(fi.Size()) == z.size:
		return true, nil
	}
	if err := os.Remove(p); err != nil {
		return false, fmt.Errorf("raftnode: %w", err)
	}
	return false, nil
}

// writeSpare writes a zeroed file of z.size bytes at rate bytes a second
// (0: as fast as the disk takes it) and renames it to spareName once it is
// on disk. A file system that takes O_DIRECT at open but refuses the
// writes (an alignment it needs above directAlign) gets the spare written
// again through the page cache.
func (z *zeroedSegments) writeSpare(rate uint64) error {
	start := time.Now()
	err := z.writeSpareFile(rate, z.size%directAlign == 0)
	if errors.Is(err, errDirectRefused) {
		z.log.Info("the file system refused O_DIRECT writes of the spare WAL segment; writing it through the page cache", "err", err)
		err = z.writeSpareFile(rate, false)
	}
	if err == nil {
		z.log.Debug("spare WAL segment written", "bytes", z.size, "pace-bytes-per-s", rate, "took", time.Since(start))
	}
	return err
}

// errDirectRefused marks an O_DIRECT write the file system refused.
var errDirectRefused = errors.New("O_DIRECT write refused")

func (z *zeroedSegments) writeSpareFile(rate uint64, tryDirect bool) error {
	tmp := filepath.Join(z.dir, spareTmpName)
	f, buf, direct, err := openZeroWriter(tmp, tryDirect)
	if err != nil {
		return fmt.Errorf("raftnode: spare segment: %w", err)
	}
	// Synced every zeroSyncEvery bytes: one flush of the whole segment
	// would hold up the log's own syncs on the same disk for its length.
	start := time.Now()
	for off := uint64(0); off < z.size && err == nil; off += zeroChunk {
		if z.isClosed() {
			err = errors.New("closed")
			break
		}
		if _, err = f.Write(buf[:min(zeroChunk, z.size-off)]); err == nil && (off+zeroChunk)%zeroSyncEvery == 0 {
			err = durable.DataSync(f)
		} else if direct && errors.Is(err, syscall.EINVAL) {
			err = fmt.Errorf("%w: %w", errDirectRefused, err)
		}
		if rate == 0 {
			continue
		}
		if ahead := time.Duration(float64(off+zeroChunk)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	if err == nil {
		err = durable.DataSync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(z.dir, spareName))
	}
	if err == nil {
		err = durable.SyncDir(z.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("raftnode: spare segment: %w", err)
	}
	return nil
}

// removeSpares deletes the named spare files in dir that exist.
func removeSpares(dir string, names ...string) error {
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raftnode: %w", err)
		}
	}
	return nil
}

func (z *zeroedSegments) isClosed() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.closed
}

// prepare writes the next spare in the background at rate bytes a second
// unless one is ready or being written, or the file system is closed.
func (z *zeroedSegments) prepare(rate uint64) {
	if ok, err := z.spareReady(); ok || err != nil {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.preparing || z.closed {
		return
	}
	z.preparing = true
	z.wg.Add(1)
	go func() {
		defer z.wg.Done()
		err := z.writeSpare(rate)
		z.mu.Lock()
		z.preparing = false
		z.mu.Unlock()
		if err != nil && !z.isClosed() {
			z.log.Warn("writing the next zeroed WAL segment failed; the next segment will be fallocated", "err", err)
		}
	}()
}

// Create implements types.VFS.
func (z *zeroedSegments) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if dir == z.dir && size == z.size {
		if f, err := z.takeSpare(name); err != nil {
			z.log.Warn("using the zeroed WAL segment failed; fallocating this one", "err", err)
		} else if f != nil {
			z.zeroed.Add(1)
			return f, nil // it starts the next spare when half full
		}
	}
	z.prepare(zeroRate)
	z.fallocated.Add(1)
	return z.FS.Create(dir, name, size)
}

// OpenWriter implements types.VFS. raft-wal reopens the log's last
// segment for appends when it opens the log again (a restart), and that
// segment's pages past its last entry are not in the page cache: it is
// written as a new zeroed segment is (zeroedFile), each append padded to a
// whole page, so that none reads from the disk. Past its last entry the
// file holds zeros (a zeroed segment, or a fallocated one's unwritten
// blocks) or what a crash tore off, which raft-wal ignores and overwrites:
// the padding only writes zeros there. It syncs with fdatasync: the size
// does not change, and a fallocated block's first write is metadata that
// fdatasync flushes too.
func (z *zeroedSegments) OpenWriter(dir, name string) (types.WritableFile, error) {
	wf, err := z.FS.OpenWriter(dir, name)
	if err != nil || dir != z.dir {
		return wf, err
	}
	f, ok := wf.(*os.File)
	if !ok {
		return wf, nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	zf := &zeroedFile{File: f, size: fi.Size()}
	zf.prepared.Store(true) // opening the log saw to the spare
	return zf, nil
}

// takeSpare renames a ready spare to name; nil when none is ready.
func (z *zeroedSegments) takeSpare(name string) (types.WritableFile, error) {
	z.mu.Lock()
	busy := z.preparing
	z.mu.Unlock()
	if busy {
		return nil, nil
	}
	ok, err := z.spareReady()
	if err != nil || !ok {
		return nil, err
	}
	target := filepath.Join(z.dir, name)
	if _, err := os.Lstat(target); err == nil {
		return nil, fmt.Errorf("segment %s already exists", name)
	}
	if err := os.Rename(filepath.Join(z.dir, spareName), target); err != nil {
		return nil, err
	}
	// The new name is durable before raft-wal records the segment in its
	// meta store, and before any entry is written to it.
	err = durable.SyncDir(z.dir)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(target, os.O_RDWR, 0o644)
	}
	if err != nil {
		os.Remove(target) // for the fallocate fallback, which creates it anew
		return nil, err
	}
	return &zeroedFile{File: f, size: int64(z.size), created: time.Now(),
		prepare: func(halfFill time.Duration) { z.prepare(spareRate(z.size, halfFill)) }}, nil
}

// Close waits for a spare being written.
func (z *zeroedSegments) Close() {
	z.mu.Lock()
	z.closed = true
	z.mu.Unlock()
	z.wg.Wait()
}

// zeroedFile is a segment made from a spare. Its blocks are allocated and
// hold zeros and its size does not change, so a sync after an append has
// only data to flush: fdatasync, as etcd syncs its WAL, skips the journal
// commit an fsync would make whenever the append moved the file's mtime.
// (A write past the end would grow the file; fdatasync flushes that size.)
//
// A buffered write that covers part of a page needs the rest of the page:
// from the page cache, or else read from disk first. Fallocated blocks are
// known to hold zeros and are never read; zeroed blocks are, unless their
// pages are cached, and a spare written with O_DIRECT never was. raft-wal
// appends each batch where the last one ended, so nearly every append ends
// inside a page. WriteAt therefore carries each write on with zeros to the
// end of its last page (never past the file's end): the file holds zeros
// there already, so the bytes are the same, but every page a write touches
// is either written whole or begins where the last write ended, in a page
// that write left in the cache. No append ever reads from the disk: under
// load the members read 0 bytes, where reading the next 512 KiB ahead with
// posix_fadvise would keep the reads out of the commit path but not off the
// disk (16.7-18.4 MB/s read, as much as the log wrote; docs/benchmarks.md,
// "Raft log store: one synced write"). The padding costs no disk writes: a
// dirty page is written back whole anyway.
//
// The next spare is written once this segment is half full, not when it
// is created: the write is spread out (a new member does not write two
// segments at start) and the spare is recent when it is used. It is paced
// by how long the first half took to fill (spareRate).
type zeroedFile struct {
	*os.File
	size     int64
	created  time.Time
	prepare  func(halfFill time.Duration)
	prepared atomic.Bool

	mu  sync.Mutex // raft-wal writes from one goroutine; this keeps buf safe regardless
	buf []byte     // a write and its padding
}

// pageSize is the unit a write is padded to: the page cache's (4 KiB on
// every platform this runs on; a larger page only means more reads).
const pageSize = 4096

// maxKeptBuf bounds the buffer a segment keeps between writes (one per
// segment raft-wal holds open): a batch of 100 clients' appends is ~10 KB.
const maxKeptBuf = 64 << 10

func (f *zeroedFile) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if end >= f.size/2 && !f.prepared.Swap(true) {
		f.prepare(time.Since(f.created))
	}
	padEnd := min((end+pageSize-1)/pageSize*pageSize, f.size)
	if padEnd <= end {
		return f.File.WriteAt(p, off)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(append(f.buf[:0], p...), make([]byte, padEnd-end)...)
	n, err := f.File.WriteAt(f.buf, off)
	if cap(f.buf) > maxKeptBuf || padEnd == f.size {
		f.buf = nil // a rare large batch, or the segment is full
	}
	return min(n, len(p)), err
}

func (f *zeroedFile) Sync() error { return durable.DataSync(f.File) }
