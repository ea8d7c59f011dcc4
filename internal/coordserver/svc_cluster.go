package coordserver

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}

func (s *Server) localStatus() *clusterpb.LocalStatusResponse {
	_, lid := s.raft.LeaderWithID()
	lc := int64(0)
	if s.raft.State() != raft.Leader {
		if t := s.raft.LastContact(); t.IsZero() {
			lc = -1
		} else {
			lc = time.Since(t).Milliseconds()
		}
	}
	ls := &clusterpb.LocalStatusResponse{
		Id:            s.cfg.ID,
		RaftState:     s.raft.State().String(),
		Term:          s.raft.CurrentTerm(),
		CommitIndex:   s.raft.CommitIndex(),
		AppliedIndex:  s.fsm.AppliedIndex(),
		LastContactMs: lc,
		LeaderId:      string(lid),
		StartupReplay: s.startupReplay(time.Now()),
	}
	if w := s.configWarning(); w != "" {
		ls.Warnings = append(ls.Warnings, w)
	}
	if src := s.cfg.Security.TLS; src != nil {
		ls.TlsNotAfterUnix = src.NotAfter().Unix()
		if w := certWarning(s.cfg.ID, src.NotAfter(), time.Now()); w != "" {
			ls.Warnings = append(ls.Warnings, w)
		}
	}
	return ls
}

// Status is served by any member from its own view, plus one LocalStatus
// call to every other member for health: all at once, the whole fan-out
// bounded by statusProbeBudget (a member that did not answer in it is
// unreachable). With local_view no other member is asked.
func (c *clusterService) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	s := c.s
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.toStatus(err)
	}
	local := s.localStatus()
	lid, laddr := s.leaderHint()
	resp := &pb.StatusResponse{
		ClusterId: s.cfg.ClusterID, LeaderId: lid, LeaderGrpcAddr: laddr,
		Term: local.Term, CommitIndex: local.CommitIndex, AppliedIndex: local.AppliedIndex,
		ResponderId: s.cfg.ID,
	}
	s.fsm.View(func(st *fsm.State) { resp.Warnings = s.journalWarnings(st) })
	resp.Warnings = append(resp.Warnings, local.Warnings...)
	servers := f.Configuration().Servers
	resp.Members = make([]*pb.MemberStatus, len(servers))
	var ask []int // the members to probe, by index in servers
	for i, srv := range servers {
		ms := &pb.MemberStatus{Id: string(srv.ID), RaftAddr: string(srv.Address), Suffrage: suffrage(srv.Suffrage), Leader: string(srv.ID) == lid}
		var reg *fsmpb.Member
		s.fsm.View(func(st *fsm.State) { reg, _ = st.Member(string(srv.ID)) })
		if reg != nil {
			ms.GrpcAddr, ms.HttpAddr = reg.GrpcAddr, reg.HttpAddr
		} else {
			ms.GrpcAddr = s.memberGRPCAddr(ms.Id)
		}
		resp.Members[i] = ms
		switch {
		case ms.Id == s.cfg.ID:
			s.fillMember(ms, local)
		case req.GetLocalView():
			ms.LastContactMs, ms.Error = -1, "not probed"
		case ms.GrpcAddr == "":
			ms.LastContactMs, ms.Error = -1, "gRPC address not registered yet"
		default:
			ask = append(ask, i)
		}
	}
	peerWarnings := make([][]string, len(servers))
	probeAll(ctx, len(ask), statusProbeBudget, func(ctx context.Context, k int) {
		i := ask[k]
		ms := resp.Members[i]
		ls, err := s.probeMember(ctx, ms.GrpcAddr)
		if err != nil {
			ms.LastContactMs, ms.Error = -1, err.Error()
			return
		}
		s.fillMember(ms, ls)
		peerWarnings[i] = boundWarnings(ls.Warnings)
	})
	for _, w := range peerWarnings {
		resp.Warnings = append(resp.Warnings, w...)
	}
	return resp, nil
}

// A peer's warnings in a Status answer are bounded: at most
// maxPeerWarnings, each cut to maxWarningBytes.
const (
	maxPeerWarnings = 4
	maxWarningBytes = 1024
)

func boundWarnings(ws []string) []string {
	ws = ws[:min(len(ws), maxPeerWarnings)]
	out := make([]string, len(ws))
	for i, w := range ws {
		if len(w) > maxWarningBytes {
			w = strings.ToValidUTF8(w[:maxWarningBytes], "") + "…"
		}
		out[i] = w
	}
	return out
}

