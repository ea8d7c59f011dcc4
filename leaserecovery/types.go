package leaserecovery

import (
	"fmt"
	"slices"
	"time"
)

// NodeID names a registered storage node.
type NodeID string

// BlockState is the coordinator's state of a block (HDFS BlockUCState, §R0).
// The zero value is not a state: every rule refuses or ignores it.
type BlockState uint8

const (
	BlockStateUnspecified BlockState = iota
	// BlockUnderConstruction: the last block of an open file, written by the
	// pipeline in Expected.
	BlockUnderConstruction
	// BlockUnderRecovery: a block recovery (Block.Recovery) owns the block;
	// the writer is fenced (§R3.5).
	BlockUnderRecovery
	// BlockCommitted: the client fixed GS and length; fewer than
	// MinReplication FINALIZED replicas are known.
	BlockCommitted
	// BlockComplete: length and GS final, minimally replicated (or forced by
	// a recovery commit, §R9.5).
	BlockComplete
)

func (s BlockState) String() string {
	switch s {
	case BlockUnderConstruction:
		return "UNDER_CONSTRUCTION"
	case BlockUnderRecovery:
		return "UNDER_RECOVERY"
	case BlockCommitted:
		return "COMMITTED"
	case BlockComplete:
		return "COMPLETE"
	}
	return fmt.Sprintf("BlockState(%d)", uint8(s))
}

// ReplicaState is a storage node's replica state (HDFS ReplicaState, §R1).
// The values are HDFS's ordinals, the same as replica.State, so the wiring
// converts with a cast: lower is better, and recovery ranks FINALIZED > RBW
// > RWR.
type ReplicaState uint8

const (
	ReplicaFinalized ReplicaState = 0
	ReplicaRBW       ReplicaState = 1
	ReplicaRWR       ReplicaState = 2
	ReplicaRUR       ReplicaState = 3
	ReplicaTemporary ReplicaState = 4
)

func (s ReplicaState) String() string {
	switch s {
	case ReplicaFinalized:
		return "FINALIZED"
	case ReplicaRBW:
		return "RBW"
	case ReplicaRWR:
		return "RWR"
	case ReplicaRUR:
		return "RUR"
	case ReplicaTemporary:
		return "TEMPORARY"
	}
	return fmt.Sprintf("ReplicaState(%d)", uint8(s))
}

// Recoverable reports whether block recovery may use a replica in state s as
// a source: FINALIZED, RBW or RWR, never RUR or TEMPORARY (§R4.1 step 1).
func (s ReplicaState) Recoverable() bool { return s <= ReplicaRWR }

// Block is the coordinator's view of one block.
type Block struct {
	ID       uint64
	GS       uint64
	NumBytes int64
	State    BlockState
	// Expected is the pipeline (HDFS expected locations), FSM state (§R9.9).
	Expected []NodeID
	// LiveReplicas counts live nodes known to hold a FINALIZED replica of
	// this block at its GS (HDFS blocksMap locations). It is leader soft
	// state, rebuilt from reports: the leader fills it, and a command that
	// the FSM re-checks at apply time carries it (§R9.5). The rules read it
	// only for a file's last two blocks.
	LiveReplicas int
	// Recovery is set while State is BlockUnderRecovery (§R9.1).
	Recovery Recovery
}

// Recovery is the replicated state of a block recovery (§R9.1): the current
// attempt's id and primary, and what earlier attempts chose.
type Recovery struct {
	// ID is the current recovery id: a fresh GS, and the GS the block takes
	// when this attempt commits. Only a commit carrying it is accepted.
	ID uint64
	// Primary is the node told to run the recovery ("" when no expected
	// location was alive, §R3.3).
	Primary NodeID
	// Attempt counts attempts of this recovery, from 1.
	Attempt int
	// Chosen lists the nodes already chosen as primary (HDFS chosenAsPrimary,
	// §R3.3), in the order they were chosen.
	Chosen []NodeID
	// Deadline is when the current attempt times out (§R3.2 rule 4c): from
	// then on the next release re-drives recovery with a new id. Time comes
	// from the command that started the attempt, never from a clock read at
	// apply time.
	Deadline time.Time
}

// File is the coordinator's view of one file.
type File struct {
	Path string
	// Blocks in file order.
	Blocks []Block
	// UnderConstruction: open for write, with a lease.
	UnderConstruction bool
	// LeaseHolder is the client name holding the lease ("" when closed).
	LeaseHolder string
	// MinReplication is the number of FINALIZED replicas a block needs to be
	// COMPLETE; values below 1 count as 1.
	MinReplication int
}

func (f *File) minReplication() int { return max(1, f.MinReplication) }

// blockIndex returns the index of block id in f, or -1.
func (f *File) blockIndex(id uint64) int {
	return slices.IndexFunc(f.Blocks, func(b Block) bool { return b.ID == id })
}

// isLast reports whether i is the index of f's last block.
func (f *File) isLast(i int) bool { return i == len(f.Blocks)-1 }

// Config holds the timing rules. Every coordinator must use the same values.
type Config struct {
	// SoftLimit: after it, another client's create/append/truncate may take
	// the file over (§R3.1). HDFS: 60 s.
	SoftLimit time.Duration
	// HardLimit: after it, the lease monitor recovers the file on its own
	// (§R3.1). HDFS 3.3+: 1200 s.
	HardLimit time.Duration
	// RecoveryTimeout: how long one recovery attempt may run before a new
	// one (new id, next primary) may start (§R3.2 rule 4c). HDFS: 90 s.
	RecoveryTimeout time.Duration
	// StaleInterval: a node without a heartbeat for this long is left out
	// of a recovery command's locations (§R3.4). HDFS: 30 s.
	StaleInterval time.Duration
}

// DefaultConfig returns HDFS's defaults (§R8).
func DefaultConfig() Config {
	return Config{
		SoftLimit:       60 * time.Second,
		HardLimit:       1200 * time.Second,
		RecoveryTimeout: 90 * time.Second,
		StaleInterval:   30 * time.Second,
	}
}

// Validate checks that every duration is positive and SoftLimit ≤ HardLimit.
func (c Config) Validate() error {
	if c.SoftLimit <= 0 || c.HardLimit <= 0 || c.RecoveryTimeout <= 0 || c.StaleInterval <= 0 {
		return newErr(KindInvalidArgument, ReasonBadConfig, "every duration must be positive: %+v", c)
	}
	if c.SoftLimit > c.HardLimit {
		return newErr(KindInvalidArgument, ReasonBadConfig, "soft limit %v above hard limit %v", c.SoftLimit, c.HardLimit)
	}
	return nil
}

// SoftExpired reports whether a lease last renewed at renewed has passed the
// soft limit at now (§R3.1).
func (c Config) SoftExpired(renewed, now time.Time) bool { return now.Sub(renewed) > c.SoftLimit }

// HardExpired reports whether a lease last renewed at renewed has passed the
// hard limit at now (§R3.1): the lease monitor then releases it with
// InternalHolder as the new holder.
func (c Config) HardExpired(renewed, now time.Time) bool { return now.Sub(renewed) > c.HardLimit }

// InternalHolder is the lease holder the coordinator itself takes over a
// file with when a lease passes its hard limit (HDFS "HDFS_NameNode").
const InternalHolder = "logbook-coordinator"

// validNodes reports whether nodes has no empty and no repeated id.
func validNodes(nodes []NodeID) bool {
	seen := make(map[NodeID]bool, len(nodes))
	for _, n := range nodes {
		if n == "" || seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}
