package coordserver

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
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
			return status.Errorf(codes.ResourceExhausted, "append: event %d: payload of %d bytes exceeds the %d-byte cap", i, len(e.Payload), s.cfg.MaxEventBytes)
		}
	}
	if n := proto.Size(req); n > s.cfg.MaxRequestBytes {
		return status.Errorf(codes.ResourceExhausted, "append: request of %d bytes exceeds the %d-byte cap", n, s.cfg.MaxRequestBytes)
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
	max := int(req.Max)
	switch {
	case req.Max == 0:
		max = 1000
	case max > s.cfg.MaxReadEvents:
		return nil, status.Errorf(codes.InvalidArgument, "read: max %d exceeds %d", req.Max, s.cfg.MaxReadEvents)
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
		evs := st.Read(from, max)
		resp.Events = apiEvents(evs)
	})
	// Bound the reply to the message cap: stop early rather than fail.
	size := 0
	for i, e := range resp.Events {
		size += len(e.Payload) + len(e.Type) + 64
		if size > s.cfg.MaxRequestBytes && i > 0 {
			resp.Events = resp.Events[:i]
			break
		}
	}
	return resp, err
}

// linearizableBarrier returns once the local state reflects every write
// acknowledged before the call: the leader confirms its leadership and names
// its applied index (ReadIndex); this member waits until it applied that far.
func (s *Server) linearizableBarrier(ctx context.Context) error {
	var index uint64
	if s.raft.State() == raft.Leader {
		idx, err := s.localReadIndex(ctx)
		if err != nil {
			return err
		}
		index = idx
	} else {
		_, addr, err := s.waitLeader(ctx)
		if err != nil {
			return err
		}
		conn, err := s.peers.get(addr)
		if err != nil {
			return err
		}
		resp, err := clusterpb.NewPeerClient(conn).ReadIndex(ctx, &clusterpb.ReadIndexRequest{})
		if err != nil {
			return err
		}
		index = resp.Index
	}
	if err := s.fsm.WaitApplied(ctx, index); err != nil {
		return s.toStatus(err)
	}
	return nil
}

// localReadIndex: the leader's applied index covers every acknowledged
// write (appends are acknowledged after the leader applied them, and a new
// leader is ready only after applying an entry of its own term). It is
// captured before leadership is confirmed, so a deposed leader cannot serve
// an old index.
func (s *Server) localReadIndex(ctx context.Context) (uint64, error) {
	if !s.leaderReady() {
		if err := s.waitLeaderReady(ctx); err != nil {
			return 0, err
		}
	}
	index := s.fsm.AppliedIndex()
	if err := s.readIdx.verify(ctx); err != nil {
		return 0, s.toStatus(err)
	}
	return index, nil
}

func (s *Server) waitLeaderReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.NoLeaderHold)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !s.leaderReady() {
		if s.raft.State() != raft.Leader {
			return s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
		}
		select {
		case <-ctx.Done():
			return s.statusErr(codes.Unavailable, ReasonNotLeader, fmt.Sprintf("leader not ready: %v", ctx.Err()))
		case <-tick.C:
		}
	}
	return nil
}
