package leaserecovery

import "fmt"

// ReportedReplica is one replica in a node's block report (§R6.1): an RUR is
// reported as its original; TEMPORARY is never reported.
type ReportedReplica struct {
	Node     NodeID
	ID       uint64
	GS       uint64
	NumBytes int64
	State    ReplicaState
}

// ReportContext is the leader's soft state about one reported replica.
type ReportContext struct {
	// MaxGS is the highest GS the applied state has allocated (the GS
	// counter). A report above it comes from the future: the leader has not
	// applied the entry that allocated it. 0 disables the check.
	MaxGS uint64
	// Location: the node is already a location of the block.
	Location bool
	// Corrupt: this node's replica is marked corrupt.
	Corrupt bool
	// PendingInvalidation: the replica is scheduled for deletion on the node.
	PendingInvalidation bool
	// Postpone: the leader is not caught up (§R9.7); queue a report that
	// looks corrupt instead of marking it.
	Postpone bool
}

// ReportAction is what the leader does with one reported replica (§R6.2).
type ReportAction uint8

const (
	reportUnspecified ReportAction = iota
	// ReportAddLocation: record the node as a location of the block (and
	// clear a corrupt mark). Then, for a COMMITTED block, check CanComplete.
	ReportAddLocation
	// ReportAddLocationAndExpected: as ReportAddLocation, and add or update
	// the node in the under-construction (expected) list.
	ReportAddLocationAndExpected
	// ReportAddExpected: add or update the node in the under-construction
	// (expected) list only.
	ReportAddExpected
	// ReportMarkCorrupt: mark the replica corrupt; it is deleted once the
	// block has enough usable replicas.
	ReportMarkCorrupt
	// ReportInvalidate: tell the node to delete the replica.
	ReportInvalidate
	// ReportIgnore: nothing to do.
	ReportIgnore
	// ReportQueue: keep the report and replay it once the applied state has
	// caught up (HDFS PendingDataNodeMessages, §R7.32).
	ReportQueue
)

func (a ReportAction) String() string {
	switch a {
	case ReportAddLocation:
		return "add-location"
	case ReportAddLocationAndExpected:
		return "add-location-and-expected"
	case ReportAddExpected:
		return "add-expected"
	case ReportMarkCorrupt:
		return "mark-corrupt"
	case ReportInvalidate:
		return "invalidate"
	case ReportIgnore:
		return "ignore"
	case ReportQueue:
		return "queue"
	}
	return fmt.Sprintf("ReportAction(%d)", uint8(a))
}

// Reconciliation reasons (why ReconcileReplica chose its action).
const (
	ReportReasonFutureGS        = "future-gs"
	ReportReasonMalformed       = "malformed"
	ReportReasonUnknownBlock    = "unknown-block"
	ReportReasonIDMismatch      = "id-mismatch"
	ReportReasonPendingDelete   = "pending-invalidation"
	ReportReasonGSMismatch      = "gs-mismatch"
	ReportReasonLengthMismatch  = "length-mismatch"
	ReportReasonStaleGS         = "stale-gs"
	ReportReasonInvalidState    = "invalid-state"
	ReportReasonUnderConstr     = "under-construction"
	ReportReasonNewLocation     = "new-location"
	ReportReasonKnownLocation   = "known-location"
	ReportReasonLateRBW         = "late-rbw-after-close"
	ReportReasonUnknownBlkState = "unknown-block-state"
)

// Reconciliation is the verdict of ReconcileReplica.
type Reconciliation struct {
	Action ReportAction
	Reason string // a ReportReason* constant
	// CheckComplete: a location was added to a COMMITTED block; complete it
	// if CanComplete (§R6.2 step 5).
	CheckComplete bool
}

