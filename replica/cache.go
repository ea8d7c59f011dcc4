package replica

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
)

// cacheManager accounts locked memory for cached replicas (HDFS
// FsDatasetCache), bounded by Config.MaxLockedMemory.
type cacheManager struct {
	mu     sync.Mutex
	max    int64
	used   int64
	blocks int64
}

func newCacheManager(max int64) *cacheManager { return &cacheManager{max: max} }

var pageSize = int64(os.Getpagesize())

func roundUpPage(n int64) int64 { return (n + pageSize - 1) / pageSize * pageSize }

func (c *cacheManager) reserve(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used+n > c.max {
		return false
	}
	c.used += n
	c.blocks++
	return true
}

func (c *cacheManager) release(n int64) {
	c.mu.Lock()
	c.used -= n
	c.blocks--
	c.mu.Unlock()
}

func (c *cacheManager) usage() (blocks, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocks, c.used
}

// cacheEntry is one cached replica's bytes. Readers hold references; the
// memory is unmapped when the entry is uncached and the last reader closes.
type cacheEntry struct {
	mu      sync.Mutex
	data    []byte
	refs    int // 1 for the replica map + 1 per open reader
	release func()
}

func (e *cacheEntry) acquire() *cacheEntry {
	e.mu.Lock()
	e.refs++
	e.mu.Unlock()
	return e
}

func (e *cacheEntry) releaseRef() {
	e.mu.Lock()
	e.refs--
	last := e.refs == 0
	e.mu.Unlock()
	if last {
		e.release()
	}
}

// uncacheLocked drops r's cache entry. d.mu held for writing.
func (d *Dataset) uncacheLocked(r *replica) {
	if r.cached != nil {
		e := r.cached
		r.cached = nil
		e.releaseRef()
	}
}

// fdFile is implemented by files backed by an OS descriptor (OSFS).
type fdFile interface{ Fd() uintptr }

// Cache maps and locks a FINALIZED replica's data in memory (after
// verifying its checksums); reads are then served from memory. Over the
// MaxLockedMemory budget, or if mlock is refused (EPERM, ENOMEM, EAGAIN),
// → KindResourceExhausted. Caching an already cached replica is a no-op.
func (d *Dataset) Cache(ctx context.Context, bpid string, id uint64) error {
	const op = "cache"
	var r *replica
	var gs uint64
	var length int64
	already := false
	err := d.view(op, bpid, id, func(p *blockPool, x *replica) error {
		switch {
		case x == nil:
			return errNoReplica()
		case x.state != StateFinalized:
			return newErr(KindInvalidState, "not-finalized", "only FINALIZED replicas are cached, this one is %v", x.state)
		}
		r, gs, length, already = x, x.gs, x.numBytes, x.cached != nil
		return nil
	})
	if err != nil || already {
		return err
	}
	if d.cfg.MaxLockedMemory == 0 {
		return at(newErr(KindResourceExhausted, "caching-disabled", "caching is disabled (MaxLockedMemory 0)"), op, bpid, id)
	}
	charge := roundUpPage(max(length, 1))
	if !d.cache.reserve(charge) {
		d.stats.cacheFailures.Add(1)
		return at(newErr(KindResourceExhausted, "locked-memory", "caching %d bytes exceeds the locked memory budget of %d", charge, d.cfg.MaxLockedMemory), op, bpid, id)
	}
	e, err := d.mapReplica(ctx, bpid, Block{ID: id, GS: gs, NumBytes: length})
	if err != nil {
		d.cache.release(charge)
		d.stats.cacheFailures.Add(1)
		return at(err, op, bpid, id)
	}
	unmap := e.release
	e.release = func() { unmap(); d.cache.release(charge) }
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil || p.replicas[id] != r || r.state != StateFinalized || r.gs != gs || r.cached != nil {
		e.releaseRef()
		if err != nil {
			return at(err, op, bpid, id)
		}
		return nil // changed meanwhile; nothing to cache (or already cached)
	}
	r.cached = e
	return nil
}

// mapReplica reads (verifying) and locks the replica's bytes.
func (d *Dataset) mapReplica(ctx context.Context, bpid string, b Block) (*cacheEntry, error) {
	br, err := d.OpenBlock(bpid, b)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	if err := verifyAll(ctx, br, nil); err != nil {
		return nil, err
	}
	inner := br.(*blockReader)
	if f, ok := inner.data.(fdFile); ok && b.NumBytes > 0 {
		mem, err := syscall.Mmap(int(f.Fd()), 0, int(b.NumBytes), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return nil, newErr(KindResourceExhausted, "mmap-failed", "mmap: %v", err)
		}
		if err := syscall.Mlock(mem); err != nil {
			syscall.Munmap(mem)
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) {
				return nil, newErr(KindResourceExhausted, "mlock-refused", "mlock: %v (raise RLIMIT_MEMLOCK)", err)
			}
			return nil, ioErr(err)
		}
		return &cacheEntry{data: mem, refs: 1, release: func() { syscall.Munlock(mem); syscall.Munmap(mem) }}, nil
	}
	// Media without descriptors (MemFS): a heap copy stands in.
	buf := make([]byte, b.NumBytes)
	if _, err := br.ReadAt(buf, 0); err != nil && b.NumBytes > 0 {
		return nil, err
	}
	return &cacheEntry{data: buf, refs: 1, release: func() {}}, nil
}

// Uncache releases a cached replica (no-op if not cached).
func (d *Dataset) Uncache(bpid string, id uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return at(err, "uncache", bpid, id)
	}
	if r := p.replicas[id]; r != nil {
		d.uncacheLocked(r)
	}
	return nil
}

// IsCached reports whether replica id is cached.
func (d *Dataset) IsCached(bpid string, id uint64) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, err := d.poolLocked(bpid)
	if err != nil {
		return false
	}
	r := p.replicas[id]
	return r != nil && r.cached != nil
}
