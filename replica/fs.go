package replica

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FS is the medium a Dataset stores replicas on. OSFS is the disk; MemFS is
// the in-memory fake used by tests of code built on Store.
//
// Contract: Rename is atomic and replaces an existing target; an open File
// keeps referring to the same file after a Rename; a change is durable only
// after File.Sync (contents) and SyncDir of the parent (names).
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(path string) error
	Mkdir(path string, perm os.FileMode) error
	ReadDir(name string) ([]DirEntry, error)
	Stat(name string) (FileStat, error)
	Truncate(name string, size int64) error
	SyncDir(path string) error
	DiskUsage(path string) (DiskUsage, error)
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Size() (int64, error)
	Close() error
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name  string
	IsDir bool
}

// FileStat is what Stat returns.
type FileStat struct {
	Size  int64
	IsDir bool
}

// DiskUsage of the file system holding a path.
type DiskUsage struct {
	Capacity  uint64
	Available uint64 // for unprivileged users
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}
func (OSFS) Rename(o, n string) error                  { return os.Rename(o, n) }
func (OSFS) Remove(name string) error                  { return os.Remove(name) }
func (OSFS) RemoveAll(path string) error               { return os.RemoveAll(path) }
func (OSFS) Mkdir(path string, perm os.FileMode) error { return os.Mkdir(path, perm) }
func (OSFS) Truncate(name string, size int64) error    { return os.Truncate(name, size) }
func (OSFS) Stat(name string) (FileStat, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileStat{}, err
	}
	return FileStat{Size: st.Size(), IsDir: st.IsDir()}, nil
}

func (OSFS) ReadDir(name string) ([]DirEntry, error) {
	ents, err := os.ReadDir(name)
	out := make([]DirEntry, len(ents))
	for i, e := range ents {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, err
}

func (OSFS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (OSFS) DiskUsage(path string) (DiskUsage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return DiskUsage{}, err
	}
	return DiskUsage{Capacity: st.Blocks * uint64(st.Bsize), Available: st.Bavail * uint64(st.Bsize)}, nil
}

// mkdirAllDurable creates path and its missing parents, fsyncing the parent
// of every directory it creates, so the new names survive a power loss.
func mkdirAllDurable(fsys FS, path string) error {
	st, err := fsys.Stat(path)
	if err == nil {
		if !st.IsDir {
			return &os.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := mkdirAllDurable(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return fsys.SyncDir(parent)
}

func exists(fsys FS, path string) bool {
	_, err := fsys.Stat(path)
	return err == nil
}

// writeFileDurable creates (or replaces) name with data and fsyncs it; the
// caller syncs the directory.
func writeFileDurable(fsys FS, name string, data []byte) error {
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncFile fsyncs an existing file through a descriptor of its own (fsync
// flushes the file, whoever wrote it).
func syncFile(fsys FS, name string) error {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}
