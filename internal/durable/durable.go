// Package durable writes small files so that they survive a crash: the
// data is fsynced before a rename makes it visible, and directories are
// fsynced when a name in them must last. Both servers keep their identity
// files (cluster id, member and node ids) with it. DataSync is the data-only
// sync the coordinators' log segments use (and bench/diskcheck measures).
package durable

import "os"

// WriteFile replaces path with data atomically: written to path.tmp,
// fsynced, then renamed over path. The caller fsyncs the directory
// (SyncDir) when the new name itself must survive power loss.
func WriteFile(path string, data []byte) error { return WriteFileMode(path, data, 0o640) }

// WriteFileMode is WriteFile with the file's permission bits (a private
// key's 0600). The mode is set before any byte is written.
func WriteFileMode(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Data is durable before the rename makes it visible.
	return os.Rename(tmp, path)
}

// SyncDir fsyncs a directory, making the names in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
