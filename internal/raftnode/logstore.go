package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/internal/logging"
)

// Raft log store backends (--raft-log-store).
const (
	// LogStoreAuto keeps whatever backend a data dir already holds and
	// creates a WAL in a new one.
	LogStoreAuto = "auto"
	// LogStoreWAL is hashicorp/raft-wal: append-only segment files, one
	// write and one fsync per batch of entries, a CRC over every commit
	// (a torn last batch is detected and dropped at open).
	LogStoreWAL = "wal"
	// LogStoreBoltDB is hashicorp/raft-boltdb/v2: a bbolt B+tree, two
	// fsyncs per commit (data pages, then the meta page).
	LogStoreBoltDB = "boltdb"
)

// Paths of each backend under the Raft directory (<data-dir>/raft).
const (
	WALDirName  = "wal"         // raft-wal's directory
	BoltDBName  = "raft.db"     // raft-boltdb's file
	WALMetaName = "wal-meta.db" // raft-wal's meta database, inside WALDirName
)

// LogStore is what Raft needs of a log store: its log, its stable store
// (term, vote) and a Close.
type LogStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// boltInitialMmap is the address space mapped for raft.db up front (not
// memory: pages are read in on use). While the file stays below it bbolt
// never remaps, and a remap waits for every read transaction and stalls
// StoreLogs in Raft's main loop. etcd maps 10 GiB for its backend.
const boltInitialMmap = 1 << 30

// ValidLogStore reports whether name is a --raft-log-store value.
func ValidLogStore(name string) bool {
	switch name {
	case "", LogStoreAuto, LogStoreWAL, LogStoreBoltDB:
		return true
	}
	return false
}

// chooseLogStore resolves the configured backend against what raftDir
// already holds. A data dir never switches backend silently: asking for
// one while the other holds the log is an error (a member that opened an
// empty log of the other kind would rejoin with nothing and could vote
// as if it had never voted).
func chooseLogStore(raftDir, want string) (string, error) {
	hasWAL, err := exists(filepath.Join(raftDir, WALDirName, WALMetaName))
	if err != nil {
		return "", err
	}
	hasBolt, err := exists(filepath.Join(raftDir, BoltDBName))
	if err != nil {
		return "", err
	}
	switch {
	case hasWAL && hasBolt:
		return "", fmt.Errorf("raftnode: %s holds both a raft-wal log (%s/) and a raft-boltdb log (%s); remove the one that is not this member's", raftDir, WALDirName, BoltDBName)
	case hasBolt && want == LogStoreWAL:
		return "", fmt.Errorf("raftnode: --raft-log-store wal, but %s holds a raft-boltdb log (%s); start with --raft-log-store boltdb or auto", raftDir, BoltDBName)
	case hasWAL && want == LogStoreBoltDB:
		return "", fmt.Errorf("raftnode: --raft-log-store boltdb, but %s holds a raft-wal log (%s/); start with --raft-log-store wal or auto", raftDir, WALDirName)
	case hasBolt:
		return LogStoreBoltDB, nil
	case hasWAL:
		return LogStoreWAL, nil
	case want == LogStoreBoltDB:
		return LogStoreBoltDB, nil
	default:
		return LogStoreWAL, nil
	}
}

func exists(p string) (bool, error) {
	_, err := os.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("raftnode: %w", err)
	}
}

// openLogStore opens (creating if needed) the backend named by kind in
// raftDir. Both fsync every StoreLogs and SetUint64 before returning
// (invariant 6): raft-boltdb with NoSync off, raft-wal always. Neither
// syncs raftDir itself, so the entry of a newly created raft.db or wal/
// is synced here, before Raft writes through it.
func openLogStore(cfg *Config, raftDir, kind string) (LogStore, error) {
	store, err := openLogStoreKind(cfg, raftDir, kind)
	if err != nil {
		return nil, err
	}
	if err := durable.SyncDir(raftDir); err != nil {
		store.Close()
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	return store, nil
}

func openLogStoreKind(cfg *Config, raftDir, kind string) (LogStore, error) {
	switch kind {
	case LogStoreBoltDB:
		store, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(raftDir, BoltDBName),
			BoltOptions: &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType, InitialMmapSize: boltInitialMmap},
		})
		if err != nil {
			return nil, fmt.Errorf("raftnode: open raft log %s: %w", raftDir, err)
		}
		return store, nil
	case LogStoreWAL:
		dir := filepath.Join(raftDir, WALDirName)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("raftnode: %w", err)
		}
		seg := raftwal.DefaultSegmentSize // 64 MiB, preallocated
		if cfg.WALSegmentBytes > 0 {
			seg = cfg.WALSegmentBytes
		}
		// With prefill off, a spare an earlier run left would never be
		// used: it is deleted.
		var vfs types.VFS = walfs.New() // raft-wal's own default
		var zeroed *zeroedSegments
		if cfg.WALPrefill {
			z, err := newZeroedSegments(dir, uint64(seg), cfg.Logger)
			if err != nil {
				return nil, err
			}
			vfs, zeroed = z, z
		} else if err := removeSpares(dir, spareName, spareTmpName); err != nil {
			return nil, err
		}
		store, err := raftwal.Open(dir, raftwal.WithLogger(logging.HCLog(cfg.Logger, "raft-wal")), raftwal.WithSegmentSize(seg),
			raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)))
		switch {
		case err != nil:
			if zeroed != nil {
				zeroed.Close()
			}
			return nil, fmt.Errorf("raftnode: open raft log %s: %w", dir, err)
		case zeroed == nil:
			return store, nil
		}
		return &walStore{WAL: store, vfs: zeroed}, nil
	}
	return nil, fmt.Errorf("raftnode: unknown raft log store %q", kind)
}

// walStore is raft-wal with the file system that zeroes its segments.
type walStore struct {
	*raftwal.WAL
	vfs *zeroedSegments
}

func (w *walStore) Close() error {
	err := w.WAL.Close()
	w.vfs.Close()
	return err
}
