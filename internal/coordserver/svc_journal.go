package coordserver

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	maxTypeLen     = 256
	maxClientIDLen = fsm.MaxClientIDBytes
)

type journalService struct {
	pb.UnimplementedJournalServer
	s *Server
}

// validateAppend bounds everything that came from the network.
func (s *Server) validateAppend(req *pb.AppendRequest) error {
	if n := len(req.Events); n == 0 || n > s.cfg.MaxEventsPerRequest {
		return status.Errorf(codes.InvalidArgument, "append: %d events; want 1..%d per request", n, s.cfg.MaxEventsPerRequest)
	}
	for i, e := range req.Events {
		if e.Type == "" || len(e.Type) > maxTypeLen || !utf8.ValidString(e.Type) {
			return status.Errorf(codes.InvalidArgument, "append: event %d: type must be 1..%d bytes of UTF-8", i, maxTypeLen)
		}
		if len(e.Payload) > s.cfg.MaxEventBytes {
			return status.Errorf(codes.InvalidArgument, "append: event %d: payload of %d bytes exceeds the %d-byte cap (coord serve --max-event-bytes)", i, len(e.Payload), s.cfg.MaxEventBytes)
		}
	}
	if n := proto.Size(req); n > s.cfg.MaxRequestBytes {
		return status.Errorf(codes.InvalidArgument, "append: request of %d bytes exceeds the %d-byte cap; send its events in several appends", n, s.cfg.MaxRequestBytes)
	}
	if len(req.ClientId) > maxClientIDLen {
		return status.Errorf(codes.InvalidArgument, "append: client id longer than %d bytes", maxClientIDLen)
	}
	if req.ClientId != "" {
		if req.RequestSeq == 0 {
			return status.Error(codes.InvalidArgument, "append: a request with a client id needs request_seq >= 1")
		}
		if req.AckedSeq >= req.RequestSeq {
			return status.Errorf(codes.InvalidArgument, "append: acked_seq %d must be below request_seq %d", req.AckedSeq, req.RequestSeq)
		}
	} else if req.RequestSeq != 0 || req.AckedSeq != 0 || req.SessionEstablished {
		return status.Error(codes.InvalidArgument, "append: request_seq, acked_seq and session_established need a client id")
	}
	return nil
}

func toOp(req *pb.AppendRequest) *fsmpb.AppendOp {
	op := &fsmpb.AppendOp{ClientId: req.ClientId, RequestSeq: req.RequestSeq, AckedSeq: req.AckedSeq, SessionEstablished: req.SessionEstablished, Events: make([]*fsmpb.JournalEvent, len(req.Events))}
	for i, e := range req.Events {
		op.Events[i] = &fsmpb.JournalEvent{Type: e.Type, Payload: e.Payload}
	}
	return op
}

func (j *journalService) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	s := j.s
	if err := s.validateAppend(req); err != nil {
		return nil, err
	}
	b := s.forwardB
	if s.raft.State() == raft.Leader {
		b = s.leaderB
	}
	r, err := b.Submit(ctx, toOp(req))
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.AppendResponse{FirstSeq: r.FirstSeq, Count: r.Count, Index: r.Index}, nil
}

func (j *journalService) Read(ctx context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	s := j.s
	// max is an upper bound: above the server's own it is served as that
	// (end READ_END_MAX), so a caller asking for more pages on.
	max := min(int(req.Max), s.cfg.MaxReadEvents)
	if req.Max == 0 {
		max = min(1000, s.cfg.MaxReadEvents)
	}
	switch req.Consistency {
	case pb.Consistency_CONSISTENCY_UNSPECIFIED, pb.Consistency_CONSISTENCY_LINEARIZABLE:
		if err := s.linearizableBarrier(ctx); err != nil {
			return nil, err
		}
	case pb.Consistency_CONSISTENCY_STALE:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "read: unknown consistency %d", req.Consistency)
	}
	from := req.From
	if from == 0 {
		from = 1
	}
	resp := &pb.ReadResponse{}
	var err error
	s.fsm.View(func(st *fsm.State) {
		if from < st.FirstSeq() {
			err = status.Errorf(codes.OutOfRange, "read: seq %d is no longer retained; earliest is %d", from, st.FirstSeq())
			return
		}
		resp.AppliedIndex = st.AppliedIndex()
		resp.NextSeq = st.NextSeq()
		resp.Events, resp.End = readPage(st.Read(from, max), req.MaxBytes, resp.NextSeq)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
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
