package coordserver

import (
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"google.golang.org/protobuf/proto"
)

// A restarted member rebuilds its state from its newest snapshot (Raft
// restores it while opening) and the log entries after it (applied once it
// learns they are committed). How long that took, and over how many
// events, is its startup replay: coord status shows it per member, and
// /metrics as logbook_startup_replay_seconds and _events. A member that
// started empty has none.

// beginReplay records the restored snapshot and starts watching for the
// moment the member has caught up: it has applied every entry its own log
// held at start (lastIndex), or, if some of those were never committed
// (a new leader will overwrite them), it is ready: it applied everything
// the leader has committed. It notes when the first log entry after the
// snapshot applied: the log's replay starts there, after the wait for a
// commit index.
func (s *Server) beginReplay(lastIndex uint64) {
	var next uint64
	r := &pb.StartupReplay{LastIndex: lastIndex}
	s.fsm.View(func(st *fsm.State) {
		r.SnapshotIndex, r.SnapshotEvents, next = st.AppliedIndex(), uint64(st.EventCount()), st.NextSeq()
	})
	r.SnapshotSeconds = time.Since(s.started).Seconds()
	s.replay.Store(r)
	s.goLoop(func() { s.awaitReplay(r, next) })
}

func (s *Server) awaitReplay(r *pb.StartupReplay, next0 uint64) {
	// The apply channel wakes the loop as entries apply; the ticker covers
	// readiness, which can come without an apply (a leader's heartbeat).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var applied, next uint64
		ch := s.fsm.ViewWait(func(st *fsm.State) { applied, next = st.AppliedIndex(), st.NextSeq() })
		if r.LogWaitSeconds == 0 && applied > r.SnapshotIndex {
			r = proto.CloneOf(r) // readers hold the stored one
			r.LogWaitSeconds = time.Since(s.started).Seconds()
			if next > next0 {
				r.LogWaitEvents = next - next0 // applied before this wake-up: not timed
			}
			s.replay.Store(r)
		}
		if applied >= r.LastIndex || s.ready() == nil {
			done := proto.CloneOf(r)
			done.Seconds, done.CaughtUp = time.Since(s.started).Seconds(), true
			if applied > r.SnapshotIndex {
				done.LogEntries = applied - r.SnapshotIndex
			}
			if next > next0 { // a forced import can move the next seq back
				done.LogEvents = next - next0
			}
			s.replay.Store(done)
			events := done.SnapshotEvents + done.LogEvents
			s.log.Info("caught up after restart", "seconds", done.Seconds, "events", events,
				"events-per-second", int64(float64(events)/max(done.Seconds, 1e-9)),
				"snapshot-index", done.SnapshotIndex, "snapshot-events", done.SnapshotEvents, "snapshot-seconds", done.SnapshotSeconds,
				"log-wait-seconds", done.LogWaitSeconds, "log-entries", done.LogEntries, "log-events", done.LogEvents)
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

// startupReplay is this member's startup replay (nil: it started empty);
// while it is replaying, Seconds is the time so far.
func (s *Server) startupReplay(now time.Time) *pb.StartupReplay {
	r := s.replay.Load()
	if r == nil || r.CaughtUp {
		return r
	}
	c := proto.CloneOf(r)
	c.Seconds = now.Sub(s.started).Seconds()
	return c
}
