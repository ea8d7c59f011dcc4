package client

import (
	"context"
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Size checks before sending: an event or request over the cluster's caps
// fails with the cap it broke, as the coordinator would answer, instead of
// a gRPC transport error ("message larger than max") naming neither.

const (
	// DefaultMaxEventBytes is a coordinator's default event payload cap
	// (coord serve --max-event-bytes).
	DefaultMaxEventBytes = 1 << 20
	// defaultMaxRequestBytes is a coordinator's default Append request
	// cap (at least its event cap).
	defaultMaxRequestBytes = 4 << 20
)

// Limits are a coordinator's size caps.
type Limits struct {
	// MaxEventBytes is the largest event payload it accepts.
	MaxEventBytes int
	// MaxRequestBytes is the largest Append request (encoded) it accepts.
	MaxRequestBytes int
}

// Limits returns the leader's size caps (0: the leader's build predates
// them). The client keeps the first answer.
func (j *Journal) Limits(ctx context.Context) (Limits, error) {
	if l := j.c.limits.Load(); l != nil {
		return *l, nil
	}
	cfg, err := j.Config(ctx)
	if err != nil {
		return Limits{}, err
	}
	l := Limits{MaxEventBytes: cfg.MaxEventBytes, MaxRequestBytes: cfg.MaxRequestBytes}
	j.c.limits.Store(&l)
	return l, nil
}

// checkAppendSize refuses an append request the cluster would refuse for
// its size, or this client could not send, before it is sent. Requests
// within the default caps go as they are (the coordinator checks them
// against its own); only a larger one costs a look-up of the caps, once
// per client.
func (j *Journal) checkAppendSize(ctx context.Context, events []*pb.Event) error {
	largest := 0
	for _, e := range events {
		largest = max(largest, len(e.Payload))
	}
	// The client's session fields add at most a few hundred bytes.
	size := proto.Size(&pb.AppendRequest{Events: events}) + 256
	if largest <= DefaultMaxEventBytes && size <= defaultMaxRequestBytes && size <= j.c.cfg.MaxMessageBytes {
		return nil
	}
	l, err := j.Limits(ctx)
	if err != nil {
		l = Limits{} // unknown: send, and let the coordinator answer if it can
	}
	if l.MaxEventBytes > 0 {
		for i, e := range events {
			if len(e.Payload) > l.MaxEventBytes {
				return &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf("append: event %d: payload of %d bytes exceeds the %d-byte cap (coord serve --max-event-bytes)", i, len(e.Payload), l.MaxEventBytes)}
			}
		}
	}
	if l.MaxRequestBytes > 0 && size > l.MaxRequestBytes {
		return &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf("append: request of about %d bytes exceeds the %d-byte cap; send its events in several appends", size, l.MaxRequestBytes)}
	}
	if size > j.c.cfg.MaxMessageBytes {
		return &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf("append: request of about %d bytes exceeds this client's %d-byte message limit (Config.MaxMessageBytes)", size, j.c.cfg.MaxMessageBytes)}
	}
	return nil
}

// replyBytes is the max_bytes a Read or Tail request asks for: the
// client's receive limit less a margin for the gRPC frame.
func (c *Client) replyBytes() uint32 {
	return uint32(min(max(c.cfg.MaxMessageBytes-1<<10, 1), 1<<31))
}