func (s *Server) fillMember(ms *pb.MemberStatus, ls *clusterpb.LocalStatusResponse) {
	ms.RaftState, ms.AppliedIndex, ms.LastContactMs, ms.StartupReplay = ls.RaftState, ls.AppliedIndex, ls.LastContactMs, ls.StartupReplay
	ms.TlsNotAfterUnix = ls.TlsNotAfterUnix
	ms.Term, ms.CommitIndex = ls.Term, ls.CommitIndex
	limit := (3 * s.cfg.Raft.HeartbeatTimeout).Milliseconds()
	ms.Healthy = ls.RaftState == raft.Leader.String() || (ls.LeaderId != "" && ls.LastContactMs >= 0 && ls.LastContactMs <= limit)
	if !ms.Healthy {
		ms.Error = "no recent contact with a leader"
	}
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	case raft.Staging:
		return "staging"
	}
	return strconv.Itoa(int(s))
}

func (s *Server) validateServer(id, addr string) error {
	if !ValidID(id) {
		return status.Errorf(codes.InvalidArgument, "member id %q: want 1-64 of [A-Za-z0-9._-]", id)
	}
	if addr != "" {
		if err := checkAddr(addr, ""); err != nil {
			return status.Errorf(codes.InvalidArgument, "raft address: %v", err)
		}
	}
	return nil
}

func (c *clusterService) addServer(req *pb.AddServerRequest, voter bool) (*pb.MembershipResponse, error) {
	s := c.s
	if err := s.validateServer(req.Id, req.RaftAddr); err != nil {
		return nil, err
	}
	if req.RaftAddr == "" {
		return nil, status.Error(codes.InvalidArgument, "raft address is required")
	}
	var f raft.IndexFuture
	if voter {
		f = s.raft.AddVoter(raft.ServerID(req.Id), raft.ServerAddress(req.RaftAddr), 0, s.cfg.ApplyTimeout)
	} else {
		f = s.raft.AddNonvoter(raft.ServerID(req.Id), raft.ServerAddress(req.RaftAddr), 0, s.cfg.ApplyTimeout)
	}
	if err := s.await(f); err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("member added", "member-id", req.Id, "raft-addr", req.RaftAddr, "voter", voter)
	return &pb.MembershipResponse{Index: f.Index()}, nil
}

func (c *clusterService) AddVoter(ctx context.Context, req *pb.AddServerRequest) (*pb.MembershipResponse, error) {
	return c.addServer(req, true)
}

func (c *clusterService) AddNonvoter(ctx context.Context, req *pb.AddServerRequest) (*pb.MembershipResponse, error) {
	return c.addServer(req, false)
}

func (c *clusterService) RemoveServer(ctx context.Context, req *pb.RemoveServerRequest) (*pb.MembershipResponse, error) {
	s := c.s
	if err := s.validateServer(req.Id, ""); err != nil {
		return nil, err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.toStatus(err)
	}
	found := false
	for _, srv := range f.Configuration().Servers {
		found = found || srv.ID == raft.ServerID(req.Id)
	}
	if !found {
		return nil, status.Errorf(codes.NotFound, "member %q is not in the configuration", req.Id)
	}
	rf := s.raft.RemoveServer(raft.ServerID(req.Id), 0, s.cfg.ApplyTimeout)
	if err := s.await(rf); err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("member removed", "member-id", req.Id)
	return &pb.MembershipResponse{Index: rf.Index()}, nil
}

