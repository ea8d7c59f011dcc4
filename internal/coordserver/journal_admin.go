package coordserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// applyCommand proposes one non-append command on the leader and returns
// the state machine's response, its errors as gRPC statuses. Followers
// reach it through the forward interceptor.
func (s *Server) applyCommand(t fsmpb.CommandType, m proto.Message) (any, error) {
	resp, err := s.apply(t, m)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return resp, nil
}

// apply is applyCommand with the domain's and Raft's errors as they are.
func (s *Server) apply(t fsmpb.CommandType, m proto.Message) (any, error) {
	if s.raft.State() != raft.Leader {
		return nil, raft.ErrNotLeader
	}
	data, err := s.encode(t, m)
	if err != nil {
		return nil, err
	}
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	if err := s.await(f); err != nil {
		return nil, err
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// OpenSession proposes an OPEN_SESSION (log format 7) and answers the new
// session's id once it is applied.
func (j *journalService) OpenSession(ctx context.Context, req *pb.OpenSessionRequest) (*pb.OpenSessionResponse, error) {
	s := j.s
	if !fsm.ValidSessionClientID(req.ClientId) {
		return nil, status.Errorf(codes.InvalidArgument, "open session: client id must be 1..%d bytes of UTF-8, got %d bytes", fsm.MaxSessionBaseBytes, len(req.ClientId))
	}
	if err := s.needFormat(fsm.SessionOpenFormat, "opening a session needs"); err != nil {
		return nil, err
	}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_OPEN_SESSION, &fsmpb.OpenSessionCommand{ClientId: req.ClientId})
	if err != nil {
		return nil, err
	}
	r := resp.(fsm.OpenSessionResult)
	if r.Err != nil {
		return nil, s.toStatus(r.Err)
	}
	return &pb.OpenSessionResponse{SessionId: r.SessionID, Index: r.Index, IdleTimeoutSeconds: uint64(r.IdleTimeout / time.Second)}, nil
}

// CloseSession proposes a CLOSE_SESSION (log format 8) and answers once it
// is applied whether the cluster held the session until then.
func (j *journalService) CloseSession(ctx context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	s := j.s
	if !fsm.ValidSessionID(req.SessionId) {
		return nil, status.Errorf(codes.InvalidArgument, "close session: session id must be 1..%d bytes of UTF-8, got %d bytes", fsm.MaxClientIDBytes, len(req.SessionId))
	}
	if err := s.needFormat(fsm.SessionCloseFormat, "closing a session needs"); err != nil {
		return nil, err
	}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_CLOSE_SESSION, &fsmpb.CloseSessionCommand{SessionId: req.SessionId})
	if err != nil {
		return nil, err
	}
	r := resp.(fsm.CloseSessionResult)
	if r.Err != nil {
		return nil, s.toStatus(r.Err)
	}
	return &pb.CloseSessionResponse{Closed: r.Closed, Index: r.Index}, nil
}

