package replica

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// MemFS is an in-memory FS: the medium of the in-memory fake Store
// (NewMemStore). It keeps every byte written even without Sync (it models a
// crash that loses the process, not the page cache). Safe for concurrent use.
type MemFS struct {
	mu     sync.Mutex
	nodes  map[string]*memNode // cleaned absolute path → node
	caps   map[string]*memCap  // capacity per path prefix
	failed map[string]error    // path prefix → error for every operation
}

type memNode struct {
	dir  bool
	data []byte
}

type memCap struct {
	capacity uint64
	used     uint64
}

var _ FS = (*MemFS)(nil)

// NewMemFS returns an empty MemFS with a root directory "/".
func NewMemFS() *MemFS {
	return &MemFS{
		nodes:  map[string]*memNode{"/": {dir: true}},
		caps:   map[string]*memCap{},
		failed: map[string]error{},
	}
}

// SetCapacity limits the bytes of files under prefix: writes past it fail
// with ENOSPC, DiskUsage reports it.
func (m *MemFS) SetCapacity(prefix string, capacity uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix = filepath.Clean(prefix)
	c := &memCap{capacity: capacity}
	for p, n := range m.nodes {
		if !n.dir && under(p, prefix) {
			c.used += uint64(len(n.data))
		}
	}
	m.caps[prefix] = c
}

// Fail makes every operation on a path under prefix return err (EIO if nil):
// a failed disk. Unfail undoes it.
func (m *MemFS) Fail(prefix string, err error) {
	if err == nil {
		err = syscall.EIO
	}
	m.mu.Lock()
	m.failed[filepath.Clean(prefix)] = err
	m.mu.Unlock()
}

// Unfail removes a failure set by Fail.
func (m *MemFS) Unfail(prefix string) {
	m.mu.Lock()
	delete(m.failed, filepath.Clean(prefix))
	m.mu.Unlock()
}

func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/") || prefix == "/"
}

func (m *MemFS) check(op, p string) error {
	for prefix, err := range m.failed {
		if under(p, prefix) {
			return &os.PathError{Op: op, Path: p, Err: err}
		}
	}
	return nil
}

func (m *MemFS) capFor(p string) *memCap {
	var best *memCap
	bestLen := -1
	for prefix, c := range m.caps {
		if under(p, prefix) && len(prefix) > bestLen {
			best, bestLen = c, len(prefix)
		}
	}
	return best
}

// resize changes a file's length, charging its capacity.
func (m *MemFS) resize(p string, n *memNode, size int64) error {
	old := int64(len(n.data))
	if c := m.capFor(p); c != nil {
		if size > old && c.used+uint64(size-old) > c.capacity {
			return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
		}
		c.used = uint64(int64(c.used) + size - old)
	}
	if size <= int64(cap(n.data)) {
		if size > old {
			clear(n.data[old:size])
		}
		n.data = n.data[:size]
		return nil
	}
	nd := make([]byte, size, max(size, 2*int64(cap(n.data))))
	copy(nd, n.data)
	n.data = nd
	return nil
}

func clean(p string) string { return filepath.Clean("/" + p) }

func (m *MemFS) parentDir(op, p string) error {
	if par, ok := m.nodes[filepath.Dir(p)]; !ok || !par.dir {
		return &os.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	}
	return nil
}

func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if err := m.check("open", p); err != nil {
		return nil, err
	}
	n, ok := m.nodes[p]
	switch {
	case ok && n.dir:
		return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: p, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	case !ok:
		if err := m.parentDir("open", p); err != nil {
			return nil, err
		}
		n = &memNode{}
		m.nodes[p] = n
	}
	if flag&os.O_TRUNC != 0 {
		if err := m.resize(p, n, 0); err != nil {
			return nil, err
		}
	}
	return &memFile{m: m, n: n, path: p, write: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, n := clean(oldpath), clean(newpath)
	if err := m.check("rename", o); err != nil {
		return err
	}
	if err := m.check("rename", n); err != nil {
		return err
	}
	src, ok := m.nodes[o]
	if !ok {
		return &os.LinkError{Op: "rename", Old: o, New: n, Err: fs.ErrNotExist}
	}
	if err := m.parentDir("rename", n); err != nil {
		return err
	}
	if dst, ok := m.nodes[n]; ok {
		if dst.dir != src.dir {
			return &os.LinkError{Op: "rename", Old: o, New: n, Err: syscall.EEXIST}
		}
		if !dst.dir {
			if c := m.capFor(n); c != nil {
				c.used -= uint64(len(dst.data))
			}
		}
	}
	if !src.dir {
		if c := m.capFor(o); c != nil {
			c.used -= uint64(len(src.data))
		}
		if c := m.capFor(n); c != nil {
			c.used += uint64(len(src.data))
		}
	}
	delete(m.nodes, o)
	m.nodes[n] = src
	if src.dir {
		for p, nd := range m.nodes {
			if strings.HasPrefix(p, o+"/") {
				delete(m.nodes, p)
				m.nodes[n+p[len(o):]] = nd
			}
		}
	}
	return nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if err := m.check("remove", p); err != nil {
		return err
	}
	n, ok := m.nodes[p]
	if !ok {
		return &os.PathError{Op: "remove", Path: p, Err: fs.ErrNotExist}
	}
	if n.dir {
		for q := range m.nodes {
			if strings.HasPrefix(q, p+"/") {
				return &os.PathError{Op: "remove", Path: p, Err: syscall.ENOTEMPTY}
			}
		}
	} else if c := m.capFor(p); c != nil {
		c.used -= uint64(len(n.data))
	}
	delete(m.nodes, p)
	return nil
}

