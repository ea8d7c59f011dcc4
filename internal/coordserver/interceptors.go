package coordserver

import (
	"context"
	"fmt"
	"strings"

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
// they are. Appends are forwarded in batches by the forward batcher instead,
// and reads use ReadIndex.
var leaderOnly = map[string]bool{
	pb.Cluster_AddVoter_FullMethodName:           true,
	pb.Cluster_AddNonvoter_FullMethodName:        true,
	pb.Cluster_RemoveServer_FullMethodName:       true,
	pb.Cluster_TransferLeadership_FullMethodName: true,
	pb.Journal_RegisterConsumer_FullMethodName:   true,
	pb.Journal_AckConsumer_FullMethodName:        true,
	pb.Journal_RemoveConsumer_FullMethodName:     true,
	pb.Journal_Trim_FullMethodName:               true,
	pb.Journal_Reset_FullMethodName:              true,
	pb.Journal_SetPaused_FullMethodName:          true,
	pb.Journal_Import_FullMethodName:             true,
	pb.Cluster_Verify_FullMethodName:             true,
}

func (s *Server) checkClusterID(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get(MDClusterID)
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

func (s *Server) clusterIDInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.checkClusterID(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) clusterIDStreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.checkClusterID(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// forwardInterceptor proxies leader-only calls from a follower to the
// leader with the caller's deadline; a call forwarded once is never
// forwarded again.
func (s *Server) forwardInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !leaderOnly[info.FullMethod] || s.raft.State() == raft.Leader {
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
	out := newReply(info.FullMethod)
	fctx := metadata.AppendToOutgoingContext(ctx, mdForwarded, s.cfg.ID)
	if err := conn.Invoke(fctx, info.FullMethod, req, out); err != nil {
		return nil, err
	}
	return out, nil
}

func newReply(method string) any {
	switch method {
	case pb.Cluster_TransferLeadership_FullMethodName:
		return &pb.TransferLeadershipResponse{}
	case pb.Journal_RegisterConsumer_FullMethodName, pb.Journal_AckConsumer_FullMethodName, pb.Journal_RemoveConsumer_FullMethodName:
		return &pb.ConsumerResponse{}
	case pb.Journal_Trim_FullMethodName:
		return &pb.TrimResponse{}
	case pb.Journal_Reset_FullMethodName:
		return &pb.ResetResponse{}
	case pb.Journal_SetPaused_FullMethodName:
		return &pb.SetPausedResponse{}
	case pb.Journal_Import_FullMethodName:
		return &pb.ImportResponse{}
	case pb.Cluster_Verify_FullMethodName:
		return &pb.VerifyResponse{}
	default:
		return &pb.MembershipResponse{}
	}
}
