package coordserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/journal"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// leaderLoop owns leader-only setup. On gaining leadership it waits for a
// barrier (every earlier entry applied), then applies its own member record
// as the first command of the term; only then is it ready for linearizable
// reads (the read index is the leader's applied index: localReadIndex in
// journal_service.go, with the batched leadership check of readIndexer in
// peers.go).
func (s *Server) leaderLoop() {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(observer)
	defer s.raft.DeregisterObserver(observer)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var lastLeader raft.ServerID
	for {
		select {
		case <-s.ctx.Done():
			return
		case o := <-obs:
			if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != lastLeader {
				lastLeader = lo.LeaderID
				s.metrics.leaderChanges.Inc()
				s.log.Info("leader changed", "leader-id", string(lo.LeaderID), "term", s.raft.CurrentTerm())
				s.fwd.leaderChanged(string(lo.LeaderID))
			}
		case <-tick.C:
		}
		term := s.raft.CurrentTerm()
		if s.raft.State() != raft.Leader || s.readyTerm.Load() == term {
			continue
		}
		if err := s.await(s.raft.Barrier(s.cfg.ApplyTimeout)); err != nil {
			s.log.Warn("leader barrier failed", "term", term, "err", err)
			continue
		}
		if err := s.applyMember(&s.self); err != nil {
			s.log.Warn("leader self-registration failed", "term", term, "err", err)
			continue
		}
		s.readyTerm.Store(term)
		s.log.Info("leader ready", "term", term, "applied-index", s.fsm.AppliedIndex())
	}
}

func (s *Server) applyMember(m *fsmpb.Member) error {
	data, err := s.encode(fsmpb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &fsmpb.RegisterMemberCommand{Member: m})
	if err != nil {
		return err
	}
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	if err := s.await(f); err != nil {
		return err
	}
	if err, _ := f.Response().(error); err != nil {
		return err
	}
	return nil
}

// registerLoop keeps this member's addresses in the replicated registry, so
// that every member can reach every other's gRPC endpoint.
func (s *Server) registerLoop() {
	s.every(time.Second, s.registerSelf)
}

// registerSelf registers this member's addresses with the leader when the
// replicated registry lacks them or holds old ones.
func (s *Server) registerSelf() bool {
	var cur *fsmpb.Member
	s.fsm.View(func(st *fsm.State) { cur, _ = st.Member(s.cfg.ID) })
	if cur != nil && proto.Equal(cur, &s.self) {
		return true
	}
	if s.raft.State() == raft.Leader {
		return true // leaderLoop registers the leader
	}
	id, addr := s.leaderHint()
	if addr == "" || id == s.cfg.ID {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	conn, err := s.peers.get(addr)
	if err == nil {
		_, err = clusterpb.NewPeerClient(conn).RegisterMember(ctx, &clusterpb.RegisterMemberRequest{Member: &s.self})
	}
	cancel()
	if err != nil {
		s.log.Debug("member registration failed; will retry", "leader-id", id, "err", err)
	}
	return true
}

// every runs fn on each tick until fn returns false or the server stops.
func (s *Server) every(interval time.Duration, fn func() bool) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		if !fn() {
			return
		}
	}
}

// leaderEvery runs cycle every interval while this member is the ready
// leader and the replicated log format is at least format (the leader's
// monitors: leases, replication, cache).
func (s *Server) leaderEvery(interval time.Duration, format uint32, cycle func(now time.Time)) {
	s.every(interval, func() bool {
		if s.leaderReady() && s.logFormat() >= format {
			cycle(time.Now())
		}
		return true
	})
}

// watchLoop stops the server when Raft shut itself down because this member
// was removed, and keeps gossip meta and the readiness health in step.
func (s *Server) watchLoop() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	ready := false
	var scanned string
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		if s.raft.State() == raft.Shutdown && !s.closing.Load() {
			s.log.Error("raft shut down: this member was removed from the cluster")
			s.fatal(ErrRemoved)
			return
		}
		if removed := s.checkMembership(&scanned); removed {
			s.log.Error("this member was removed from the cluster configuration; stopping")
			s.fatal(ErrRemoved)
			return
		}
		if !s.bootstrapd.Load() && s.raft.LastIndex() > 0 {
			s.markBootstrapped()
		}
		if r := s.ready() == nil; r != ready {
			ready = r
			st := healthNotServing
			if r {
				st = healthServing
			}
			s.health.SetServingStatus(ReadyService, st)
		}
	}
}

// checkMembership reports whether this member was removed from the
// configuration. Raft shuts down a removed leader itself but not a removed
// follower, so the server stops it here. The log is scanned only when the
// latest configuration lacks this member and changed since the last scan.
func (s *Server) checkMembership(lastScanned *string) bool {
	f := s.raft.GetConfiguration()
	if f.Error() != nil || len(f.Configuration().Servers) == 0 {
		return false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(s.cfg.ID) {
			return false
		}
	}
	key := fmt.Sprint(f.Configuration().Servers)
	if key == *lastScanned {
		return false
	}
	*lastScanned = key
	removed, err := removedFromLog(raft.ServerID(s.cfg.ID), s.store, s.snaps)
	if err != nil {
		s.log.Warn("cannot read the configuration history", "err", err)
		return false
	}
	return removed
}

func (s *Server) markBootstrapped() {
	s.bootstrapd.Store(true)
	if err := s.members.UpdateMeta(func(m *membership.Meta) { m.Bootstrapped = true }); err != nil {
		s.log.Warn("gossip meta update failed", "err", err)
	}
}

