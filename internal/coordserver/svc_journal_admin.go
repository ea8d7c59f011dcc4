package coordserver

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

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

// GetConfig answers the journal settings as this member has applied them.
func (j *journalService) GetConfig(context.Context, *pb.GetJournalConfigRequest) (*pb.JournalConfigResponse, error) {
	return j.s.journalConfigResponse(), nil
}

func (s *Server) journalConfigResponse() *pb.JournalConfigResponse {
	resp := &pb.JournalConfigResponse{MemberId: s.cfg.ID, MaxEventBytes: uint64(s.cfg.MaxEventBytes), MaxRequestBytes: uint64(s.cfg.MaxRequestBytes)}
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
