package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// Positions are the journal positions as one member sees them.
type Positions struct {
	WritePos, SafePos, ExpirePos, TrimmedPos uint64
	EventCount, SegmentCount, AppliedIndex   uint64
	MemberID, Warning                        string
	// Paused: the answering member is the leader and its submit path is
	// paused.
	Paused bool
	// LogFormat is the replicated log format (Raft entry envelope version).
	LogFormat uint32
}

// Positions returns the journal positions as the leader sees them (its
// write_pos includes events in flight; its safe_pos covers every
// acknowledged append). Any member answers PositionsRequest for itself too.
func (j *Journal) Positions(ctx context.Context) (Positions, error) {
	var r *pb.PositionsResponse
	err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).Positions(ctx, &pb.PositionsRequest{})
		return err
	})
	if err != nil {
		return Positions{}, err
	}
	return Positions{WritePos: r.WritePos, SafePos: r.SafePos, ExpirePos: r.ExpirePos, TrimmedPos: r.TrimmedPos,
		EventCount: r.EventCount, SegmentCount: r.SegmentCount, AppliedIndex: r.AppliedIndex, MemberID: r.MemberId, Warning: r.Warning, Paused: r.Paused, LogFormat: r.LogFormat}, nil
}

// Segment is one retained journal segment.
type Segment struct {
	ID                    uint64
	FirstSeq, LastSeq     uint64
	Events, Bytes         uint64
	FirstIndex, LastIndex uint64
	// State is "open", "sealed", "expiring" (every consumer acked past
	// it, waiting for a snapshot to cover it) or "expired".
	State string
}

// Segments lists the retained segments, oldest first, as the leader sees
// them.
func (j *Journal) Segments(ctx context.Context) ([]Segment, error) {
	var r *pb.SegmentsResponse
	err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).Segments(ctx, &pb.SegmentsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Segment, 0, len(r.GetSegments()))
	for _, sg := range r.GetSegments() {
		out = append(out, Segment{ID: sg.GetId(), FirstSeq: sg.GetFirstSeq(), LastSeq: sg.GetLastSeq(), Events: sg.GetEvents(),
			Bytes: sg.GetBytes(), FirstIndex: sg.GetFirstIndex(), LastIndex: sg.GetLastIndex(), State: sg.GetState()})
	}
	return out, nil
}

// Trim drops expired segments that end below to (0: as far as allowed) and
// returns the new trimmed_pos.
func (j *Journal) Trim(ctx context.Context, to uint64) (trimmedPos, segments uint64, err error) {
	var r *pb.TrimResponse
	err = j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).Trim(ctx, &pb.TrimRequest{To: to})
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return r.TrimmedPos, r.SegmentsTrimmed, nil
}

// Reset drops every retained event; seqs continue after the old end.
// confirm must be true.
func (j *Journal) Reset(ctx context.Context, confirm bool) (trimmedPos uint64, err error) {
	var r *pb.ResetResponse
	err = j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).Reset(ctx, &pb.ResetRequest{Confirm: confirm})
		return err
	})
	if err != nil {
		return 0, err
	}
	return r.TrimmedPos, nil
}

// Consumers is the durable consumer API: a registered consumer holds back
// trim until it acknowledges past a segment.
type Consumers struct{ c *Client }

// Consumers returns the consumer API.
func (j *Journal) Consumers() *Consumers { return &Consumers{c: j.c} }

// Consumer is a durable consumer with its position.
type Consumer struct {
	Name string
	// AckedSeq: the consumer has consumed every event up to it.
	AckedSeq uint64
	// Lag is the safe pos minus AckedSeq.
	Lag uint64
}

func toConsumer(c *pb.ConsumerInfo) Consumer {
	return Consumer{Name: c.GetName(), AckedSeq: c.GetAckedSeq(), Lag: c.GetLag()}
}

