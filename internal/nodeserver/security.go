package nodeserver

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// With Security.TLS set, who may reach what on a storage node
// (docs/security.md):
//
//	InitReplicaRecovery, UpdateReplicaUnderRecovery  node or coordinator certificates
//	GossipKeyring        coordinator certificates only
//	other DataNode RPCs  any certificate of the cluster CA
//	gRPC health          anyone
//	HTTP /healthz        anyone; /metrics, pprof: any certificate
//
// The node dials coordinators and other nodes only when their certificates
// are of those roles.

var (
	recoveryMethods = map[string]bool{
		pb.DataNode_InitReplicaRecovery_FullMethodName:        true,
		pb.DataNode_UpdateReplicaUnderRecovery_FullMethodName: true,
	}
	healthPrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"
)

// authorize decides whether the peer of ctx may call method. Without TLS
// every call passes.
func (s *Server) authorize(ctx context.Context, method string) error {
	if s.cfg.Security.TLS == nil || strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	id, ok := tlsgrpc.PeerIdentity(ctx)
	if !ok {
		return s.authErr(codes.Unauthenticated, pb.ReasonNoIdentity, fmt.Sprintf("%s needs a client certificate of the cluster CA", method))
	}
	if recoveryMethods[method] && id.Role != pki.RoleNode && id.Role != pki.RoleCoordinator {
		s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", "recovery RPCs are for nodes and coordinators")
		return s.authErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s is not allowed: only a recovery's primary node or a coordinator calls it", method, id))
	}
	if method == pb.DataNode_GossipKeyring_FullMethodName && id.Role != pki.RoleCoordinator {
		s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", "the gossip keyring is changed by coordinators")
		return s.authErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s is not allowed: only coordinators change the gossip keyring (coord gossip keyring)", method, id))
	}
	return nil
}

func (s *Server) authErr(c codes.Code, reason, msg string) error { return s.statusErr(c, reason, msg) }

func (s *Server) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