// bootstrap forms a new cluster when this member has no Raft state: with a
// static peer list the lowest id bootstraps at once; with bootstrap-expect a
// background loop waits until enough coordinators see each other.
func (s *Server) bootstrap() error {
	if s.bootstrapd.Load() {
		return nil
	}
	switch {
	case len(s.cfg.Peers) > 0:
		lowest := s.cfg.Peers[0].ID
		var servers []raft.Server
		for _, p := range s.cfg.Peers {
			if p.ID < lowest {
				lowest = p.ID
			}
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		if lowest != s.cfg.ID {
			return nil
		}
		return s.bootstrapWith(servers)
	case s.cfg.BootstrapExpect > 0:
		s.goLoop(s.bootstrapExpectLoop)
	}
	return nil
}

func (s *Server) bootstrapWith(servers []raft.Server) error {
	err := s.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		s.log.Info("not bootstrapping: this member already has Raft state")
	case err != nil:
		return fmt.Errorf("coordserver: bootstrap: %w", err)
	default:
		s.formed.Store(true)
		s.log.Info("bootstrapped a new cluster", "voters", len(servers))
	}
	s.markBootstrapped()
	return nil
}

func (s *Server) bootstrapExpectLoop() {
	s.every(200*time.Millisecond, s.tryBootstrapExpect)
}

// tryBootstrapExpect bootstraps once enough coordinators see each other; it
// returns false when there is nothing left to do.
func (s *Server) tryBootstrapExpect() bool {
	if s.bootstrapd.Load() || s.raft.LastIndex() > 0 {
		return false // another member bootstrapped and reached us
	}
	var seen []membership.Meta
	for _, m := range s.members.Members() {
		seen = append(seen, m.Meta)
	}
	ok, servers, err := membership.BootstrapDecision(s.cfg.ID, s.cfg.BootstrapExpect, seen)
	if err != nil {
		s.log.Error("cannot bootstrap", "err", err)
		return true
	}
	if !ok {
		return true
	}
	var rs []raft.Server
	for _, srv := range servers {
		rs = append(rs, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(srv.ID), Address: raft.ServerAddress(srv.RaftAddr)})
	}
	if err := s.bootstrapWith(rs); err != nil {
		s.log.Error("bootstrap failed", "err", err)
		return true
	}
	return false
}

// leaderHint returns the current leader's id and gRPC address, if known.
func (s *Server) leaderHint() (id, grpcAddr string) {
	_, lid := s.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	id = string(lid)
	return id, s.memberGRPCAddr(id)
}

// memberGRPCAddr finds a coordinator's gRPC address: its replicated
// registration, else what it gossips (a member that joined moments ago).
func (s *Server) memberGRPCAddr(id string) string {
	if id == s.cfg.ID {
		return s.self.GrpcAddr
	}
	var m *fsmpb.Member
	s.fsm.View(func(st *fsm.State) { m, _ = st.Member(id) })
	if m != nil {
		return m.GrpcAddr
	}
	for _, gm := range s.members.Members() {
		if gm.Meta.ID == id && gm.Meta.Role == membership.RoleCoordinator {
			return gm.Meta.GRPCAddr
		}
	}
	return ""
}

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

// needFormat refuses, with FailedPrecondition LOG_FORMAT, what the
// replicated log format does not carry yet (a voter on an older build
// would halt on it): what is what needs it, e.g. "opening a session needs".
func (s *Server) needFormat(min uint32, what string) error {
	if f := s.logFormat(); f < min {
		return s.statusErr(codes.FailedPrecondition, ReasonLogFormat,
			fmt.Sprintf("%s log format %d, the cluster is at %d (every voter must be upgraded)", what, min, f))
	}
	return nil
}

// maxLogFormat is the newest log format a member with config cfg reads.
func maxLogFormat(cfg Config) uint32 {
	if cfg.maxLogFormat != 0 {
		return cfg.maxLogFormat
	}
	return fsm.CommandVersion
}

// logFormat is the format this member writes: the replicated one (never
// above what this build reads; the FSM halts before that could happen).
func (s *Server) logFormat() uint32 {
	var v uint32
	s.fsm.View(func(st *fsm.State) { v = st.LogFormat() })
	return min(v, maxLogFormat(s.cfg))
}

// upgradeLogFormat is the leader's half of the format upgrade: once every
// voter has registered a build that reads a newer format than the
// replicated one, it proposes SET_FORMAT with the newest format all of them
// read. Entries after it use that format; older entries and snapshots stay
// readable, and the next snapshot is written in the current encoding.
func (s *Server) upgradeLogFormat() {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	target := maxLogFormat(s.cfg)
	var cur uint32
	s.fsm.View(func(st *fsm.State) {
		cur = st.LogFormat()
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage != raft.Voter {
				continue
			}
			m, ok := st.Member(string(srv.ID))
			if !ok {
				target = 0 // not registered yet: wait
				return
			}
			target = min(target, max(m.MaxLogFormat, fsm.MinCommandVersion))
		}
	})
	if target <= cur {
		return
	}
	if _, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_SET_FORMAT, &fsmpb.SetFormatCommand{Version: target}); err != nil {
		s.log.Warn("raising the log format failed", "from", cur, "to", target, "err", err)
		return
	}
	s.log.Info("log format raised", "from", cur, "to", target)
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

func (s *Server) isLeader() bool { return s.raft.State() == raft.Leader }
