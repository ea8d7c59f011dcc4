package coordserver

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/protobuf/proto"
)

// leaderLoop owns leader-only setup. On gaining leadership it waits for a
// barrier (every earlier entry applied), then applies its own member record
// as the first command of the term; only then is it ready for linearizable
// reads (the read index is the leader's applied index: localReadIndex in
// readindex.go, with the batched leadership check of
// raftnode.Node.VerifyLeader).
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
	removed, err := s.node.Removed()
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
	formed, err := s.node.Bootstrap(servers)
	switch {
	case err != nil:
		return fmt.Errorf("coordserver: %w", err)
	case !formed:
		s.log.Info("not bootstrapping: this member already has Raft state")
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

func (s *Server) isLeader() bool { return s.raft.State() == raft.Leader }
