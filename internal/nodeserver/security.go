package nodeserver

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// With Security.TLS set, who may reach what on a storage node
// (docs/security.md):
//
//	WriteBlock, ReadBlock, GetReplicaVisibleLength, TransferBlock
//	    node or coordinator certificates; others by block access tokens
//	    when the coordinators run with ACLs (blocktokens.go)
//	InitReplicaRecovery, UpdateReplicaUnderRecovery  node or coordinator certificates
//	GossipKeyring, ShutdownNode  coordinator certificates only
//	other DataNode RPCs  any certificate of the cluster CA
//	gRPC health          anyone
//	HTTP /healthz        anyone; /metrics, pprof: any certificate
//
// The node dials coordinators and other nodes only when their certificates
// are of those roles.

var healthPrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

// authorize decides whether the peer of ctx may call method, by its
// access class (access.go) and internal/authz's rules. Without TLS every
// call passes.
func (s *Server) authorize(ctx context.Context, method string) error {
	if s.cfg.Security.TLS == nil || strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	id := tlsgrpc.Caller(ctx)
	class := authz.AccessRead // gRPC reflection: no Logbook RPC
	if a, ok := accessClasses[method]; ok {
		class = authz.Access(a)
	}
	// Admin calls (ShutdownNode) come from coordinators only: users ask a
	// coordinator (Cluster.ShutdownNode), which authorizes them by the
	// cluster's roles, which a node does not hold.
	if class == authz.AccessAdmin && id.Kind == authz.KindCertificate && id.Role != authz.CertRoleCoordinator {
		s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", "admin calls come from coordinators")
		return s.authErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s is not a coordinator: ask a coordinator (coord nodes shutdown), which checks the caller's roles", method, id))
	}
	switch d := tlsgrpc.Decide(authz.Policy{}, false, id, class, authz.Resource{}); d.Outcome {
	case authz.Allow:
		return nil
	case authz.Unauthenticated:
		return s.authErr(codes.Unauthenticated, pb.ReasonNoIdentity, fmt.Sprintf("%s needs a client certificate of the cluster CA", method))
	default:
		s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", d.Reason)
		return s.authErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s", method, d.Reason))
	}
}

func (s *Server) authErr(c codes.Code, reason, msg string) error { return s.statusErr(c, reason, msg) }

func (s *Server) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.blockCall(ctx, info.FullMethod) {
		if err := s.checkBlockCall(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if s.blockCall(ss.Context(), info.FullMethod) {
		// The token is in the first message (the setup; ReadBlock's
		// request).
		return handler(srv, &tokenStream{ServerStream: ss, s: s, method: info.FullMethod})
	}
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
