package fsm

import (
	"errors"
	"fmt"
	"time"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// The lease and recovery rules live in leaserecovery (pure functions shared
// with the leader and the storage nodes); this file converts the records to
// its views and its errors to this package's sentinels.

// toRuleState converts a block state; the enums share their numbering.
func toRuleState(st pb.BlockState) lr.BlockState { return lr.BlockState(st) }

func fromRuleState(st lr.BlockState) pb.BlockState { return pb.BlockState(st) }

func toNodeIDs(ids []string) []lr.NodeID {
	out := make([]lr.NodeID, len(ids))
	for i, id := range ids {
		out[i] = lr.NodeID(id)
	}
	return out
}

func fromNodeIDs(ids []lr.NodeID) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// ruleBlock is b as leaserecovery sees it. live marks the blocks the leader
// vouched for as minimally replicated (LiveReplicas 1 against a
// MinReplication of 1: the FSM knows no replica counts, only the leader's
// verdict carried in the entry, design §R9.5).
func ruleBlock(b *pb.BlockRecord, live bool) lr.Block {
	rb := lr.Block{
		ID: b.Id, GS: b.Gs, NumBytes: int64(b.NumBytes), State: toRuleState(b.State),
		Expected: toNodeIDs(b.ExpectedLocations),
	}
	if live {
		rb.LiveReplicas = 1
	}
	if r := b.Recovery; r != nil {
		rb.Recovery = lr.Recovery{
			ID: r.RecoveryId, Primary: lr.NodeID(r.Primary), Attempt: int(r.Attempt),
			Chosen: toNodeIDs(r.TriedPrimaries), Deadline: time.Unix(0, r.DeadlineUnixNanos),
		}
	}
	return rb
}

// ruleFile is f (with the op's staged blocks) as leaserecovery sees it.
func (s *State) ruleFile(f *pb.FileRecord, st staged, live map[uint64]bool) *lr.File {
	rf := &lr.File{Path: f.Path, UnderConstruction: f.UnderConstruction, LeaseHolder: f.LeaseHolder, MinReplication: 1}
	rf.Blocks = make([]lr.Block, len(f.BlockIds))
	for i, id := range f.BlockIds {
		rf.Blocks[i] = ruleBlock(s.get(st, id), live[id])
	}
	return rf
}

// reasonSentinels maps leaserecovery reasons to this package's sentinels.
var reasonSentinels = map[string]error{
	lr.ReasonRecoveryIDMismatch:     ErrStaleRecovery,
	lr.ReasonBlockNotFound:          ErrBlockNotFound,
	lr.ReasonNotUnderConstruction:   ErrNotUnderConstruction,
	lr.ReasonNotLastBlock:           ErrNotLastBlock,
	lr.ReasonNotUnderRecovery:       ErrBlockState,
	lr.ReasonUnexpectedState:        ErrBlockState,
	lr.ReasonAlreadyCommitted:       ErrBlockState,
	lr.ReasonLengthMismatch:         ErrBlockState,
	lr.ReasonBadBlockStates:         ErrBlockState,
	lr.ReasonUnknownBlockState:      ErrBlockState,
	lr.ReasonUnderRecovery:          ErrRecoveryInProgress,
	lr.ReasonRecoveryInProgress:     ErrRecoveryInProgress,
	lr.ReasonLeaseMismatch:          ErrNotLeaseHolder,
	lr.ReasonGSMismatch:             ErrStaleGS,
	lr.ReasonOldGSMismatch:          ErrStaleGS,
	lr.ReasonGSNotAllocated:         ErrInvalidGS,
	lr.ReasonLengthShrinks:          ErrBlockLength,
	lr.ReasonBadLength:              ErrBlockLength,
	lr.ReasonCommittedNotReplicated: ErrNotReplicatedYet,
	lr.ReasonPenultimateNotComplete: ErrNotReplicatedYet,
	lr.ReasonBadGS:                  ErrInvalidRecovery,
	lr.ReasonBadRecoveryID:          ErrInvalidRecovery,
	lr.ReasonNoTargets:              ErrInvalidTargets,
	lr.ReasonTargetsWithDelete:      ErrInvalidTargets,
	lr.ReasonBadNodes:               ErrInvalidTargets,
}

// fromRules wraps a leaserecovery refusal in the matching sentinel: both
// errors.Is(err, fsm.ErrStaleRecovery) and errors.Is(err, lr.ErrAborted)
// hold, and KindOf reports the rule's kind.
func fromRules(err error) error {
	if err == nil {
		return nil
	}
	sentinel, ok := reasonSentinels[lr.ReasonOf(err)]
	if !ok {
		sentinel = ErrInvalidNamespaceOp
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

var ruleKinds = map[lr.ErrorKind]Kind{
	lr.KindInvalidArgument:    KindInvalidArgument,
	lr.KindNotFound:           KindNotFound,
	lr.KindFailedPrecondition: KindFailedPrecondition,
	lr.KindAborted:            KindAborted,
	lr.KindOutOfRange:         KindOutOfRange,
	lr.KindUnavailable:        KindUnavailable,
	lr.KindInternal:           KindInternal,
}

// KindOf returns the kind of err: the rule's kind when a leaserecovery rule
// refused, else the kind of the first KindError in err's chain.
func KindOf(err error) Kind {
	var re *lr.Error
	if errors.As(err, &re) {
		if k, ok := ruleKinds[re.Kind]; ok {
			return k
		}
	}
	var ke *KindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return KindUnknown
}