// snapshotIndex is the index of this member's newest snapshot (0: none).
func (s *Server) snapshotIndex() uint64 {
	list, err := s.snaps.List()
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

func (j *journalService) Positions(ctx context.Context, _ *pb.PositionsRequest) (*pb.PositionsResponse, error) {
	s := j.s
	covered := s.snapshotIndex()
	resp := &pb.PositionsResponse{MemberId: s.cfg.ID}
	s.fsm.View(func(st *fsm.State) {
		resp.SafePos = st.NextSeq() - 1
		resp.ExpirePos = st.ExpirePos(covered)
		resp.TrimmedPos = st.FirstSeq()
		resp.EventCount = uint64(st.EventCount())
		resp.SegmentCount = uint64(len(st.Segments()))
		resp.AppliedIndex = st.AppliedIndex()
		resp.Warning = strings.Join(s.journalWarnings(st), "; ")
		resp.LogFormat = st.LogFormat()
	})
	resp.WritePos = resp.SafePos
	if s.raft.State() == raft.Leader {
		resp.WritePos += uint64(s.inflightEvents.Load())
		resp.Paused = s.leaderB.Paused()
	}
	return resp, nil
}

func (j *journalService) Segments(ctx context.Context, _ *pb.SegmentsRequest) (*pb.SegmentsResponse, error) {
	s := j.s
	covered := s.snapshotIndex()
	resp := &pb.SegmentsResponse{}
	s.fsm.View(func(st *fsm.State) {
		for _, seg := range st.Segments() {
			resp.Segments = append(resp.Segments, &pb.SegmentInfo{
				Id: seg.Id, FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq, Events: seg.Events, Bytes: seg.Bytes,
				State: st.SegmentState(seg, covered), FirstIndex: seg.FirstIndex, LastIndex: seg.LastIndex,
			})
		}
	})
	return resp, nil
}

func (s *Server) consumerInfo(name string, acked uint64) *pb.ConsumerInfo {
	var safe uint64
	s.fsm.View(func(st *fsm.State) { safe = st.NextSeq() - 1 })
	lag := uint64(0)
	if safe > acked {
		lag = safe - acked
	}
	return &pb.ConsumerInfo{Name: name, AckedSeq: acked, Lag: lag}
}

func (s *Server) consumerOp(c *fsmpb.ConsumerCommand) (*pb.ConsumerResponse, error) {
	var err error
	s.fsm.View(func(st *fsm.State) { err = st.CheckConsumer(c) })
	if err != nil {
		return nil, s.toStatus(err) // refused before it reaches the log
	}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_CONSUMER, c)
	if err != nil {
		return nil, err
	}
	r := resp.(fsm.ConsumerResult)
	if r.Err != nil {
		return nil, s.toStatus(r.Err)
	}
	return &pb.ConsumerResponse{Consumer: s.consumerInfo(r.Name, r.AckedSeq)}, nil
}

func (j *journalService) RegisterConsumer(ctx context.Context, req *pb.RegisterConsumerRequest) (*pb.ConsumerResponse, error) {
	return j.s.consumerOp(&fsmpb.ConsumerCommand{Op: fsmpb.ConsumerOp_CONSUMER_OP_REGISTER, Name: req.Name, Seq: req.From, FromGiven: req.From != 0})
}

func (j *journalService) AckConsumer(ctx context.Context, req *pb.AckConsumerRequest) (*pb.ConsumerResponse, error) {
	return j.s.consumerOp(&fsmpb.ConsumerCommand{Op: fsmpb.ConsumerOp_CONSUMER_OP_ACK, Name: req.Name, Seq: req.Seq})
}

func (j *journalService) RemoveConsumer(ctx context.Context, req *pb.RemoveConsumerRequest) (*pb.ConsumerResponse, error) {
	return j.s.consumerOp(&fsmpb.ConsumerCommand{Op: fsmpb.ConsumerOp_CONSUMER_OP_REMOVE, Name: req.Name})
}