func (cs *Consumers) op(ctx context.Context, fn func(context.Context, pb.JournalClient) (*pb.ConsumerResponse, error)) (Consumer, error) {
	var r *pb.ConsumerResponse
	err := cs.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = fn(ctx, pb.NewJournalClient(cc))
		return err
	})
	if err != nil {
		return Consumer{}, err
	}
	return toConsumer(r.GetConsumer()), nil
}

// Register adds a consumer that has consumed everything below from (0:
// everything up to the current safe_pos).
func (cs *Consumers) Register(ctx context.Context, name string, from uint64) (Consumer, error) {
	return cs.op(ctx, func(ctx context.Context, c pb.JournalClient) (*pb.ConsumerResponse, error) {
		return c.RegisterConsumer(ctx, &pb.RegisterConsumerRequest{Name: name, From: from})
	})
}

// Ack records that the consumer has consumed everything up to seq.
func (cs *Consumers) Ack(ctx context.Context, name string, seq uint64) (Consumer, error) {
	return cs.op(ctx, func(ctx context.Context, c pb.JournalClient) (*pb.ConsumerResponse, error) {
		return c.AckConsumer(ctx, &pb.AckConsumerRequest{Name: name, Seq: seq})
	})
}

// Remove drops a consumer.
func (cs *Consumers) Remove(ctx context.Context, name string) error {
	_, err := cs.op(ctx, func(ctx context.Context, c pb.JournalClient) (*pb.ConsumerResponse, error) {
		return c.RemoveConsumer(ctx, &pb.RemoveConsumerRequest{Name: name})
	})
	return err
}

// List returns every consumer with its acked seq and lag.
func (cs *Consumers) List(ctx context.Context) ([]Consumer, error) {
	var r *pb.ListConsumersResponse
	err := cs.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).ListConsumers(ctx, &pb.ListConsumersRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Consumer, 0, len(r.GetConsumers()))
	for _, c := range r.GetConsumers() {
		out = append(out, toConsumer(c))
	}
	return out, nil
}

// Tail follows the journal from seq from: fn gets every event in order,
// exactly once, across leader changes and member failures (the stream is
// reopened at the next seq on another member). It returns when ctx ends,
// fn returns an error, or the position was trimmed (ErrOutOfRange).
func (j *Journal) Tail(ctx context.Context, from uint64, fn func(StoredEvent) error) error {
	if from == 0 {
		from = 1
	}
	next := from
	for {
		err := j.c.do(ctx, false, func(actx context.Context, cc *grpc.ClientConn) error {
			// The attempt timeout bounds opening the stream, not following
			// it. The stream ends with the attempt, whatever ends that (a
			// callback error, a gap): left open, the member would go on
			// serving a stream no one reads until ctx ended.
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := pb.NewJournalClient(cc).Tail(sctx, &pb.TailRequest{From: next, MaxBytes: j.c.replyBytes()})
			if err != nil {
				return err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				for _, e := range resp.Events {
					if e.Seq < next {
						continue // already delivered (a reopened stream)
					}
					if e.Seq > next {
						return &callbackError{fmt.Errorf("logbook: tail gap: got seq %d, want %d", e.Seq, next)}
					}
					if err := fn(StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientID: e.ClientId, RequestSeq: e.RequestSeq, Index: e.Index}); err != nil {
						return &callbackError{err}
					}
					next++
				}
			}
		})
		var cb *callbackError
		switch {
		case errors.As(err, &cb):
			return cb.err
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

type callbackError struct{ err error }

func (c *callbackError) Error() string { return c.err.Error() }

// SetPaused pauses or resumes the leader's submit path (appends wait, in
// order, while paused; a new leader starts unpaused).
func (j *Journal) SetPaused(ctx context.Context, paused bool) error {
	return j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewJournalClient(cc).SetPaused(ctx, &pb.SetPausedRequest{Paused: paused})
		return err
	})
}

