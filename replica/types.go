package replica

import (
	"context"
	"fmt"
	"io"
)

// State is a replica's state. The numeric values are HDFS's ReplicaState
// ordinals: lower is "better", recovery ranks FINALIZED > RBW > RWR.
type State uint8

const (
	StateFinalized State = 0 // write finished; length and GS frozen; in finalized/
	StateRBW       State = 1 // being written by a client pipeline; in rbw/
	StateRWR       State = 2 // rbw replica found at restart; waits for block recovery
	StateRUR       State = 3 // under block recovery; wraps an original FINALIZED/RBW/RWR
	StateTemporary State = 4 // DN-to-DN transfer target; in tmp/; never visible or reported
)

func (s State) String() string {
	switch s {
	case StateFinalized:
		return "FINALIZED"
	case StateRBW:
		return "RBW"
	case StateRWR:
		return "RWR"
	case StateRUR:
		return "RUR"
	case StateTemporary:
		return "TEMPORARY"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// InPipeline reports whether a writer may own a replica in this state.
func (s State) InPipeline() bool { return s == StateRBW || s == StateTemporary }

// StorageType of a volume.
type StorageType uint8

const (
	StorageUnspecified StorageType = iota // in CreateOptions: any type
	StorageDisk
	StorageSSD
	StorageArchive
	StorageRAMDisk
)

func (t StorageType) String() string {
	switch t {
	case StorageUnspecified:
		return "UNSPECIFIED"
	case StorageDisk:
		return "DISK"
	case StorageSSD:
		return "SSD"
	case StorageArchive:
		return "ARCHIVE"
	case StorageRAMDisk:
		return "RAM_DISK"
	}
	return fmt.Sprintf("StorageType(%d)", uint8(t))
}

// Persistent reports whether data survives a power loss.
func (t StorageType) Persistent() bool { return t != StorageRAMDisk }

// ParseStorageType parses "DISK", "SSD", "ARCHIVE" or "RAM_DISK".
func ParseStorageType(s string) (StorageType, error) {
	for t := StorageDisk; t <= StorageRAMDisk; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, newErr(KindInvalidArgument, "bad-storage-type", "unknown storage type %q", s)
}

// Block names a replica: id, generation stamp, length. Which length depends on
// the call: an expected length, an estimate, or the replica's length.
type Block struct {
	ID       uint64
	GS       uint64
	NumBytes int64
}

func (b Block) String() string { return fmt.Sprintf("blk_%d_%d(len %d)", b.ID, b.GS, b.NumBytes) }

// ReplicaInfo is a snapshot of one replica.
type ReplicaInfo struct {
	Pool  string
	ID    uint64
	GS    uint64
	State State
	// NumBytes is the final length (FINALIZED), bytes received (RBW,
	// TEMPORARY) or the validated length (RWR). For RUR: the original's.
	NumBytes    int64
	BytesOnDisk int64
	BytesAcked  int64 // RBW and TEMPORARY; equals NumBytes otherwise
	// VisibleLength is what a reader may read: -1 for TEMPORARY.
	VisibleLength int64
	OriginalState State  // RUR only: the wrapped replica's state
	RecoveryID    uint64 // RUR only
	StorageID     string
	StorageType   StorageType
	VolumePath    string
	HasWriter     bool
	Cached        bool
}

// Block returns {ID, GS, NumBytes}.
func (r ReplicaInfo) Block() Block { return Block{ID: r.ID, GS: r.GS, NumBytes: r.NumBytes} }

// RecoveryInfo is what InitReplicaRecovery returns (HDFS ReplicaRecoveryInfo):
// the original replica's bytes on disk, GS and state.
type RecoveryInfo struct {
	ID            uint64
	BytesOnDisk   int64
	GS            uint64
	OriginalState State
}

// CreateOptions steer volume choice for a new replica.
type CreateOptions struct {
	StorageType StorageType // StorageUnspecified: any volume
	StorageID   string      // "": any volume of the type
}

// Store is the node's replica dataset (HDFS FsDatasetSpi), as seen by the data
// service. *Dataset implements it over a file system: the OS (disk) or a
// MemFS (the in-memory fake). Every method is safe for concurrent use.
//
// Durability: a method that changes replica state on disk has fsynced that
// change (files and directories) before it returns nil. Packet data written
// through a Writer is durable only after Writer.Sync or Writer.Finalize.
type Store interface {
	AddBlockPool(ctx context.Context, bpid string) error
	ShutdownBlockPool(bpid string) error
	DeleteBlockPool(bpid string, force bool) error
	BlockPools() []string

	CreateRbw(ctx context.Context, bpid string, b Block, opts CreateOptions) (Writer, error)
	CreateTemporary(ctx context.Context, bpid string, b Block, isTransfer bool, opts CreateOptions) (Writer, error)
	ConvertTemporaryToRbw(ctx context.Context, bpid string, b Block) (ReplicaInfo, error)
	Append(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (Writer, error)
	RecoverAppend(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (Writer, error)
	RecoverClose(ctx context.Context, bpid string, b Block, newGS uint64, expectedLen int64) (ReplicaInfo, error)
	RecoverRbw(ctx context.Context, bpid string, b Block, newGS uint64, minBytesRcvd, maxBytesRcvd int64) (Writer, error)
	FinalizeBlock(ctx context.Context, bpid string, b Block) (ReplicaInfo, error)
	UnfinalizeBlock(ctx context.Context, bpid string, b Block) error
	Invalidate(ctx context.Context, bpid string, blocks []Block) error
	InitReplicaRecovery(ctx context.Context, bpid string, b Block, recoveryID uint64) (*RecoveryInfo, error)
	UpdateReplicaUnderRecovery(ctx context.Context, bpid string, old Block, recoveryID, newBlockID uint64, newLength int64) (ReplicaInfo, error)

	GetReplica(bpid string, id uint64) (ReplicaInfo, error)
	GetStoredBlock(bpid string, id uint64) (Block, error)
	GetReplicaVisibleLength(bpid string, b Block) (int64, error)
	Contains(bpid string, b Block) bool
	Replicas(bpid string) ([]ReplicaInfo, error)
	OpenBlock(bpid string, b Block) (BlockReader, error)
	OpenMeta(bpid string, b Block) (MetaReader, error)

	BlockReport(bpid string) ([]StorageBlockReport, error)
	Subscribe() *Subscription

	Close() error
}

// Writer is the one writer of an in-pipeline (RBW or TEMPORARY) replica
// (HDFS ReplicaInPipeline + its writer thread). Its methods are serialised.
//
// A newer operation on the replica (recovery, replacement by a transfer)
// stops the writer: Stopped() is closed, every later call returns KindAborted,
// and the newer operation waits (up to Config.WriterStopTimeout) for a call in
// progress to return. The owner should watch Stopped() and abort its stream.
type Writer interface {
	// Replica returns a snapshot of the replica.
	Replica() ReplicaInfo
	// WritePacket writes data at offset (a multiple of BytesPerChecksum, at
	// most the bytes already on disk) with one checksum per chunk of
	// BytesPerChecksum bytes (the last may be short), chunks aligned to
	// offset. Every checksum is verified before anything is written; bytes
	// already on disk (a resent packet) are skipped after checking they
	// match. Not durable until Sync.
	WritePacket(ctx context.Context, offset int64, data []byte, sums []uint32) error
	// SetBytesAcked records bytes acknowledged by the pipeline (the visible
	// length); n must not exceed bytes on disk nor move backwards.
	SetBytesAcked(n int64) error
	// Sync fsyncs data and meta (hsync).
	Sync() error
	// Finalize syncs and moves the replica to FINALIZED; the writer is done.
	Finalize(ctx context.Context) (ReplicaInfo, error)
	// Close releases the writer without a state change (an aborted stream).
	Close() error
	// Stopped is closed once a newer operation has stopped this writer.
	Stopped() <-chan struct{}
}

// BlockReader reads a replica's data up to the visible length it had when
// opened. It keeps reading the same bytes if the replica is finalized
// meanwhile (HDFS-17342).
type BlockReader interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	// Length is the readable length (visible length at open time).
	Length() int64
	// Replica is the replica as it was when opened.
	Replica() ReplicaInfo
	// ReadChunks reads whole chunks starting at off (a multiple of
	// BytesPerChecksum) into p, up to len(p) rounded down to whole chunks
	// (the last chunk of the replica may be short), verifies them and
	// returns the bytes read and one checksum per chunk. io.EOF at the end.
	// A checksum mismatch returns KindCorrupt.
	ReadChunks(off int64, p []byte) (n int, sums []uint32, err error)
	// BytesPerChecksum of this replica.
	BytesPerChecksum() int
}

// MetaReader reads a replica's meta (checksum) file (HDFS
// getMetaDataInputStream): the header, then raw checksum bytes.
type MetaReader interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	Header() MetaHeader
	// Length is the meta file length covering the reader's data length.
	Length() int64
}

// StorageBlockReport is one storage's (volume's) full block report.
type StorageBlockReport struct {
	StorageID   string
	StorageType StorageType
	Failed      bool
	Replicas    []ReportedReplica
}

// ReportedReplica is one entry of a block report. An RUR is reported as its
// original replica; TEMPORARY is never reported.
type ReportedReplica struct {
	ID       uint64
	GS       uint64
	NumBytes int64
	State    State
}