func (j *journalService) ListConsumers(ctx context.Context, _ *pb.ListConsumersRequest) (*pb.ListConsumersResponse, error) {
	s := j.s
	resp := &pb.ListConsumersResponse{}
	s.fsm.View(func(st *fsm.State) {
		safe := st.NextSeq() - 1
		for _, c := range st.Consumers() {
			resp.Consumers = append(resp.Consumers, &pb.ConsumerInfo{Name: c.Name, AckedSeq: c.AckedSeq, Lag: safe - min(safe, c.AckedSeq)})
		}
	})
	return resp, nil
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

func (j *journalService) Trim(ctx context.Context, req *pb.TrimRequest) (*pb.TrimResponse, error) {
	s := j.s
	var next uint64
	s.fsm.View(func(st *fsm.State) { next = st.NextSeq() })
	if req.To > next {
		return nil, status.Errorf(codes.InvalidArgument, "trim: --to %d is beyond the end of the journal (next seq %d)", req.To, next)
	}
	r, err := s.trimExpired(req.To, false)
	if err != nil {
		return nil, err
	}
	s.log.Info("journal trimmed", "trimmed-pos", r.TrimmedPos, "segments", r.Segments)
	return &pb.TrimResponse{TrimmedPos: r.TrimmedPos, SegmentsTrimmed: r.Segments}, nil
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

func (j *journalService) Reset(ctx context.Context, req *pb.ResetRequest) (*pb.ResetResponse, error) {
	s := j.s
	if !req.Confirm {
		return nil, status.Error(codes.FailedPrecondition, "reset drops every retained event: confirm it (coord journal reset --yes)")
	}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_RESET, &fsmpb.ResetCommand{})
	if err != nil {
		return nil, err
	}
	r := resp.(fsm.TrimResult)
	s.log.Warn("journal reset", "trimmed-pos", r.TrimmedPos)
	return &pb.ResetResponse{TrimmedPos: r.TrimmedPos}, nil
}

// Tail streams events in seq order as this member applies them: gapless
// because it reads the applied state, which only grows at the end, and
// fails with OutOfRange if the journal was trimmed past its position.
func (j *journalService) Tail(req *pb.TailRequest, stream pb.Journal_TailServer) error {
	s := j.s
	s.tailStreams.Add(1)
	defer s.tailStreams.Add(-1)
	ctx := stream.Context()
	next := req.From
	if next == 0 {
		next = 1
	}
	hb := time.Duration(req.HeartbeatMs) * time.Millisecond
	if hb <= 0 {
		hb = time.Second
	}
	const batch = 1000
	for {
		resp := &pb.TailResponse{}
		var err error
		applied := s.fsm.ViewWait(func(st *fsm.State) {
			if next < st.FirstSeq() {
				err = status.Errorf(codes.OutOfRange, "tail: seq %d is no longer retained; earliest is %d", next, st.FirstSeq())
				return
			}
			for _, e := range st.Read(next, batch) {
				resp.Events = append(resp.Events, apiEvent(e))
			}
			resp.SafePos, resp.AppliedIndex = st.NextSeq()-1, st.AppliedIndex()
		})
		if err != nil {
			return err
		}
		if n := len(resp.Events); n > 0 {
			next = resp.Events[n-1].Seq + 1
			if err := stream.Send(resp); err != nil {
				return err
			}
			continue
		}
		timer := time.NewTimer(hb)
		select {
		case <-ctx.Done():
			timer.Stop()
			return status.FromContextError(ctx.Err()).Err()
		case <-s.ctx.Done():
			timer.Stop()
			return status.Error(codes.Unavailable, "coordinator shutting down")
		case <-applied:
			timer.Stop()
		case <-timer.C:
			if err := stream.Send(resp); err != nil { // progress heartbeat
				return err
			}
		}
	}
}

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

// GetConfig answers the journal settings as this member has applied them.
func (j *journalService) GetConfig(context.Context, *pb.GetJournalConfigRequest) (*pb.JournalConfigResponse, error) {
	return j.s.journalConfigResponse(), nil
}

func (s *Server) journalConfigResponse() *pb.JournalConfigResponse {
	resp := &pb.JournalConfigResponse{MemberId: s.cfg.ID}
	s.fsm.View(func(st *fsm.State) {
		resp.Config = apiJournalConfig(st.JournalConfig())
		resp.LogFormat, resp.AppliedIndex = st.LogFormat(), st.AppliedIndex()
	})
	return resp
}

// SetConfig changes the journal settings the cluster holds: the fields
// given, checked against fsm.ValidJournalConfig's bounds here with a
// reason (the state machine checks the result again, against the settings
// it holds when it applies the command).
func (j *journalService) SetConfig(ctx context.Context, req *pb.SetJournalConfigRequest) (*pb.JournalConfigResponse, error) {
	s := j.s
	c := &fsmpb.SetJournalConfigCommand{
		EventsPerSegment: req.EventsPerSegment, SegmentBytes: req.SegmentBytes, SessionIdleTimeoutSeconds: req.SessionIdleTimeoutSeconds,
		MaxSegments: req.MaxSegments, MaxEvents: req.MaxEvents,
	}
	if err := checkJournalSettings(c); err != nil {
		return nil, err
	}
	if err := s.needFormat(fsm.HeldConfigFormat, "journal settings held by the cluster need"); err != nil {
		return nil, err
	}
	var held bool
	s.fsm.View(func(st *fsm.State) { held = st.JournalConfig().GetHeld() })
	if !held {
		// Not seeded yet (the format just reached 11): this change seeds,
		// with this leader's flags for the settings it leaves out, as
		// journalLoop would have.
		c = s.cfg.Journal.seedWith(c)
	}
	if _, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_SET_JOURNAL_CONFIG, c); err != nil {
		return nil, err
	}
	s.log.Info("journal settings changed", "settings", c.String())
	return s.journalConfigResponse(), nil
}