func (m *MemFS) RemoveAll(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(path)
	if err := m.check("removeall", p); err != nil {
		return err
	}
	for q, n := range m.nodes {
		if q == p || strings.HasPrefix(q, p+"/") {
			if !n.dir {
				if c := m.capFor(q); c != nil {
					c.used -= uint64(len(n.data))
				}
			}
			delete(m.nodes, q)
		}
	}
	return nil
}

func (m *MemFS) Mkdir(path string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(path)
	if err := m.check("mkdir", p); err != nil {
		return err
	}
	if _, ok := m.nodes[p]; ok {
		return &os.PathError{Op: "mkdir", Path: p, Err: fs.ErrExist}
	}
	if err := m.parentDir("mkdir", p); err != nil {
		return err
	}
	m.nodes[p] = &memNode{dir: true}
	return nil
}

func (m *MemFS) ReadDir(name string) ([]DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if err := m.check("readdir", p); err != nil {
		return nil, err
	}
	if n, ok := m.nodes[p]; !ok || !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: p, Err: fs.ErrNotExist}
	}
	var out []DirEntry
	for q, n := range m.nodes {
		if q != p && filepath.Dir(q) == p {
			out = append(out, DirEntry{Name: filepath.Base(q), IsDir: n.dir})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *MemFS) Stat(name string) (FileStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if err := m.check("stat", p); err != nil {
		return FileStat{}, err
	}
	n, ok := m.nodes[p]
	if !ok {
		return FileStat{}, &os.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return FileStat{Size: int64(len(n.data)), IsDir: n.dir}, nil
}

func (m *MemFS) Truncate(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if err := m.check("truncate", p); err != nil {
		return err
	}
	n, ok := m.nodes[p]
	if !ok || n.dir {
		return &os.PathError{Op: "truncate", Path: p, Err: fs.ErrNotExist}
	}
	return m.resize(p, n, size)
}

func (m *MemFS) SyncDir(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(path)
	if err := m.check("sync", p); err != nil {
		return err
	}
	if n, ok := m.nodes[p]; !ok || !n.dir {
		return &os.PathError{Op: "sync", Path: p, Err: fs.ErrNotExist}
	}
	return nil
}

func (m *MemFS) DiskUsage(path string) (DiskUsage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(path)
	if err := m.check("statfs", p); err != nil {
		return DiskUsage{}, err
	}
	if c := m.capFor(p); c != nil {
		return DiskUsage{Capacity: c.capacity, Available: c.capacity - min(c.used, c.capacity)}, nil
	}
	const unlimited = 1 << 50
	return DiskUsage{Capacity: unlimited, Available: unlimited}, nil
}

type memFile struct {
	m      *MemFS
	n      *memNode
	path   string // path at open time (for failure injection)
	write  bool
	closed bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if err := f.m.check("read", f.path); err != nil {
		return 0, err
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if !f.write {
		return 0, &os.PathError{Op: "write", Path: f.path, Err: syscall.EBADF}
	}
	if err := f.m.check("write", f.path); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		if err := f.m.resize(f.path, f.n, end); err != nil {
			return 0, err
		}
	}
	return copy(f.n.data[off:], p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	if err := f.m.check("truncate", f.path); err != nil {
		return err
	}
	return f.m.resize(f.path, f.n, size)
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	return f.m.check("sync", f.path)
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}
