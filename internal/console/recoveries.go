package console

import (
	"fmt"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// The audit event types of block recoveries (fsm.EventRecoveryStarted,
// fsm.EventRecoveryCommitted): the leader journals one for every attempt
// started and every commit accepted. They are decoded and folded here as
// the SDK does for coord recovery ls (client.DecodeRecoveryEvent,
// client.FoldRecoveries), which the console cannot import: the SDK's
// tests run the coordinator in process.
const (
	eventRecoveryStarted   = "logbook.recovery.started"
	eventRecoveryCommitted = "logbook.recovery.committed"
)

// recoveryEvent is one decoded recovery audit event: an attempt (Attempt
// set) or a commit.
type recoveryEvent struct {
	Seq     uint64
	Time    time.Time
	BlockID uint64
	Path    string
	GS      uint64
	Attempt *RecoveryAttempt
	Commit  *fsmpb.CommitBlockSyncOp
	Closed  bool
}

func decodeRecovery(e *pbEvent) (recoveryEvent, error) {
	var ne fsmpb.NamespaceEvent
	if err := proto.Unmarshal(e.Payload, &ne); err != nil {
		return recoveryEvent{}, fmt.Errorf("journal event %d (%s): %w", e.Seq, e.Type, err)
	}
	ev := recoveryEvent{Seq: e.Seq, Time: unixTime(ne.GetUnixNanos())}
	if e.Type == eventRecoveryStarted {
		op, b := ne.GetOp().GetStartRecovery(), ne.GetResult().GetBlock()
		r := b.GetRecovery()
		ev.BlockID, ev.Path, ev.GS = op.GetBlockId(), op.GetPath(), b.GetGs()
		ev.Attempt = &RecoveryAttempt{RecoveryID: r.GetRecoveryId(), Attempt: r.GetAttempt(), Primary: r.GetPrimary(), Reason: r.GetReason(),
			StartedAt: ev.Time, Deadline: unixTime(r.GetDeadlineUnixNanos()), Seq: e.Seq}
		return ev, nil
	}
	op := ne.GetOp().GetCommitBlockSync()
	ev.BlockID, ev.GS, ev.Commit = op.GetBlockId(), op.GetOldGs(), op
	ev.Closed = ne.GetResult().GetClosed() || op.GetCloseFile()
	return ev, nil
}

func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// foldRecoveries folds events, in journal order, into one record per
// block, in the order the blocks were first recovered; now ends the
// duration of those in progress.
func foldRecoveries(evs []recoveryEvent, now time.Time) []Recovery {
	byBlock := map[uint64]int{}
	out := []Recovery{}
	for _, ev := range evs {
		i, ok := byBlock[ev.BlockID]
		if !ok {
			i = len(out)
			byBlock[ev.BlockID] = i
			out = append(out, Recovery{BlockID: ev.BlockID, Attempts: []RecoveryAttempt{}, Primary: "-"})
		}
		r := &out[i]
		switch {
		case ev.Attempt != nil:
			if len(r.Attempts) == 0 {
				r.OldGS, r.StartedAt = ev.GS, ev.Time
			}
			r.Path, r.Primary = ev.Path, ev.Attempt.Primary
			r.Attempts = append(r.Attempts, *ev.Attempt)
		case ev.Commit != nil:
			cm := ev.Commit
			r.Committed, r.RecoveryID, r.NewGS, r.Length = true, cm.GetRecoveryId(), cm.GetNewGs(), cm.GetNewLength()
			r.Participants = append([]string(nil), cm.GetTargets()...)
			r.Deleted, r.FileClosed = cm.GetDeleteBlock(), ev.Closed
			t := ev.Time
			r.CommittedAt = &t
		}
	}
	for i := range out {
		r := &out[i]
		end := now
		if r.CommittedAt != nil {
			end = *r.CommittedAt
		}
		if !r.StartedAt.IsZero() {
			r.DurationMs = end.Sub(r.StartedAt).Milliseconds()
		}
		r.Outcome = outcome(r)
	}
	return out
}

// outcome is a recovery's outcome in coord recovery ls's words.
func outcome(r *Recovery) string {
	switch {
	case !r.Committed:
		return "in progress"
	case r.Deleted:
		return fmt.Sprintf("committed by recovery %d: block deleted (no replica had data)", r.RecoveryID)
	}
	closed := ""
	if r.FileClosed {
		closed = ", file closed"
	}
	return fmt.Sprintf("committed by recovery %d: length %d, GS %d, %d replicas%s", r.RecoveryID, r.Length, r.NewGS, len(r.Participants), closed)
}
