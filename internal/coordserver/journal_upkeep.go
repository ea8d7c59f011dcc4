package coordserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// journalLoop is the leader's journal upkeep. Before log format 11 it
// replicates its own segment thresholds (and, from log format 9 on, its
// session idle timeout); at 11, once, it seeds the settings the cluster
// holds from its own (SET_JOURNAL_CONFIG), and never again. It trims
// expired segments once the journal is over its limits (taking a snapshot
// first when the expired segments are not yet covered by one).
func (s *Server) journalLoop() {
	s.every(time.Second, func() bool {
		if !s.leaderReady() {
			return true
		}
		want := &fsmpb.JournalConfig{EventsPerSegment: s.cfg.Journal.EventsPerSegment, SegmentBytes: s.cfg.Journal.SegmentBytes}
		var have *fsmpb.JournalConfig
		var format uint32
		s.fsm.View(func(st *fsm.State) {
			have, format = st.JournalConfig(), st.LogFormat()
			if format >= fsm.SessionIdleFormat {
				want.SessionIdleTimeoutSeconds = uint64(s.cfg.Journal.SessionIdleTimeout / time.Second)
			}
		})
		switch {
		case format >= fsm.HeldConfigFormat && !have.GetHeld():
			if _, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_SET_JOURNAL_CONFIG, s.cfg.Journal.seed()); err != nil {
				s.log.Warn("seeding the cluster's journal settings failed", "err", err)
			} else {
				s.log.Info("the cluster's journal settings seeded from this coordinator's", "events-per-segment", s.cfg.Journal.EventsPerSegment,
					"segment-bytes", s.cfg.Journal.SegmentBytes, "session-idle-timeout", s.cfg.Journal.SessionIdleTimeout,
					"max-segments", s.cfg.Journal.MaxSegments, "max-events", s.cfg.Journal.MaxEvents)
			}
			return true
		case format < fsm.HeldConfigFormat && !proto.Equal(want, have):
			if _, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, want); err != nil {
				s.log.Warn("replicating journal config failed", "err", err)
			}
			return true
		}
		s.upgradeLogFormat()
		defer s.journalUpkeeps.Add(1)
		var to uint64
		s.fsm.View(func(st *fsm.State) {
			maxSegments, maxEvents := s.journalLimits(st)
			to = st.ExcessTrimTo(maxSegments, maxEvents, s.cfg.Journal.MaxRetainedBytes)
		})
		if to == 0 {
			return true
		}
		r, err := s.trimExpired(to, true)
		if err != nil {
			s.log.Warn("automatic trim failed", "err", err)
		} else if r.Segments > 0 {
			s.log.Debug("journal trimmed automatically", "trimmed-pos", r.TrimmedPos, "segments", r.Segments)
		}
		return true
	})
}

// trim proposes a trim bounded by this leader's newest snapshot.
func (s *Server) trim(to uint64, automatic bool) (fsm.TrimResult, error) {
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_TRIM, &fsmpb.TrimCommand{ToSeq: to, CoveredIndex: s.snapshotIndex(), Automatic: automatic})
	if err != nil {
		return fsm.TrimResult{}, err
	}
	r := resp.(fsm.TrimResult)
	return r, s.toStatus(r.Err)
}

