package client

import (
	"context"
	"fmt"
	"math"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// Event is one journal event to append.
type Event struct {
	Type    string
	Payload []byte
}

// StoredEvent is an event read back with its assigned seq.
type StoredEvent struct {
	Seq        uint64
	Type       string
	Payload    []byte
	ClientID   string
	RequestSeq uint64
	// Index is the Raft index of the entry that carried the event.
	Index uint64
}

// Consistency selects how a read is served.
type Consistency int

const (
	// Linearizable (the default): the leader confirms its leadership and
	// the serving member has applied everything acknowledged before.
	Linearizable Consistency = iota
	// Stale: any member answers from its local state at once.
	Stale
)

// ReadInfo describes the state a read was served from, and where its
// reply ends.
type ReadInfo struct {
	AppliedIndex uint64
	// NextSeq is the seq the next event will get on that member.
	NextSeq uint64
	// End is why the reply ends where it does: unless ReadEndSafePos,
	// more events are readable from the seq after the last one returned.
	End ReadEnd
}

// ReadEnd says why a Read's reply ends where it does.
type ReadEnd int

const (
	// ReadEndSafePos: the reply reaches the serving member's safe pos
	// (NextSeq-1), or is empty because from is past it; nothing more to
	// read now.
	ReadEndSafePos ReadEnd = iota + 1
	// ReadEndMax: the reply holds max events, or the server's bound
	// (10,000 by default) if max was larger.
	ReadEndMax
	// ReadEndBytes: the next event would have taken the reply past the
	// reply size bound (4 MiB, or the client's MaxMessageBytes if lower).
	ReadEndBytes
)

func (e ReadEnd) String() string {
	switch e {
	case ReadEndSafePos:
		return "safe_pos"
	case ReadEndMax:
		return "max"
	case ReadEndBytes:
		return "bytes"
	}
	return fmt.Sprintf("ReadEnd(%d)", int(e))
}

// Journal is the journal API.
type Journal struct{ c *Client }

// Append journals events in one request and returns their seqs, in order,
// once they are safe (committed by a quorum and applied). Retries through
// leader changes are applied exactly once. An event over the cluster's
// payload cap (1 MiB by default), or a request over its request cap, fails
// with ErrInvalidArgument naming the cap, before it is sent.
func (j *Journal) Append(ctx context.Context, events ...Event) ([]uint64, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: append needs at least one event", ErrInvalidArgument)
	}
	pbEvents := make([]*pb.Event, len(events))
	for i, e := range events {
		pbEvents[i] = &pb.Event{Type: e.Type, Payload: e.Payload}
	}
	if err := j.checkAppendSize(ctx, pbEvents); err != nil {
		return nil, err
	}
	var resp *pb.AppendResponse
	err := j.c.session.run(ctx, func(t ticket) (bool, int, error) {
		req := &pb.AppendRequest{ClientId: t.id, RequestSeq: t.seq, AckedSeq: t.acked, SessionEstablished: t.established, Events: pbEvents}
		attempts := 0
		err := j.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
			attempts++
			var err error
			resp, err = pb.NewJournalClient(cc).Append(ctx, req)
			return err
		})
		return err == nil, attempts, err
	})
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, resp.Count)
	for i := range seqs {
		seqs[i] = resp.FirstSeq + uint64(i)
	}
	return seqs, nil
}

// ReadOption adjusts a read (Read, ReadRange).
type ReadOption func(*readOptions)

type readOptions struct {
	stale    bool
	endpoint string // "": the client's routing
	page     int    // ReadRange: events per Read (0: defaultPage)
	skipTrim bool   // ReadRange: go on past a trim
}

func (o readOptions) consistency() pb.Consistency {
	if o.stale {
		return pb.Consistency_CONSISTENCY_STALE
	}
	return pb.Consistency_CONSISTENCY_LINEARIZABLE
}

// WithConsistency selects linearizable (default) or stale reads.
func WithConsistency(c Consistency) ReadOption {
	return func(o *readOptions) { o.stale = c == Stale }
}

// AtEndpoint reads from the member at endpoint only, with stale
// consistency (for verifying what each member holds); the client neither
// retries elsewhere nor follows the leader.
func AtEndpoint(endpoint string) ReadOption {
	return func(o *readOptions) { o.endpoint, o.stale = endpoint, true }
}

func readOpts(opts []ReadOption) readOptions {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Read makes one Read call: it returns up to max events from seq from on
// (max 0: the server's default, 1000), and ReadInfo.End says why the reply
// ends where it does. A reply holds fewer than max events when it reaches
// the serving member's safe pos, the server's bound (10,000 events), or
// its size bound (4 MiB, or MaxMessageBytes if lower; at least one event).
// To read a range whatever its size, page on from the seq after the last
// event until End is ReadEndSafePos, or use ReadRange, which does. A seq
// no longer retained fails with ErrOutOfRange.
func (j *Journal) Read(ctx context.Context, from uint64, max int, opts ...ReadOption) ([]StoredEvent, ReadInfo, error) {
	if max < 0 {
		return nil, ReadInfo{}, fmt.Errorf("%w: max %d: want 0 (the server's default) or more", ErrInvalidArgument, max)
	}
	o := readOpts(opts)
	req := &pb.ReadRequest{From: from, Max: uint32(min(max, math.MaxUint32)), Consistency: o.consistency(), MaxBytes: j.c.replyBytes()}
	var resp *pb.ReadResponse
	if o.endpoint != "" {
		cc, err := j.c.conn(o.endpoint)
		if err != nil {
			return nil, ReadInfo{}, err
		}
		if resp, err = pb.NewJournalClient(cc).Read(ctx, req); err != nil {
			return nil, ReadInfo{}, fromStatus(err)
		}
	} else {
		err := j.c.do(ctx, !o.stale, func(ctx context.Context, cc *grpc.ClientConn) error {
			var err error
			resp, err = pb.NewJournalClient(cc).Read(ctx, req)
			return err
		})
		if err != nil {
			return nil, ReadInfo{}, err
		}
	}
	out, info := fromReadResponse(resp)
	return out, info, nil
}

// ReadAt reads from one specific endpoint with stale consistency (for
// verifying what each member holds): Read with AtEndpoint(endpoint).
func (j *Journal) ReadAt(ctx context.Context, endpoint string, from uint64, max int) ([]StoredEvent, ReadInfo, error) {
	return j.Read(ctx, from, max, AtEndpoint(endpoint))
}

func fromReadResponse(resp *pb.ReadResponse) ([]StoredEvent, ReadInfo) {
	out := make([]StoredEvent, len(resp.Events))
	for i, e := range resp.Events {
		out[i] = StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientID: e.ClientId, RequestSeq: e.RequestSeq, Index: e.Index}
	}
	info := ReadInfo{AppliedIndex: resp.AppliedIndex, NextSeq: resp.NextSeq, End: ReadEnd(resp.End)}
	if resp.End == pb.ReadEnd_READ_END_UNSPECIFIED || info.End > ReadEndBytes {
		// A server before ReadResponse.end: more if short of next_seq.
		info.End = ReadEndSafePos
		if n := len(out); n > 0 && out[n-1].Seq+1 < resp.NextSeq {
			info.End = ReadEndMax
		}
	}
	return out, info
}
