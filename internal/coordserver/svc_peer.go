package coordserver

import (
	"context"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type peerService struct {
	clusterpb.UnimplementedPeerServer
	s *Server
}

// ForwardAppend applies a follower's batch on this leader; it never
// forwards again.
func (p *peerService) ForwardAppend(ctx context.Context, req *clusterpb.ForwardAppendRequest) (*clusterpb.ForwardAppendResponse, error) {
	if err := p.checkForward(req.Ops); err != nil {
		return nil, err
	}
	return &clusterpb.ForwardAppendResponse{Results: resultsToProto(p.s.submitLocal(ctx, req.Ops))}, nil
}

func toEvents(js []*fsmpb.JournalEvent) []*pb.Event {
	out := make([]*pb.Event, len(js))
	for i, e := range js {
		out[i] = &pb.Event{Type: e.Type, Payload: e.Payload}
	}
	return out
}

func (p *peerService) ReadIndex(ctx context.Context, _ *clusterpb.ReadIndexRequest) (*clusterpb.ReadIndexResponse, error) {
	s := p.s
	if s.raft.State() != raft.Leader {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "read index asked of a member that is not the leader")
	}
	idx, err := s.localReadIndex(ctx)
	if err != nil {
		return nil, err
	}
	return &clusterpb.ReadIndexResponse{Index: idx}, nil
}

func (p *peerService) LocalStatus(ctx context.Context, _ *clusterpb.LocalStatusRequest) (*clusterpb.LocalStatusResponse, error) {
	return p.s.localStatus(), nil
}

func (p *peerService) RegisterMember(ctx context.Context, req *clusterpb.RegisterMemberRequest) (*clusterpb.RegisterMemberResponse, error) {
	s := p.s
	m := req.Member
	if m == nil || !ValidID(m.Id) || checkAddr(m.RaftAddr, "") != nil || checkAddr(m.GrpcAddr, "") != nil {
		return nil, status.Error(codes.InvalidArgument, "register: member needs a valid id and raft and grpc addresses")
	}
	if s.raft.State() != raft.Leader {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
	}
	if err := s.applyMember(m); err != nil {
		return nil, s.toStatus(err)
	}
	return &clusterpb.RegisterMemberResponse{}, nil
}

// maxForwardStreamQueued bounds the batches one ForwardStream keeps queued
// on the leader; past it the leader stops reading (flow control pushes
// back on the follower).
const maxForwardStreamQueued = 64

// ForwardStream is the leader's side: it reads batches in order, queues
// each for the log at once and answers them in order as they become safe.
// A batch that is refused or fails is answered with its code on every op;
// the stream goes on.
func (p *peerService) ForwardStream(stream clusterpb.Peer_ForwardStreamServer) error {
	s := p.s
	type queued struct {
		n    int
		wait func(context.Context) []fsm.Result
		err  error
	}
	return answerInOrder(stream.Context(), maxForwardStreamQueued, stream.Recv,
		func(req *clusterpb.ForwardAppendRequest) queued {
			q := queued{n: len(req.Ops), err: p.checkForward(req.Ops)}
			if q.err == nil {
				q.wait = s.leaderB.Enqueue(req.Ops)
			}
			return q
		},
		func(ctx context.Context, q queued) error {
			var res []fsm.Result
			if q.err != nil {
				res = make([]fsm.Result, q.n)
				for i := range res {
					res[i].Err = q.err
				}
			} else {
				res = s.withStatus(q.wait(ctx))
			}
			return stream.Send(&clusterpb.ForwardAppendResponse{Results: resultsToProto(res)})
		})
}

// checkForward refuses a forwarded batch this member cannot queue: it is
// not the leader, the batch is too large, or an op is invalid (the
// follower checked them already; this one checks again).
func (p *peerService) checkForward(ops []*fsmpb.AppendOp) error {
	s := p.s
	if s.raft.State() != raft.Leader {
		return s.statusErr(codes.Unavailable, ReasonNotLeader, "forwarded append reached a member that is not the leader")
	}
	if len(ops) > s.cfg.MaxEventsPerRequest*16 {
		return status.Errorf(codes.ResourceExhausted, "forward: %d ops in one batch", len(ops))
	}
	for _, op := range ops {
		if err := s.validateAppend(&pb.AppendRequest{ClientId: op.ClientId, RequestSeq: op.RequestSeq, AckedSeq: op.AckedSeq, SessionEstablished: op.SessionEstablished, Events: toEvents(op.Events)}); err != nil {
			return err
		}
	}
	return nil
}

func (p *peerService) CheckpointDigest(ctx context.Context, req *clusterpb.CheckpointDigestRequest) (*clusterpb.CheckpointDigestResponse, error) {
	s := p.s
	if err := s.fsm.WaitApplied(ctx, req.Index); err != nil {
		return nil, s.toStatus(err)
	}
	d, ok, err := s.fsm.CheckpointDigest(ctx, req.Index)
	if err != nil {
		return nil, checkpointStatus(err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no checkpoint recorded at index %d (restored from a later snapshot?)", req.Index)
	}
	return &clusterpb.CheckpointDigestResponse{Digest: d[:]}, nil
}
