package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Dataset is the node's replica store over one or more volumes (HDFS
// FsDatasetImpl). Create it with Open (disk) or NewMemStore (in memory).
//
// Locking: mu is the dataset lock; every state operation holds it for
// writing while it checks and changes a replica, including the renames and
// directory fsyncs of that change. It is released while waiting for a writer
// to stop. Writers hold it only to publish their progress.
type Dataset struct {
	cfg Config
	fs  FS
	log *slog.Logger

	poolMu sync.Mutex // serialises AddBlockPool / ShutdownBlockPool / DeleteBlockPool

	mu        sync.RWMutex
	vols      []*volume
	pools     map[string]*blockPool
	rrNext    int
	failedErr error
	closed    bool

	subMu sync.Mutex
	subs  map[*Subscription]struct{}

	seq     atomic.Uint64
	stats   counters
	cache   *cacheManager
	deletes deleteQueue
	checkCh chan *volume

	stopCh   chan struct{}
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	scanners []func() // stop functions of running scanners
}

var _ Store = (*Dataset)(nil)

// Open opens (formatting if needed) the configured volumes and loads every
// block pool found on them (restart, doc.go "Load"). A volume that cannot be
// opened counts as failed; more failures than tolerated fail Open.
func Open(ctx context.Context, cfg Config) (*Dataset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dataset{
		cfg:     cfg,
		fs:      cfg.FS,
		log:     cfg.Logger,
		pools:   map[string]*blockPool{},
		subs:    map[*Subscription]struct{}{},
		checkCh: make(chan *volume, 16),
		stopCh:  make(chan struct{}),
	}
	if d.fs == nil {
		d.fs = OSFS{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.deletes.init()
	d.cache = newCacheManager(cfg.MaxLockedMemory)
	failures := 0
	for i, vc := range cfg.Volumes {
		typ := vc.StorageType
		if typ == StorageUnspecified {
			typ = StorageDisk
		}
		v := &volume{idx: i, path: vc.Path, typ: typ, reserved: vc.Reserved}
		id, err := loadStorageID(d.fs, vc.Path)
		if err != nil {
			v.failed, v.failErr = true, err
			failures++
			d.log.Error("volume failed at open", "volume", vc.Path, "error", err)
		}
		v.storageID = id
		d.vols = append(d.vols, v)
	}
	if failures > cfg.VolumeFailuresTolerated {
		return nil, newErr(KindUnavailable, "too-many-volume-failures", "%d of %d volumes failed at open, %d tolerated",
			failures, len(cfg.Volumes), cfg.VolumeFailuresTolerated)
	}
	pools := map[string]bool{}
	for _, v := range d.vols {
		if v.failed {
			continue
		}
		ents, err := d.fs.ReadDir(filepath.Join(v.path, dirCurrent))
		if err != nil {
			return nil, ioErr(err)
		}
		for _, e := range ents {
			if e.IsDir && ValidatePoolID(e.Name) == nil {
				pools[e.Name] = true
			}
		}
	}
	ids := make([]string, 0, len(pools))
	for id := range pools {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := d.AddBlockPool(ctx, id); err != nil {
			return nil, err
		}
	}
	d.wg.Add(2)
	go d.deleter()
	go d.checker()
	if cfg.DirScanInterval > 0 {
		d.StartDirectoryScanner(cfg.DirScanInterval)
	}
	if cfg.BlockScanBytesPerSecond > 0 {
		d.StartBlockScanner()
	}
	return d, nil
}

// NewMemStore returns a Dataset over an in-memory file system: the fake Store
// for tests of code built on this package. Volumes default to one at /vol0.
// Open it again over the same MemFS to simulate a restart.
func NewMemStore(ctx context.Context, cfg Config, mfs *MemFS) (*Dataset, error) {
	if len(cfg.Volumes) == 0 {
		cfg.Volumes = []VolumeConfig{{Path: "/vol0"}}
	}
	cfg.FS = mfs
	for _, v := range cfg.Volumes {
		if err := mkdirAllDurable(mfs, v.Path); err != nil {
			return nil, ioErr(err)
		}
	}
	return Open(ctx, cfg)
}

// Close stops writers and background work, finishes pending deletions and
// releases cached memory. Files stay as they are (a clean shutdown).
func (d *Dataset) Close() error {
	d.shutdown(true)
	return nil
}

// abandon stops goroutines without finishing anything: a crash (tests).
func (d *Dataset) abandon() { d.shutdown(false) }

func (d *Dataset) shutdown(clean bool) {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	for _, p := range d.pools {
		for _, r := range p.replicas {
			if r.writer != nil {
				r.writer.signalStop()
			}
		}
	}
	d.mu.Unlock()
	for _, stop := range d.scanners {
		stop()
	}
	close(d.stopCh)
	d.deletes.close(clean)
	d.wg.Wait()
	if clean {
		d.mu.Lock()
		for _, p := range d.pools {
			for _, r := range p.replicas {
				d.uncacheLocked(r)
			}
		}
		d.mu.Unlock()
	}
	d.subMu.Lock()
	for s := range d.subs {
		s.closeLocked()
	}
	d.subMu.Unlock()
}

// usableLocked returns KindUnavailable once closed or failed. d.mu held.
func (d *Dataset) usableLocked() error {
	if d.closed {
		return newErr(KindUnavailable, "closed", "dataset closed")
	}
	return d.failedErr
}

// poolLocked returns a loaded block pool. d.mu held.
func (d *Dataset) poolLocked(bpid string) (*blockPool, error) {
	if err := d.usableLocked(); err != nil {
		return nil, err
	}
	if err := ValidatePoolID(bpid); err != nil {
		return nil, err
	}
	p, ok := d.pools[bpid]
	if !ok {
		return nil, newErr(KindNotFound, "block-pool-not-found", "block pool %s is not loaded", bpid)
	}
	return p, nil
}

// mustStopWriter is returned by an operation body that needs w stopped.
type mustStopWriter struct{ w *writer }

func (m *mustStopWriter) Error() string { return "replica: existing writer must be stopped" }

// mutate runs fn under the dataset lock with the pool and the replica of id
// (nil if none). If fn returns mustStopWriter, the lock is released, the
// writer stopped, and fn run again; the whole loop is bounded by
// WriterStopTimeout (HDFS's stopWriter retry loop).
func (d *Dataset) mutate(ctx context.Context, op, bpid string, id uint64, fn func(p *blockPool, r *replica) error) error {
	deadline := time.Now().Add(d.cfg.WriterStopTimeout)
	for {
		if err := ctxErr(ctx); err != nil {
			return at(err, op, bpid, id)
		}
		d.mu.Lock()
		p, err := d.poolLocked(bpid)
		if err == nil {
			err = fn(p, p.replicas[id])
		}
		d.mu.Unlock()
		var ms *mustStopWriter
		if !errors.As(err, &ms) {
			return at(err, op, bpid, id)
		}
		if err := d.stopWriter(ctx, ms.w, deadline); err != nil {
			return at(err, op, bpid, id)
		}
	}
}

// view runs fn under the read lock with the replica of id (nil if none).
func (d *Dataset) view(op, bpid string, id uint64, fn func(p *blockPool, r *replica) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, err := d.poolLocked(bpid)
	if err == nil {
		err = fn(p, p.replicas[id])
	}
	return at(err, op, bpid, id)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic("replica: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// checker probes volumes after I/O errors.
func (d *Dataset) checker() {
	defer d.wg.Done()
	for {
		select {
		case <-d.stopCh:
			return
		case v := <-d.checkCh:
			d.checkVolume(v)
		}
	}
}

// deleteTask removes the files of a replica already taken out of the map.
type deleteTask struct {
	paths  []string
	change *Change // published once the files are gone
	vol    *volume
}

// deleteQueue is the asynchronous deleter's unbounded queue (HDFS
// FsDatasetAsyncDiskService).
type deleteQueue struct {
	mu     sync.Mutex
	tasks  []deleteTask
	notify chan struct{}
	done   bool
	clean  bool
	busy   bool
}

func (q *deleteQueue) init() {
	q.notify = make(chan struct{}, 1)
}

func (q *deleteQueue) push(t deleteTask) {
	q.mu.Lock()
	q.tasks = append(q.tasks, t)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *deleteQueue) close(clean bool) {
	q.mu.Lock()
	q.done, q.clean = true, clean
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (d *Dataset) deleter() {
	defer d.wg.Done()
	q := &d.deletes
	for {
		q.mu.Lock()
		tasks := q.tasks
		q.tasks = nil
		done, clean := q.done, q.clean
		q.busy = len(tasks) > 0
		q.mu.Unlock()
		if done && !clean {
			return
		}
		for _, t := range tasks {
			d.runDelete(t)
		}
		if done && len(tasks) == 0 {
			return
		}
		if len(tasks) == 0 {
			<-q.notify
		}
	}
}

func (d *Dataset) runDelete(t deleteTask) {
	for _, p := range t.paths {
		if err := d.fs.Remove(p); err != nil && !isNotExist(err) {
			d.log.Warn("delete replica file", "path", p, "error", err)
		}
	}
	d.stats.blocksDeleted.Add(1)
	if t.change != nil {
		d.mu.RLock()
		d.publish(*t.change)
		d.mu.RUnlock()
	}
}

// WaitDeletions blocks until the asynchronous deleter is idle (tests,
// shutdown hooks).
func (d *Dataset) WaitDeletions(ctx context.Context) error {
	q := &d.deletes
	for {
		q.mu.Lock()
		idle := len(q.tasks) == 0 && !q.busy
		q.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ioErr(ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