// ReconcileReplica decides what one reported replica means for the stored
// block with that id (nil: unknown id), HDFS processReportedBlock (§R6.2).
//
// Rules, in order:
//   - GS above c.MaxGS → ReportQueue (future; §R7.32; before the lookup, so a
//     block whose allocation is not applied yet is not deleted);
//   - negative length → ReportIgnore (malformed);
//   - unknown block → ReportInvalidate (step 1, §R7.29);
//   - stored id differs → ReportIgnore (caller error);
//   - pending invalidation on the node → ReportIgnore (step 2);
//   - corrupt per the table below → ReportMarkCorrupt, or ReportQueue when
//     c.Postpone (step 3);
//   - FINALIZED for an UNDER_CONSTRUCTION/UNDER_RECOVERY block →
//     ReportAddLocationAndExpected, or ReportAddExpected when already a
//     valid location (steps 4-5, §R7.28);
//   - RBW/RWR for a block not COMPLETE → ReportAddExpected (step 4);
//   - FINALIZED, not yet a valid location → ReportAddLocation (step 5);
//   - else ReportIgnore (already a location; RBW at the GS of a COMPLETE
//     block, a late report after close, HDFS-2791).
//
// Corruption table (reported vs stored):
//
//	            COMPLETE              COMMITTED             UNDER_CONSTRUCTION   UNDER_RECOVERY
//	FINALIZED   GS≠ or len≠           GS≠ or len≠           GS < stored          never
//	RBW         GS≠ (same GS: ignore) GS < stored           GS < stored          GS < stored
//	RWR         always                GS < stored           GS < stored          GS < stored
//	RUR, TEMP   always (a node never reports these; invariant broken)
func ReconcileReplica(stored *Block, r ReportedReplica, c ReportContext) Reconciliation {
	switch {
	case c.MaxGS != 0 && r.GS > c.MaxGS:
		return Reconciliation{Action: ReportQueue, Reason: ReportReasonFutureGS}
	case r.NumBytes < 0:
		return Reconciliation{Action: ReportIgnore, Reason: ReportReasonMalformed}
	case stored == nil:
		return Reconciliation{Action: ReportInvalidate, Reason: ReportReasonUnknownBlock}
	case stored.ID != r.ID:
		return Reconciliation{Action: ReportIgnore, Reason: ReportReasonIDMismatch}
	case c.PendingInvalidation:
		return Reconciliation{Action: ReportIgnore, Reason: ReportReasonPendingDelete}
	}
	switch stored.State {
	case BlockComplete, BlockCommitted, BlockUnderConstruction, BlockUnderRecovery:
	default:
		return Reconciliation{Action: ReportIgnore, Reason: ReportReasonUnknownBlkState}
	}
	if why := corruptReason(stored, r); why != "" {
		if c.Postpone {
			return Reconciliation{Action: ReportQueue, Reason: why}
		}
		return Reconciliation{Action: ReportMarkCorrupt, Reason: why}
	}
	newLocation := !c.Location || c.Corrupt
	uc := stored.State == BlockUnderConstruction || stored.State == BlockUnderRecovery
	switch {
	case r.State == ReplicaFinalized && uc && newLocation:
		return Reconciliation{Action: ReportAddLocationAndExpected, Reason: ReportReasonUnderConstr}
	case r.State == ReplicaFinalized && uc:
		return Reconciliation{Action: ReportAddExpected, Reason: ReportReasonUnderConstr}
	case r.State != ReplicaFinalized && stored.State != BlockComplete:
		return Reconciliation{Action: ReportAddExpected, Reason: ReportReasonUnderConstr}
	case r.State == ReplicaFinalized && newLocation:
		return Reconciliation{Action: ReportAddLocation, Reason: ReportReasonNewLocation,
			CheckComplete: stored.State == BlockCommitted}
	case r.State == ReplicaFinalized:
		return Reconciliation{Action: ReportIgnore, Reason: ReportReasonKnownLocation}
	}
	return Reconciliation{Action: ReportIgnore, Reason: ReportReasonLateRBW}
}

// corruptReason applies the corruption table of §R6.2; "" means not corrupt.
func corruptReason(b *Block, r ReportedReplica) string {
	switch r.State {
	case ReplicaFinalized:
		switch b.State {
		case BlockComplete, BlockCommitted:
			if r.GS != b.GS {
				return ReportReasonGSMismatch
			}
			if r.NumBytes != b.NumBytes {
				return ReportReasonLengthMismatch
			}
		case BlockUnderConstruction:
			if r.GS < b.GS {
				return ReportReasonStaleGS
			}
		}
		return ""
	case ReplicaRBW, ReplicaRWR:
		if b.State == BlockComplete {
			if r.GS != b.GS {
				return ReportReasonGSMismatch
			}
			if r.State == ReplicaRWR {
				return ReportReasonInvalidState
			}
			return ""
		}
		if r.GS < b.GS {
			return ReportReasonStaleGS
		}
		return ""
	}
	return ReportReasonInvalidState
}
