package coordserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

const (
	healthServing    = healthpb.HealthCheckResponse_SERVING
	healthNotServing = healthpb.HealthCheckResponse_NOT_SERVING
)

// leaderOnly lists the unary methods a follower forwards to the leader as
// they are, each with a constructor of its reply. Appends are forwarded in
// batches by the forward batcher instead, and journal reads use ReadIndex.
// Every Namespace and NodeLink method is answered by the leader (writes
// propose; reads and node reports use the leader's soft state).
var leaderOnly = map[string]func() any{
	pb.Cluster_AddVoter_FullMethodName:                 func() any { return &pb.MembershipResponse{} },
	pb.Cluster_AddNonvoter_FullMethodName:              func() any { return &pb.MembershipResponse{} },
	pb.Cluster_RemoveServer_FullMethodName:             func() any { return &pb.MembershipResponse{} },
	pb.Cluster_TransferLeadership_FullMethodName:       func() any { return &pb.TransferLeadershipResponse{} },
	pb.Cluster_Verify_FullMethodName:                   func() any { return &pb.VerifyResponse{} },
	pb.Journal_RegisterConsumer_FullMethodName:         func() any { return &pb.ConsumerResponse{} },
	pb.Journal_AckConsumer_FullMethodName:              func() any { return &pb.ConsumerResponse{} },
	pb.Journal_RemoveConsumer_FullMethodName:           func() any { return &pb.ConsumerResponse{} },
	pb.Journal_Trim_FullMethodName:                     func() any { return &pb.TrimResponse{} },
	pb.Journal_Reset_FullMethodName:                    func() any { return &pb.ResetResponse{} },
	pb.Journal_SetPaused_FullMethodName:                func() any { return &pb.SetPausedResponse{} },
	pb.Journal_SetConfig_FullMethodName:                func() any { return &pb.JournalConfigResponse{} },
	pb.Journal_Import_FullMethodName:                   func() any { return &pb.ImportResponse{} },
	pb.Journal_OpenSession_FullMethodName:              func() any { return &pb.OpenSessionResponse{} },
	pb.Journal_CloseSession_FullMethodName:             func() any { return &pb.CloseSessionResponse{} },
	pb.Namespace_Create_FullMethodName:                 func() any { return &pb.FileOpResponse{} },
	pb.Namespace_AddBlock_FullMethodName:               func() any { return &pb.FileOpResponse{} },
	pb.Namespace_Complete_FullMethodName:               func() any { return &pb.FileOpResponse{} },
	pb.Namespace_Append_FullMethodName:                 func() any { return &pb.FileOpResponse{} },
	pb.Namespace_Delete_FullMethodName:                 func() any { return &pb.FileOpResponse{} },
	pb.Namespace_AbandonBlock_FullMethodName:           func() any { return &pb.FileOpResponse{} },
	pb.Namespace_UpdateBlockForPipeline_FullMethodName: func() any { return &pb.FileOpResponse{} },
	pb.Namespace_UpdatePipeline_FullMethodName:         func() any { return &pb.FileOpResponse{} },
	pb.Namespace_Stat_FullMethodName:                   func() any { return &pb.StatResponse{} },
	pb.Namespace_List_FullMethodName:                   func() any { return &pb.ListResponse{} },
	pb.Namespace_RecoverLease_FullMethodName:           func() any { return &pb.RecoverLeaseResponse{} },
	pb.Namespace_RenewLease_FullMethodName:             func() any { return &pb.RenewLeaseResponse{} },
	pb.Namespace_ListNodes_FullMethodName:              func() any { return &pb.ListNodesResponse{} },
	pb.Namespace_ReportBadBlocks_FullMethodName:        func() any { return &pb.ReportBadBlocksResponse{} },
	pb.Namespace_GetAdditionalNode_FullMethodName:      func() any { return &pb.GetAdditionalNodeResponse{} },
	pb.Namespace_AddCacheDirective_FullMethodName:      func() any { return &pb.CacheDirectiveResponse{} },
	pb.Namespace_RemoveCacheDirective_FullMethodName:   func() any { return &pb.CacheDirectiveResponse{} },
	pb.Namespace_ListCacheDirectives_FullMethodName:    func() any { return &pb.ListCacheDirectivesResponse{} },
	pb.NodeLink_ReportBadBlocks_FullMethodName:         func() any { return &pb.ReportBadBlocksResponse{} },
	pb.NodeLink_Register_FullMethodName:                func() any { return &pb.NodeRegisterResponse{} },
	pb.NodeLink_Heartbeat_FullMethodName:               func() any { return &pb.NodeHeartbeatResponse{} },
	pb.NodeLink_BlockReport_FullMethodName:             func() any { return &pb.NodeReportResponse{} },
	pb.NodeLink_IncrementalReport_FullMethodName:       func() any { return &pb.NodeReportResponse{} },
	pb.NodeLink_CommitBlockSynchronization_FullMethodName: func() any {
		return &pb.CommitBlockSyncResponse{}
	},
}

func (s *Server) checkClusterID(ctx context.Context, method string) error {
	// ValueFromIncomingContext reads one key without copying the whole
	// metadata map (this runs on every call).
	ids := metadata.ValueFromIncomingContext(ctx, MDClusterID)
	peer := strings.HasPrefix(method, "/"+pb.Peer_ServiceDesc.ServiceName+"/")
	if len(ids) == 0 {
		if peer {
			return s.statusErr(codes.FailedPrecondition, ReasonClusterID, "member call without a cluster id")
		}
		return nil // clients may omit it
	}
	if ids[0] != s.cfg.ClusterID {
		s.log.Warn("refused a call from another cluster", "method", method, "got-cluster-id", ids[0])
		return s.statusErr(codes.FailedPrecondition, ReasonClusterID, fmt.Sprintf("caller belongs to cluster %q, this is %q", ids[0], s.cfg.ClusterID))
	}
	return nil
}

// unaryInterceptor is every unary call's path through the server: it is
// timed and counted, refused if it comes from another cluster, and
// forwarded to the leader if only the leader answers it. One interceptor
// rather than a chain of three: grpc-go's chain builds a closure per link
// per call, on every append.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := s.checkedUnary(ctx, req, info, handler)
	s.metrics.rpc.Observe(info.FullMethod, start, err)
	return resp, err
}

func (s *Server) checkedUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.checkClusterID(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return s.forwardOrHandle(ctx, req, info, handler)
}

func (s *Server) clusterIDStreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.checkClusterID(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// forwardOrHandle proxies leader-only calls from a follower to the
// leader with the caller's deadline; a call forwarded once is never
// forwarded again. Other calls are handled here.
func (s *Server) forwardOrHandle(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	newOut, ok := leaderOnly[info.FullMethod]
	if !ok || s.raft.State() == raft.Leader {
		return handler(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(mdForwarded)) > 0 {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "forwarded call reached a member that is not the leader")
	}
	id, addr, err := s.waitLeader(ctx)
	if err != nil {
		return nil, err
	}
	if id == s.cfg.ID {
		return handler(ctx, req)
	}
	conn, err := s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	out := newOut()
	fctx := metadata.AppendToOutgoingContext(ctx, mdForwarded, s.cfg.ID)
	if err := conn.Invoke(fctx, info.FullMethod, req, out); err != nil {
		return nil, err
	}
	return out, nil
}
