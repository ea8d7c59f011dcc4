package coordserver

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxStreamInFlight bounds the requests one AppendStream keeps in flight;
// past it the server stops reading (gRPC flow control pushes back).
const maxStreamInFlight = 4096

type streamed struct {
	seq  uint64
	wait func(context.Context) []fsm.Result
	err  error
}

// AppendStream reads requests in order, hands each to the leader batcher
// at once (so one stream keeps many in flight and they share entries) and
// answers them in request order as they become safe. A bad or failed
// request is answered with its code; the stream goes on.
func (j *journalService) AppendStream(stream pb.Journal_AppendStreamServer) error {
	s := j.s
	if s.raft.State() != raft.Leader {
		return s.statusErr(codes.Unavailable, ReasonNotLeader, "append streams go to the leader")
	}
	ctx := stream.Context()
	pending := make(chan streamed, maxStreamInFlight)
	sent := make(chan error, 1)
	go func() {
		var sendErr error
		for p := range pending {
			if sendErr != nil {
				continue // drain: the reader stops when Recv fails
			}
			resp := &pb.AppendStreamResponse{RequestSeq: p.seq}
			err := p.err
			if err == nil {
				r := p.wait(ctx)[0]
				err = r.Err
				resp.FirstSeq, resp.Count, resp.Index = r.FirstSeq, r.Count, r.Index
			}
			if err != nil {
				st := status.Convert(s.toStatus(err))
				resp.Code, resp.Message, resp.Reason = uint32(st.Code()), st.Message(), infoReason(st)
				resp.FirstSeq, resp.Count, resp.Index = 0, 0, 0
			}
			sendErr = stream.Send(resp)
		}
		sent <- sendErr
	}()
	var recvErr error
	for {
		req, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		p := streamed{seq: req.RequestSeq, err: s.validateAppend(req)}
		switch {
		case p.err != nil:
		case s.raft.State() != raft.Leader:
			p.err = s.statusErr(codes.Unavailable, ReasonNotLeader, "leadership moved while streaming")
		default:
			p.wait = s.leaderB.Enqueue([]*pb.AppendOp{toOp(req)})
		}
		pending <- p
	}
	close(pending)
	sendErr := <-sent
	if recvErr != nil {
		return recvErr
	}
	return sendErr
}