func (c *clusterService) TransferLeadership(ctx context.Context, req *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	s := c.s
	var f raft.Future
	if req.Id == "" {
		f = s.raft.LeadershipTransfer()
	} else {
		if err := s.validateServer(req.Id, ""); err != nil {
			return nil, err
		}
		cf := s.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return nil, s.toStatus(err)
		}
		var addr raft.ServerAddress
		for _, srv := range cf.Configuration().Servers {
			if srv.ID == raft.ServerID(req.Id) && srv.Suffrage == raft.Voter {
				addr = srv.Address
			}
		}
		if addr == "" {
			return nil, status.Errorf(codes.NotFound, "voter %q is not in the configuration", req.Id)
		}
		if req.Id == s.cfg.ID {
			return nil, status.Error(codes.FailedPrecondition, "member is already the leader")
		}
		f = s.raft.LeadershipTransferToServer(raft.ServerID(req.Id), addr)
	}
	if err := s.await(f); err != nil {
		return nil, s.toStatus(err)
	}
	// The new leader is known once it sent its first heartbeat.
	deadline := time.Now().Add(s.cfg.NoLeaderHold)
	for time.Now().Before(deadline) {
		if _, id := s.raft.LeaderWithID(); id != "" && string(id) != s.cfg.ID {
			return &pb.TransferLeadershipResponse{LeaderId: string(id)}, nil
		}
		select {
		case <-ctx.Done():
			return nil, s.toStatus(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return &pb.TransferLeadershipResponse{}, nil
}

func (c *clusterService) Snapshot(ctx context.Context, _ *pb.SnapshotRequest) (*pb.SnapshotResponse, error) {
	s := c.s
	f := s.raft.Snapshot()
	if err := s.await(f); err != nil {
		return nil, s.toStatus(err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, s.toStatus(err)
	}
	rc.Close()
	return &pb.SnapshotResponse{Index: meta.Index, Term: meta.Term}, nil
}

// Verify replicates a checkpoint entry; every member records the digest of
// its state when it applies it, so the digests compare the members' states
// at exactly one index.
func (c *clusterService) Verify(ctx context.Context, _ *pb.VerifyRequest) (*pb.VerifyResponse, error) {
	s := c.s
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_CHECKPOINT, &fsmpb.CheckpointCommand{})
	if err != nil {
		return nil, err
	}
	cp := resp.(*fsm.Checkpoint)
	digest, err := cp.Wait(ctx)
	if err != nil {
		return nil, checkpointStatus(err)
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.toStatus(err)
	}
	servers := f.Configuration().Servers
	out := &pb.VerifyResponse{Index: cp.Index, Members: make([]*pb.MemberDigest, len(servers)), Consistent: true}
	var wg sync.WaitGroup
	for i, srv := range servers {
		md := &pb.MemberDigest{Id: string(srv.ID)}
		out.Members[i] = md
		if md.Id == s.cfg.ID {
			md.Digest = hex.EncodeToString(digest[:])
			continue
		}
		addr := s.memberGRPCAddr(md.Id)
		if addr == "" {
			md.Error = "gRPC address unknown"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err := s.peers.get(addr)
			var r *clusterpb.CheckpointDigestResponse
			if err == nil {
				// WaitForReady: a member that restarted moments ago is
				// answered once its connection is back, not refused from
				// the redial backoff.
				r, err = clusterpb.NewPeerClient(conn).CheckpointDigest(cctx, &clusterpb.CheckpointDigestRequest{Index: cp.Index}, grpc.WaitForReady(true))
			}
			if err != nil {
				md.Error = status.Convert(err).Message()
				return
			}
			md.Digest = hex.EncodeToString(r.Digest)
		}()
	}
	wg.Wait()
	for _, md := range out.Members {
		if md.Error != "" || md.Digest != out.Members[0].Digest {
			out.Consistent = false
		}
	}
	if !out.Consistent {
		s.log.Error("verify: members disagree or did not answer", "index", cp.Index, "members", out.Members)
	}
	return out, nil
}

// checkpointStatus is the status of a checkpoint digest that could not be
// waited for: the caller's deadline, or later checkpoints replaced it.
func checkpointStatus(err error) error {
	if errors.Is(err, fsm.ErrCheckpointExpired) {
		return status.Errorf(codes.Aborted, "verify: %v; retry", err)
	}
	return status.FromContextError(err).Err()
}

// ShutdownNode asks a registered storage node (by id or gRPC address) to
// shut down, with this
// member's certificate (nodes take that call from coordinators only).
func (c *clusterService) ShutdownNode(ctx context.Context, req *pb.ClusterShutdownNodeRequest) (*pb.ClusterShutdownNodeResponse, error) {
	s := c.s
	var addr string
	s.fsm.View(func(st *fsm.State) {
		for _, n := range st.Nodes() { // by id, or by its gRPC address
			if n.Id == req.GetNodeId() || n.GrpcAddr == req.GetNodeId() {
				addr = n.GrpcAddr
			}
		}
	})
	if addr == "" {
		return nil, s.fsErr(fmt.Errorf("%w: %q", fsm.ErrNodeNotFound, req.GetNodeId()))
	}
	conn, err := s.nodeCC.get(addr)
	if err != nil {
		return nil, err
	}
	if _, err := pb.NewDataNodeClient(conn).ShutdownNode(ctx, &pb.ShutdownNodeRequest{ForRestart: req.GetForRestart()}); err != nil {
		return nil, err
	}
	s.log.Info("asked a storage node to shut down", "node", req.GetNodeId(), "for-restart", req.GetForRestart(), "by", actorOf(ctx))
	return &pb.ClusterShutdownNodeResponse{GrpcAddr: addr}, nil
}
