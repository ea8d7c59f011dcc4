package coordserver

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/journal"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// waitLeader waits up to the no-leader hold for a leader with a reachable
// address. It returns the leader id and address, or an Unavailable status.
func (s *Server) waitLeader(ctx context.Context) (string, string, error) {
	deadline := time.Now().Add(s.cfg.NoLeaderHold)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, addr := s.leaderHint(); id != "" && addr != "" {
			return id, addr, nil
		}
		if time.Now().After(deadline) {
			return "", "", s.statusErr(codes.Unavailable, ReasonNoLeader, fmt.Sprintf("no leader elected within %s", s.cfg.NoLeaderHold))
		}
		select {
		case <-ctx.Done():
			return "", "", s.toStatus(ctx.Err())
		case <-tick.C:
		}
	}
}

// leaderSink applies batches to the local Raft log. Start is called in
// queue order, so batches enter the log in submission order.
type leaderSink struct{ s *Server }

func (l leaderSink) Start(ops []*fsmpb.AppendOp) func() ([]fsm.Result, error) {
	refused, err := l.s.overQuota(ops)
	if refused == nil {
		return l.start(ops)
	}
	// Over the retention quota: only the ops answered without an append
	// (retries of applied requests) go on; the others fail here, before
	// the log, so nothing of theirs is applied.
	var pass []*fsmpb.AppendOp
	var at []int
	for i, op := range ops {
		if !refused[i] {
			pass, at = append(pass, op), append(at, i)
		}
	}
	var wait func() ([]fsm.Result, error)
	if len(pass) > 0 {
		wait = l.start(pass)
	}
	return func() ([]fsm.Result, error) {
		out := make([]fsm.Result, len(ops))
		for i := range out {
			out[i].Err = err
		}
		if wait != nil {
			rs, werr := wait()
			for k, i := range at {
				switch {
				case werr != nil:
					out[i] = fsm.Result{Err: werr}
				case k < len(rs):
					out[i] = rs[k]
				default:
					out[i] = fsm.Result{Err: fmt.Errorf("coordserver: %d results for %d ops", len(rs), len(pass))}
				}
			}
		}
		return out, nil
	}
}

// overQuota returns nil while the sealed segments take less than the
// retention quota (Journal.MaxRetainedBytes; 0: none): counting only what
// trim can drop, a quota smaller than one segment still lets the open one
// seal, so trim has something to drop. At or past it, it marks
// the ops that would append new events, and returns the error they get:
// ResourceExhausted JOURNAL_FULL, naming the consumer that holds trim
// back. Ops the state machine answers without an append (a retry of an
// applied request gets its kept result) are not marked.
func (s *Server) overQuota(ops []*fsmpb.AppendOp) ([]bool, error) {
	quota := s.cfg.Journal.MaxRetainedBytes
	if quota == 0 {
		return nil, nil
	}
	var refused []bool
	var msg string
	s.fsm.View(func(st *fsm.State) {
		used := st.SealedBytes()
		if used < quota {
			return
		}
		refused = make([]bool, len(ops))
		for i, op := range ops {
			refused[i] = !st.Answered(op.ClientId, op.RequestSeq)
		}
		msg = fmt.Sprintf("append: the journal's sealed segments take %d bytes, at or over its retention quota of %d (--journal-max-retained-bytes)%s; new appends are refused until trim brings them under",
			used, quota, heldBackBy(st))
	})
	if refused == nil {
		return nil, nil
	}
	return refused, s.statusErr(codes.ResourceExhausted, pb.ReasonJournalFull, msg)
}