// trimExpired is the whole trim on the leader, manual (to > 0: at most up
// to that seq) or automatic, in the order that keeps a crash at any step
// recoverable:
//
//  1. segments every consumer has passed but no snapshot covers yet: take a
//     snapshot first (they become expired, not only expiring);
//  2. propose the TRIM command (the analogue of MDLog's journal header
//     write): once it commits, every member drops the same segments at the
//     same index;
//  3. after a manual trim, snapshot again so that the files on disk follow
//     the trim (the new snapshot no longer holds the dropped events, and
//     Raft compacts its log behind it).
//
// An automatic trim (to: the first seq of the oldest segment within the
// limits, State.ExcessTrimTo) drops only the excess, so the journal stays
// near its limits as MDLog's does, and takes no snapshot after: the next
// ones are covered by the snapshot of step 1 until the journal has grown by
// what that snapshot did not hold, so a busy journal takes about one
// snapshot per --journal-max-segments segments appended.
//
// A crash before 2 commits leaves the journal untrimmed; after, trimmed;
// either way replay from snapshot + log rebuilds the same state on every
// member (TestTrimCrashAtEachStep).
func (s *Server) trimExpired(to uint64, automatic bool) (fsm.TrimResult, error) {
	if err := s.crashPoint("trim-before-snapshot"); err != nil {
		return fsm.TrimResult{}, err
	}
	if s.needsSnapshotForTrim(to) {
		if err := s.await(s.raft.Snapshot()); err != nil && err != raft.ErrNothingNewToSnapshot {
			if automatic {
				return fsm.TrimResult{}, fmt.Errorf("snapshot before trim: %w", err)
			}
			s.log.Warn("snapshot before trim failed", "err", err)
		}
	}
	if err := s.crashPoint("trim-after-snapshot"); err != nil {
		return fsm.TrimResult{}, err
	}
	r, err := s.trim(to, automatic)
	if err != nil {
		return r, err
	}
	if err := s.crashPoint("trim-after-apply"); err != nil {
		return fsm.TrimResult{}, err
	}
	if r.Segments > 0 && !automatic {
		if err := s.await(s.raft.Snapshot()); err != nil && err != raft.ErrNothingNewToSnapshot {
			s.log.Warn("snapshot after trim failed", "err", err)
		}
	}
	if err := s.crashPoint("trim-after-resnapshot"); err != nil {
		return fsm.TrimResult{}, err
	}
	return r, nil
}

// crashPoint lets tests stop an operation at a named step, as if the
// process died there (Config.crashAt); it is nil in production.
func (s *Server) crashPoint(step string) error {
	if s.cfg.crashAt != nil && s.cfg.crashAt(step) {
		return status.Errorf(codes.Internal, "crash point %s", step)
	}
	return nil
}

// needsSnapshotForTrim: some segment a trim to to would drop (every one
// when to is 0) is acked by every consumer but not yet covered by this
// member's newest snapshot.
func (s *Server) needsSnapshotForTrim(to uint64) bool {
	covered := s.snapshotIndex()
	need := false
	s.fsm.View(func(st *fsm.State) {
		for _, seg := range st.Segments() {
			if to != 0 && seg.LastSeq >= to {
				return
			}
			if st.SegmentState(seg, covered) == fsm.SegmentExpiring {
				need = true
				return
			}
		}
	})
	return need
}

// snapshotIndex is the index of this member's newest snapshot (0: none).
func (s *Server) snapshotIndex() uint64 {
	list, err := s.node.Snapshots().List()
	if err != nil || len(list) == 0 {
		return 0
	}
	return list[0].Index
}

// trimWarning is the "behind on trimming" health warning: a lagging
// consumer holds more than twice the segment limit.
func (s *Server) trimWarning(st *fsm.State) string {
	max, _ := s.journalLimits(st)
	if max == 0 {
		return ""
	}
	if n := len(st.Segments()); n > 2*max {
		return fmt.Sprintf("behind on trimming: %d/%d segments", n, max)
	}
	return ""
}

// quotaWarning is the "journal full" health warning: the sealed segments
// take at least this member's retention quota, so as leader it refuses
// new appends (overQuota).
func (s *Server) quotaWarning(st *fsm.State) string {
	quota := s.cfg.Journal.MaxRetainedBytes
	if used := st.SealedBytes(); quota > 0 && used >= quota {
		return fmt.Sprintf("journal full: %d/%d bytes in sealed segments; appends are refused%s", used, quota, heldBackBy(st))
	}
	return ""
}

// journalWarnings are the journal's health warnings in force.
func (s *Server) journalWarnings(st *fsm.State) []string {
	var ws []string
	for _, w := range []string{s.trimWarning(st), s.quotaWarning(st)} {
		if w != "" {
			ws = append(ws, w)
		}
	}
	return ws
}