// ImportChunk sends one chunk of exported events (see coord journal
// import); it returns the journal's next seq.
func (j *Journal) ImportChunk(ctx context.Context, events []StoredEvent, first, force bool, sourceClusterID string) (uint64, error) {
	req := &pb.ImportRequest{FirstChunk: first, Force: force, SourceClusterId: sourceClusterID, Events: make([]*pb.StoredEvent, len(events))}
	for i, e := range events {
		req.Events[i] = &pb.StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientId: e.ClientID, RequestSeq: e.RequestSeq, Index: e.Index}
	}
	var r *pb.ImportResponse
	err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).Import(ctx, req)
		return err
	})
	if err != nil {
		return 0, err
	}
	return r.NextSeq, nil
}

// JournalConfig is the journal settings the cluster replicates, as one
// member has applied them.
type JournalConfig struct {
	EventsPerSegment, SegmentBytes uint64
	SessionIdleTimeout             time.Duration
	// MaxSegments and MaxEvents are the automatic trim bounds (0: none),
	// part of the cluster's settings from log format 11 on (0 before: each
	// leader trims by its own flags).
	MaxSegments, MaxEvents uint64
	// Held: the cluster holds these settings (log format 11); only
	// SetConfig changes them. Before, each leader replicates its flags'.
	Held bool
	// MaxEventBytes and MaxRequestBytes are the answering member's own
	// size caps (coord serve --max-event-bytes; 0: a build before them).
	MaxEventBytes, MaxRequestBytes int
	LogFormat                      uint32
	AppliedIndex                   uint64
	MemberID                       string
}

// JournalSettings is a change of the journal settings: nil fields keep
// their values.
type JournalSettings struct {
	EventsPerSegment, SegmentBytes *uint64
	// SessionIdleTimeout: whole seconds, at most 30 days; 0 expires
	// sessions only beyond the session bound.
	SessionIdleTimeout     *time.Duration
	MaxSegments, MaxEvents *uint64
}

func journalConfigOf(r *pb.JournalConfigResponse) JournalConfig {
	c := r.GetConfig()
	return JournalConfig{
		EventsPerSegment: c.GetEventsPerSegment(), SegmentBytes: c.GetSegmentBytes(),
		SessionIdleTimeout: time.Duration(c.GetSessionIdleTimeoutSeconds()) * time.Second,
		MaxSegments:        c.GetMaxSegments(), MaxEvents: c.GetMaxEvents(), Held: c.GetHeld(),
		LogFormat: r.LogFormat, AppliedIndex: r.AppliedIndex, MemberID: r.MemberId,
		MaxEventBytes: int(min(r.GetMaxEventBytes(), 1<<40)), MaxRequestBytes: int(min(r.GetMaxRequestBytes(), 1<<40)),
	}
}

// Config returns the journal settings as the leader has applied them.
func (j *Journal) Config(ctx context.Context) (JournalConfig, error) {
	var r *pb.JournalConfigResponse
	err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).GetConfig(ctx, &pb.GetJournalConfigRequest{})
		return err
	})
	if err != nil {
		return JournalConfig{}, err
	}
	return journalConfigOf(r), nil
}

// SetConfig changes the journal settings the cluster holds (log format
// 11; FailedPrecondition LOG_FORMAT before) and returns them once the
// change is applied. Retrying it is harmless: it sets values.
func (j *Journal) SetConfig(ctx context.Context, s JournalSettings) (JournalConfig, error) {
	req := &pb.SetJournalConfigRequest{EventsPerSegment: s.EventsPerSegment, SegmentBytes: s.SegmentBytes, MaxSegments: s.MaxSegments, MaxEvents: s.MaxEvents}
	if d := s.SessionIdleTimeout; d != nil {
		if *d < 0 || *d%time.Second != 0 {
			return JournalConfig{}, fmt.Errorf("journal config: session idle timeout %s: want whole seconds >= 0", *d)
		}
		secs := uint64(*d / time.Second)
		req.SessionIdleTimeoutSeconds = &secs
	}
	var r *pb.JournalConfigResponse
	err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		r, err = pb.NewJournalClient(cc).SetConfig(ctx, req)
		return err
	})
	if err != nil {
		return JournalConfig{}, err
	}
	return journalConfigOf(r), nil
}
