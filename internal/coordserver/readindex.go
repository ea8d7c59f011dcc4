package coordserver

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

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
	if err := s.node.VerifyLeader(ctx); err != nil {
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

// leaderIndexLoop keeps a follower's view of the leader's read index
// fresh (ready), every 250 ms, in a loop of its own: a call waits up to a
// second for a leader that is reconnecting, which must not hold up
// watchLoop's membership checks.
func (s *Server) leaderIndexLoop() {
	s.every(250*time.Millisecond, func() bool {
		s.refreshLeaderIndex()
		return true
	})
}

// refreshLeaderIndex asks the leader for its read index (the ReadIndex of
// linearizable reads: its applied index, its leadership confirmed) and
// keeps the highest one seen (ready). Followers only; leaderIndexLoop is
// its only caller.
func (s *Server) refreshLeaderIndex() {
	if s.raft.State() != raft.Follower {
		return
	}
	id, addr := s.leaderHint()
	if id == "" || addr == "" || (s.cfg.leaderIndexBlocked != nil && s.cfg.leaderIndexBlocked()) {
		return
	}
	conn, err := s.peers.get(addr)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	resp, err := clusterpb.NewPeerClient(conn).ReadIndex(ctx, &clusterpb.ReadIndexRequest{}, grpc.WaitForReady(true))
	if err != nil {
		s.log.Debug("asking the leader for its read index failed", "leader", id, "err", err)
		return
	}
	if resp.Index > s.leaderIndex.Load() { // the only writer
		s.leaderIndex.Store(resp.Index)
	}
}

func (s *Server) leaderReady() bool {
	return s.raft.State() == raft.Leader && s.readyTerm.Load() == s.raft.CurrentTerm()
}
