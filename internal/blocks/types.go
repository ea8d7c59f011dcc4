package blocks

import (
	"fmt"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// What storage nodes tell the manager and what it tells them. The RPC
// layer converts the NodeLink messages to and from these.

// Storage is one volume of a node as its heartbeat reports it.
type Storage struct {
	ID                   string
	Capacity, Used, Free uint64
	Failed               bool
}

// Replica is a replica a node reports. State is one of the five replica
// states (leaserecovery's); the RPC layer refuses others.
type Replica struct {
	BlockID  uint64
	GS       uint64
	NumBytes int64
	State    lr.ReplicaState
}

// StorageReplicas is one storage's part of a full block report. The
// replicas of a failed storage do not count.
type StorageReplicas struct {
	StorageID string
	Failed    bool
	Replicas  []Replica
}

// Change is one entry of an incremental report: a replica received (or
// changed) on a storage, or deleted.
type Change struct {
	Deleted   bool
	StorageID string
	Replica   Replica
}

// CacheReport is what a node caches in locked memory.
type CacheReport struct {
	Capacity, Used uint64
	BlockIDs       []uint64
}

// Location is a node a command names, with its gRPC address.
type Location struct {
	NodeID, Addr string
}

// Recover asks a node to run a block recovery as its primary.
type Recover struct {
	BlockID, GS, NumBytes, RecoveryID uint64
	Path                              string
	Locations                         []Location
	DeadlineUnixNanos                 int64
}

// Transfer asks a node to copy its replica of Block to Targets.
type Transfer struct {
	Block   *fsmpb.BlockRef
	Targets []Location
}

// Work is what a heartbeat reply tells a node to do, in the order the
// reply lists it.
type Work struct {
	// ReRegister: the node reported a storage its registration lacks.
	ReRegister bool
	// SendFullReport: this leader has no full report of the node yet.
	SendFullReport bool
	Recover        []Recover
	Transfers      []Transfer
	// Invalidate: replicas to delete (excess, deleted or stale blocks).
	Invalidate []*fsmpb.BlockRef
	// Cache and Uncache: blocks to load into or drop from locked memory.
	Cache, Uncache []*fsmpb.BlockRef
}

// Heartbeat is a node's heartbeat.
type Heartbeat struct {
	NodeID   string
	Storages []Storage
	Cache    CacheReport
}

// HeartbeatReply is the manager's answer to a heartbeat.
type HeartbeatReply struct {
	SafeMode bool
	Work     Work
}

// BadReplica is a replica a reader or a node's scanner found corrupt.
type BadReplica struct {
	BlockID, GS uint64
	NodeID      string
	Reason      string
}

// Reported is one node's report of a block, as Stat shows it.
type Reported struct {
	NodeID   string
	State    lr.ReplicaState
	GS       uint64
	NumBytes int64
	Corrupt  bool
	Cached   bool
}

// NodeStatus is one registered node with the leader's view of it.
type NodeStatus struct {
	Record *fsmpb.NodeRecord
	// Live: heard from within the stale interval, and gossip does not
	// report it gone.
	Live bool
	// Dead: silent for longer than the dead interval.
	Dead bool
	// SinceHeartbeat is the time since its last heartbeat this term; -1:
	// none yet.
	SinceHeartbeat time.Duration
	FullReport     bool
	Replicas       uint64
	// ReplicasByState counts Replicas by state.
	ReplicasByState ReplicaCounts
	// When this leader took the node's last full and incremental block
	// reports; zero: none this term.
	LastFullReport, LastIncrementalReport time.Time
	Storages                              []Storage // by id
	Gossip                                string    // its gossip state, "" when it never gossiped
	// The latest cache report: locked-memory budget, bytes and replicas
	// cached.
	CacheCapacity, CacheUsed, CachedBlocks uint64
}

// NodesView is every registered node and the leader's replication state.
type NodesView struct {
	SafeMode                                   bool
	UnderReplicated, Missing, PendingTransfers uint64
	Nodes                                      []NodeStatus
}

// ReplicationStats is the leader's replication state, for metrics and
// status (zero on a follower).
type ReplicationStats struct {
	UnderReplicated, Missing, Pending, DeadNodes int
}

// NamespaceOp wraps one op of the namespace (a *fsmpb.CreateFileOp, …)
// in its NamespaceOp envelope. It panics on any other type: a programming
// error, not input.
func NamespaceOp(op any) *fsmpb.NamespaceOp {
	switch x := op.(type) {
	case *fsmpb.CreateFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CreateFile{CreateFile: x}}
	case *fsmpb.AddBlockOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AddBlock{AddBlock: x}}
	case *fsmpb.CompleteFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CompleteFile{CompleteFile: x}}
	case *fsmpb.AppendFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AppendFile{AppendFile: x}}
	case *fsmpb.DeleteFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_DeleteFile{DeleteFile: x}}
	case *fsmpb.AbandonBlockOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AbandonBlock{AbandonBlock: x}}
	case *fsmpb.UpdateBlockForPipelineOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_UpdateBlockForPipeline{UpdateBlockForPipeline: x}}
	case *fsmpb.UpdatePipelineOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_UpdatePipeline{UpdatePipeline: x}}
	case *fsmpb.StartRecoveryOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_StartRecovery{StartRecovery: x}}
	case *fsmpb.CommitBlockSyncOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CommitBlockSync{CommitBlockSync: x}}
	case *fsmpb.ReleaseLeaseOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_ReleaseLease{ReleaseLease: x}}
	case *fsmpb.RegisterNodeOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_RegisterNode{RegisterNode: x}}
	case *fsmpb.AddCacheDirectiveOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AddCacheDirective{AddCacheDirective: x}}
	case *fsmpb.RemoveCacheDirectiveOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_RemoveCacheDirective{RemoveCacheDirective: x}}
	case *fsmpb.NamespaceOp:
		return x
	}
	panic(fmt.Sprintf("blocks.NamespaceOp: %T", op))
}