// heldBackBy says what keeps the oldest sealed segment, the next one
// trim would drop: the consumer furthest behind among those that have not
// acked it, or, once every consumer has, the snapshot that must cover it
// before the automatic trim (within a second) drops it.
func heldBackBy(st *fsm.State) string {
	segs := st.Segments()
	if len(segs) == 0 || !segs[0].Sealed {
		return ""
	}
	oldest := segs[0]
	var low *fsmpb.Consumer
	for _, c := range st.Consumers() {
		if c.AckedSeq < oldest.LastSeq && (low == nil || c.AckedSeq < low.AckedSeq) {
			low = c
		}
	}
	if low == nil {
		return fmt.Sprintf(": every consumer has acked the oldest segment (seqs %d..%d); the automatic trim drops it once a snapshot covers it", oldest.FirstSeq, oldest.LastSeq)
	}
	return fmt.Sprintf(": consumer %q acked seq %d of %d (ack or remove it: the automatic trim follows)", low.Name, low.AckedSeq, st.NextSeq()-1)
}

func (l leaderSink) start(ops []*fsmpb.AppendOp) func() ([]fsm.Result, error) {
	s := l.s
	started := time.Now()
	data, err := s.encodeAppend(ops)
	if err != nil {
		return func() ([]fsm.Result, error) { return nil, err }
	}
	events := 0
	for _, op := range ops {
		events += len(op.Events)
	}
	s.inflightEvents.Add(int64(events))
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	s.metrics.batchOps.Observe(float64(len(ops)))
	return func() ([]fsm.Result, error) {
		defer s.inflightEvents.Add(-int64(events))
		if err := s.await(f); err != nil {
			return nil, s.toStatus(err)
		}
		s.metrics.commitSeconds.Observe(time.Since(started).Seconds())
		switch r := f.Response().(type) {
		case []fsm.Result:
			return r, nil
		case error:
			return nil, s.toStatus(r)
		default:
			return nil, fmt.Errorf("coordserver: unexpected apply response %T", r)
		}
	}
}

func (s *Server) encodeAppend(ops []*fsmpb.AppendOp) ([]byte, error) {
	return s.encode(fsmpb.CommandType_COMMAND_TYPE_APPEND, &fsmpb.AppendCommand{Ops: ops})
}

// encode wraps a command in the envelope of the replicated log format,
// stamped with this member's wall clock and, from log format 10 on, the
// session clock (leaderClock).
func (s *Server) encode(t fsmpb.CommandType, m proto.Message) ([]byte, error) {
	f := s.logFormat()
	now := s.now()
	var clock int64
	if f >= fsm.LeaderClockFormat {
		clock = s.clock.stamp(s.raft.CurrentTerm(), s.fsm.SessionClock(), now)
	}
	return fsm.EncodeCommandAt(f, t, m, now.UnixNano(), clock)
}

// now is this member's clock: wall and monotonic readings.
func (s *Server) now() time.Time {
	if s.cfg.wallClock != nil {
		return s.cfg.wallClock()
	}
	return time.Now()
}

func (s *Server) pickLeaderSink(ctx context.Context) (journal.Sink, error) {
	if s.raft.State() != raft.Leader {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
	}
	return leaderSink{s}, nil
}

// localSink hands ops to the local leader batcher (leadership moved here
// between the handler's check and the batch). It queues them in Start, so
// batches keep their order with several in flight.
type localSink struct{ s *Server }

func (l localSink) Start(ops []*fsmpb.AppendOp) func() ([]fsm.Result, error) {
	wait := l.s.leaderB.Enqueue(ops)
	return func() ([]fsm.Result, error) {
		return l.s.withStatus(wait(l.s.ctx)), nil
	}
}

func (s *Server) pickForwardSink(ctx context.Context) (journal.Sink, error) {
	id, addr, err := s.waitLeader(ctx)
	if err != nil {
		return nil, err
	}
	if id == s.cfg.ID {
		return localSink{s}, nil
	}
	return forwardSink{f: s.fwd, id: id, addr: addr}, nil
}

// submitLocal submits ops, in order, to the leader batcher.
func (s *Server) submitLocal(ctx context.Context, ops []*fsmpb.AppendOp) []fsm.Result {
	return s.withStatus(s.leaderB.SubmitAll(ctx, ops))
}

// withStatus turns each result's error into the gRPC status a client
// gets, in place.
func (s *Server) withStatus(rs []fsm.Result) []fsm.Result {
	for i := range rs {
		rs[i].Err = s.toStatus(rs[i].Err)
	}
	return rs
}
