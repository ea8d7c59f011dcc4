package client

import (
	"context"
	"fmt"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// The audit event types of block recoveries: the coordinators journal
// one for every recovery attempt started and for every commit accepted
// (fsm.EventRecoveryStarted, fsm.EventRecoveryCommitted).
const (
	EventRecoveryStarted   = "logbook.recovery.started"
	EventRecoveryCommitted = "logbook.recovery.committed"
)

// RecoveryEvent is a block recovery's audit event, decoded.
type RecoveryEvent struct {
	// Seq and Type are the journal event's.
	Seq  uint64
	Type string
	// Time is when the leader proposed the op.
	Time    time.Time
	BlockID uint64
	// Started events: the block's file, its GS before the attempt, and
	// the attempt.
	Path    string
	GS      uint64
	Attempt *BlockRecovery
	// Committed events: the commit.
	Commit *RecoveryCommit
}

// RecoveryCommit is an accepted commit of a block recovery.
type RecoveryCommit struct {
	// RecoveryID is the attempt that committed; NewGS the block's GS
	// after it (equal to RecoveryID), OldGS before.
	RecoveryID   uint64
	OldGS, NewGS uint64
	// Length is the block's length chosen by the primary.
	Length uint64
	// Participants are the node ids of the replicas the primary recovered.
	Participants []string
	// Deleted: no replica had data and the block was dropped.
	Deleted bool
	// FileClosed: the file is closed (by this commit, or already).
	FileClosed bool
}

// DecodeRecoveryEvent decodes e if it is a block recovery's audit event;
// ok is false for an event of any other type.
func DecodeRecoveryEvent(e StoredEvent) (ev RecoveryEvent, ok bool, err error) {
	if e.Type != EventRecoveryStarted && e.Type != EventRecoveryCommitted {
		return RecoveryEvent{}, false, nil
	}
	var ne fsmpb.NamespaceEvent
	if err := proto.Unmarshal(e.Payload, &ne); err != nil {
		return RecoveryEvent{}, false, fmt.Errorf("logbook: journal event %d (%s): %w", e.Seq, e.Type, err)
	}
	ev = RecoveryEvent{Seq: e.Seq, Type: e.Type, Time: unixNanos(ne.GetUnixNanos())}
	if e.Type == EventRecoveryStarted {
		op, b := ne.GetOp().GetStartRecovery(), ne.GetResult().GetBlock()
		r := b.GetRecovery()
		ev.BlockID, ev.Path, ev.GS = op.GetBlockId(), op.GetPath(), b.GetGs()
		ev.Attempt = &BlockRecovery{ID: r.GetRecoveryId(), Primary: r.GetPrimary(), Attempt: r.GetAttempt(),
			Deadline: unixNanos(r.GetDeadlineUnixNanos()), Reason: r.GetReason()}
		return ev, true, nil
	}
	op := ne.GetOp().GetCommitBlockSync()
	ev.BlockID, ev.GS = op.GetBlockId(), op.GetOldGs()
	ev.Commit = &RecoveryCommit{RecoveryID: op.GetRecoveryId(), OldGS: op.GetOldGs(), NewGS: op.GetNewGs(), Length: op.GetNewLength(),
		Participants: append([]string(nil), op.GetTargets()...), Deleted: op.GetDeleteBlock(),
		FileClosed: ne.GetResult().GetClosed() || op.GetCloseFile()}
	return ev, true, nil
}

// RecoveryHistory is every recovery of one block found in the journal.
type RecoveryHistory struct {
	BlockID uint64
	Path    string
	// OldGS is the block's GS before its first attempt.
	OldGS uint64
	// Attempts are the started events, in order.
	Attempts []RecoveryEvent
	// Committed is the last commit's event; nil while in progress.
	Committed *RecoveryEvent
}

// FoldRecoveries folds recovery events, in journal order, into one
// history per block, in the order the blocks were first recovered.
func FoldRecoveries(evs []RecoveryEvent) []RecoveryHistory {
	var f recoveryFolder
	for _, ev := range evs {
		f.add(ev)
	}
	return f.histories()
}

type recoveryFolder struct {
	byBlock map[uint64]int // block id -> index in out
	out     []RecoveryHistory
}

func (f *recoveryFolder) add(ev RecoveryEvent) {
	i, ok := f.byBlock[ev.BlockID]
	if !ok {
		if f.byBlock == nil {
			f.byBlock = map[uint64]int{}
		}
		i = len(f.out)
		f.byBlock[ev.BlockID] = i
		f.out = append(f.out, RecoveryHistory{BlockID: ev.BlockID})
	}
	h := &f.out[i]
	switch {
	case ev.Attempt != nil:
		if len(h.Attempts) == 0 {
			h.OldGS = ev.GS
		}
		h.Path = ev.Path
		h.Attempts = append(h.Attempts, ev)
	case ev.Commit != nil:
		h.Committed = &ev
	}
}

func (f *recoveryFolder) histories() []RecoveryHistory {
	if f.out == nil {
		return []RecoveryHistory{}
	}
	return f.out
}

// Recoveries reads the retained journal (ReadRange from its first
// retained event to its end, with SkipTrimmed: recoveries whose events
// were trimmed are gone) and returns every block recovery found in it,
// one history per block, in the order the blocks were first recovered.
func (j *Journal) Recoveries(ctx context.Context, opts ...ReadOption) ([]RecoveryHistory, error) {
	var f recoveryFolder
	err := j.ReadRange(ctx, 0, 0, func(e StoredEvent) error {
		ev, ok, err := DecodeRecoveryEvent(e)
		if ok {
			f.add(ev)
		}
		return err
	}, append(opts, SkipTrimmed())...)
	if err != nil {
		return nil, err
	}
	return f.histories(), nil
}
