package coordserver

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// fsReplies lists every Namespace and NodeLink method with its reply
// type: all of them are answered by the leader (writes propose, reads
// and node reports use the leader's soft state), so a follower forwards
// them as they are, like the leader-only methods of forwardInterceptor.
var fsReplies = map[string]func() any{
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
	pb.NodeLink_Register_FullMethodName:                func() any { return &pb.NodeRegisterResponse{} },
	pb.NodeLink_Heartbeat_FullMethodName:               func() any { return &pb.NodeHeartbeatResponse{} },
	pb.NodeLink_BlockReport_FullMethodName:             func() any { return &pb.NodeReportResponse{} },
	pb.NodeLink_IncrementalReport_FullMethodName:       func() any { return &pb.NodeReportResponse{} },
	pb.NodeLink_CommitBlockSynchronization_FullMethodName: func() any {
		return &pb.CommitBlockSyncResponse{}
	},
}

// fsForwardInterceptor proxies the file-system calls from a follower to
// the leader with the caller's deadline; a call forwarded once is never
// forwarded again.
func (s *Server) fsForwardInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	newOut, ok := fsReplies[info.FullMethod]
	if !ok || s.isLeader() {
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