// journalLimits are the automatic trim bounds in force: the cluster's once
// it holds its journal settings (log format 11), before that this
// member's own (the leader's trims by its own).
func (s *Server) journalLimits(st *fsm.State) (maxSegments, maxEvents int) {
	if c := st.JournalConfig(); c.GetHeld() {
		return int(c.GetMaxSegments()), int(c.GetMaxEvents())
	}
	return s.cfg.Journal.MaxSegments, s.cfg.Journal.MaxEvents
}

// configMismatch compares this member's journal settings with the
// replicated ones: "" when they agree. Before the cluster holds its
// settings, a non-leader compares all of its own (the leader replicates
// its own within a second, journalLoop): were it to lead, it would replace
// the cluster's. Once the cluster holds them, every member compares only
// the ones given to it explicitly: they are not used.
func (s *Server) configMismatch(st *fsm.State) string {
	if s.raft == nil {
		return ""
	}
	have, j := st.JournalConfig(), s.cfg.Journal
	held := have.GetHeld()
	if !held && s.raft.State() == raft.Leader {
		return ""
	}
	var diffs []string
	word := "replicated"
	if held {
		word = "held"
	}
	differs := func(given bool, flag string, here, there any) {
		if (given || !held) && here != there {
			diffs = append(diffs, fmt.Sprintf("--%s %v here, %v %s", flag, here, there, word))
		}
	}
	differs(j.Given.EventsPerSegment, "journal-events-per-segment", j.EventsPerSegment, have.GetEventsPerSegment())
	differs(j.Given.SegmentBytes, "journal-segment-bytes", j.SegmentBytes, have.GetSegmentBytes())
	if st.LogFormat() >= fsm.SessionIdleFormat {
		idle := time.Duration(j.SessionIdleTimeout/time.Second) * time.Second
		differs(j.Given.SessionIdleTimeout, "session-idle-timeout", idle, time.Duration(have.GetSessionIdleTimeoutSeconds())*time.Second)
	}
	if held {
		differs(j.Given.MaxSegments, "journal-max-segments", uint64(j.MaxSegments), have.GetMaxSegments())
		differs(j.Given.MaxEvents, "journal-max-events", uint64(j.MaxEvents), have.GetMaxEvents())
	}
	if len(diffs) == 0 {
		return ""
	}
	if held {
		return fmt.Sprintf("%s: journal settings differ from the ones the cluster holds (%s); the cluster's are used: change them with coord journal config set, and align or drop these flags",
			s.cfg.ID, strings.Join(diffs, "; "))
	}
	return fmt.Sprintf("%s: journal settings differ from the ones the leader replicated from its flags (%s); were %s to lead, it would replace them: give every coordinator the same",
		s.cfg.ID, strings.Join(diffs, "; "), s.cfg.ID)
}

// configWarnAfter is how many checks in a row (configCheckLoop, one a
// second) must find the same mismatch before it is reported: a cluster's
// settings differ from its leader's for a moment after it forms, after a
// leader change and after the log format reaches 9 (the session idle
// timeout is replicated at the leader's next tick), and that is not worth
// a warning.
const configWarnAfter = 3

// configCheckLoop checks every second whether this member's journal
// settings differ from the replicated ones (configMismatch) and keeps the
// warning configWarning reports.
func (s *Server) configCheckLoop() {
	var last string
	seen := 0
	s.every(time.Second, func() bool {
		var cur string
		s.fsm.View(func(st *fsm.State) { cur = s.configMismatch(st) })
		if cur != last {
			seen = 0
		}
		last = cur
		if cur != "" {
			seen++
		}
		w := ""
		if seen >= configWarnAfter {
			w = cur
		}
		s.configWarn.Store(&w)
		return true
	})
}

// configWarning is this member's warning when its journal settings have
// differed from the replicated ones for the last configWarnAfter checks
// (configMismatch): before log format 11 a leader change to this member
// would replace the cluster's with them; from 11 on its explicitly given
// flags are not used.
func (s *Server) configWarning() string {
	if w := s.configWarn.Load(); w != nil {
		return *w
	}
	return ""
}