// checkJournalSettings refuses a change with no setting or a setting out
// of bounds, saying which.
func checkJournalSettings(c *fsmpb.SetJournalConfigCommand) error {
	bad := func(name string, v *uint64, lo, hi uint64) error {
		if v != nil && (*v < lo || *v > hi) {
			return status.Errorf(codes.InvalidArgument, "set journal config: %s %d: want %d..%d", name, *v, lo, hi)
		}
		return nil
	}
	if c.EventsPerSegment == nil && c.SegmentBytes == nil && c.SessionIdleTimeoutSeconds == nil && c.MaxSegments == nil && c.MaxEvents == nil {
		return status.Error(codes.InvalidArgument, "set journal config: no setting given")
	}
	for _, err := range []error{
		bad("events per segment", c.EventsPerSegment, 1, fsm.MaxEventsPerSegment),
		bad("segment bytes", c.SegmentBytes, 1, fsm.MaxSegmentBytes),
		bad("session idle timeout (seconds)", c.SessionIdleTimeoutSeconds, 0, uint64(fsm.MaxSessionIdleTimeout/time.Second)),
		bad("max segments", c.MaxSegments, 0, fsm.MaxTrimSegments),
		bad("max events", c.MaxEvents, 0, fsm.MaxTrimEvents),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func (j *journalService) SetPaused(ctx context.Context, req *pb.SetPausedRequest) (*pb.SetPausedResponse, error) {
	s := j.s
	if s.raft.State() != raft.Leader {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
	}
	if req.Paused {
		s.leaderB.Pause()
		s.log.Warn("journal submit path paused")
	} else {
		s.leaderB.Resume()
		s.log.Info("journal submit path resumed")
	}
	return &pb.SetPausedResponse{Paused: s.leaderB.Paused(), LeaderId: s.cfg.ID}, nil
}

// Import applies one chunk of an export. The first chunk refuses a
// non-empty journal and an export of another cluster unless forced.
func (j *journalService) Import(ctx context.Context, req *pb.ImportRequest) (*pb.ImportResponse, error) {
	s := j.s
	if len(req.Events) == 0 || len(req.Events) > s.cfg.MaxEventsPerRequest {
		return nil, status.Errorf(codes.InvalidArgument, "import: %d events in a chunk; want 1..%d", len(req.Events), s.cfg.MaxEventsPerRequest)
	}
	if n := proto.Size(req); n > s.cfg.MaxRequestBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "import: chunk of %d bytes exceeds %d", n, s.cfg.MaxRequestBytes)
	}
	for i, e := range req.Events {
		if e.Type == "" || len(e.Type) > maxTypeLen || len(e.Payload) > s.cfg.MaxEventBytes || len(e.ClientId) > maxClientIDLen {
			return nil, status.Errorf(codes.InvalidArgument, "import: event %d (seq %d) exceeds a limit or has no type", i, e.Seq)
		}
	}
	if req.FirstChunk && !req.Force && req.SourceClusterId != s.cfg.ClusterID {
		return nil, s.statusErr(codes.FailedPrecondition, ReasonClusterID,
			fmt.Sprintf("import: the export belongs to cluster %q, this is %q (force to import anyway)", req.SourceClusterId, s.cfg.ClusterID))
	}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_IMPORT, &fsmpb.ImportCommand{Events: formatEvents(req.Events), FirstChunk: req.FirstChunk, Force: req.Force})
	if err != nil {
		return nil, err
	}
	if r := resp.(fsm.TrimResult); r.Err != nil {
		return nil, s.toStatus(r.Err)
	}
	var next uint64
	s.fsm.View(func(st *fsm.State) { next = st.NextSeq() })
	return &pb.ImportResponse{NextSeq: next}, nil
}
