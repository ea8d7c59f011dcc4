package coordserver

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
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
	s := j.s // the stream interceptor refused it unless this is the leader (ROUTE_LEADER)
	return answerInOrder(stream.Context(), maxStreamInFlight, stream.Recv,
		func(req *pb.AppendRequest) streamed {
			p := streamed{seq: req.RequestSeq, err: s.validateAppend(req)}
			switch {
			case p.err != nil:
			case s.raft.State() != raft.Leader:
				p.err = s.statusErr(codes.Unavailable, ReasonNotLeader, "leadership moved while streaming")
			default:
				p.wait = s.leaderB.Enqueue([]*fsmpb.AppendOp{toOp(req)})
			}
			return p
		},
		func(ctx context.Context, p streamed) error {
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
			return stream.Send(resp)
		})
}

// answerInOrder serves a stream of requests answered in request order:
// it reads with recv until recv fails, hands each request to start (which
// queues it and must not wait for its outcome) and, on a second goroutine,
// answers them one after another with answer (which waits for the outcome
// and sends the reply). At most max requests wait for their answer; past
// that it stops reading and flow control pushes back on the sender. After
// a failed send the rest are not answered and reading stops. It returns
// recv's error (none for io.EOF), else the failed send's.
func answerInOrder[R, P any](ctx context.Context, max int, recv func() (R, error), start func(R) P, answer func(context.Context, P) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := make(chan P, max)
	sent := make(chan error, 1)
	go func() {
		var sendErr error
		for p := range pending {
			if sendErr != nil {
				continue // drain: the reader stops at ctx's end
			}
			if sendErr = answer(ctx, p); sendErr != nil {
				cancel()
			}
		}
		sent <- sendErr
	}()
	var recvErr error
	for ctx.Err() == nil {
		req, err := recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		select {
		case pending <- start(req):
		case <-ctx.Done():
		}
	}
	close(pending)
	sendErr := <-sent
	if recvErr != nil {
		return recvErr
	}
	return sendErr
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
	budget := replyBudget(req.MaxBytes)
	for {
		resp := &pb.TailResponse{}
		var err error
		applied := s.fsm.ViewWait(func(st *fsm.State) {
			if next < st.FirstSeq() {
				err = status.Errorf(codes.OutOfRange, "tail: seq %d is no longer retained; earliest is %d", next, st.FirstSeq())
				return
			}
			evs := st.Read(next, batch)
			n, _ := fitReply(evs, budget)
			resp.Events = apiEvents(evs[:n])
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
