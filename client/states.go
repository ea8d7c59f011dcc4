package client

import (
	"strconv"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// BlockState is the coordinators' state of a block (HDFS BlockUCState).
type BlockState int

// Block states.
const (
	BlockStateUnknown BlockState = iota
	// BlockUnderConstruction: the last block of an open file, being
	// written by the pipeline in BlockInfo.Expected.
	BlockUnderConstruction
	// BlockUnderRecovery: a block recovery owns the block
	// (BlockInfo.Recovery); the writer is fenced.
	BlockUnderRecovery
	// BlockCommitted: the client committed GS and length; minimal
	// replication not yet vouched for by the leader.
	BlockCommitted
	// BlockComplete: length and GS final and minimally replicated (or
	// forced by a recovery).
	BlockComplete
)

var blockStateNames = [...]string{"UNSPECIFIED", "UNDER_CONSTRUCTION", "UNDER_RECOVERY", "COMMITTED", "COMPLETE"}

// String is the state's name as the API spells it without its prefix:
// COMPLETE for BLOCK_STATE_COMPLETE.
func (s BlockState) String() string {
	if s >= 0 && int(s) < len(blockStateNames) {
		return blockStateNames[s]
	}
	return "BlockState(" + strconv.Itoa(int(s)) + ")"
}

func toBlockState(s pb.BlockState) BlockState {
	switch s {
	case pb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION:
		return BlockUnderConstruction
	case pb.BlockState_BLOCK_STATE_UNDER_RECOVERY:
		return BlockUnderRecovery
	case pb.BlockState_BLOCK_STATE_COMMITTED:
		return BlockCommitted
	case pb.BlockState_BLOCK_STATE_COMPLETE:
		return BlockComplete
	}
	return BlockStateUnknown
}

// ReplicaState is a storage node's state of a replica (HDFS ReplicaState);
// lower is better.
type ReplicaState int

// Replica states.
const (
	ReplicaStateUnknown ReplicaState = iota
	// ReplicaFinalized: complete, length and GS final.
	ReplicaFinalized
	// ReplicaRBW: being written.
	ReplicaRBW
	// ReplicaRWR: waiting to be recovered (its writer is gone).
	ReplicaRWR
	// ReplicaRUR: under recovery.
	ReplicaRUR
	// ReplicaTemporary: a copy in transfer.
	ReplicaTemporary
)

var replicaStateNames = [...]string{"UNSPECIFIED", "FINALIZED", "RBW", "RWR", "RUR", "TEMPORARY"}

// String is the state's name as the API spells it without its prefix:
// RBW for REPLICA_STATE_RBW.
func (s ReplicaState) String() string {
	if s >= 0 && int(s) < len(replicaStateNames) {
		return replicaStateNames[s]
	}
	return "ReplicaState(" + strconv.Itoa(int(s)) + ")"
}

func toReplicaState(s pb.ReplicaState) ReplicaState {
	switch s {
	case pb.ReplicaState_REPLICA_STATE_FINALIZED:
		return ReplicaFinalized
	case pb.ReplicaState_REPLICA_STATE_RBW:
		return ReplicaRBW
	case pb.ReplicaState_REPLICA_STATE_RWR:
		return ReplicaRWR
	case pb.ReplicaState_REPLICA_STATE_RUR:
		return ReplicaRUR
	case pb.ReplicaState_REPLICA_STATE_TEMPORARY:
		return ReplicaTemporary
	}
	return ReplicaStateUnknown
}
