package coordserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/raftnet"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// With Security.TLS set, who may reach what (docs/security.md):
//
//	Raft port            coordinator certificates of the cluster CA only
//	gRPC Peer service    coordinator certificates only (RegisterMember: for itself)
//	gRPC NodeLink        node certificates naming the node the request is for
//	gRPC client services any certificate of the cluster CA
//	gRPC health          anyone (container and load-balancer probes)
//	HTTP /healthz, /readyz  anyone; /metrics, pprof: any certificate
//
// The TLS handshake verifies the chain and the role where a port takes one
// role; authorize checks the rest per call from the verified certificate.

var (
	peerPrefix     = "/" + clusterpb.Peer_ServiceDesc.ServiceName + "/"
	nodeLinkPrefix = "/" + clusterpb.NodeLink_ServiceDesc.ServiceName + "/"
	healthPrefix   = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"
)

// The TLS certificate's expiry metric (coordinators and nodes alike).
const (
	tlsExpiryMetric = "logbook_tls_certificate_expiry_timestamp_seconds"
	tlsExpiryHelp   = "When this process's TLS certificate expires, in Unix seconds (only with TLS on)."
)

// raftTLS is the Raft transport's security (nil: plaintext).
func (sec Security) raftTLS() *raftnet.TLS {
	if sec.TLS == nil {
		return nil
	}
	src := sec.TLS
	return &raftnet.TLS{
		Server: src.ServerConfig(pki.RequireCert, pki.RoleCoordinator),
		Client: func(host string) *tls.Config { return src.ClientConfig(pki.RoleCoordinator, host) },
	}
}

// nodeClaim is the node a NodeLink request speaks for.
func nodeClaim(req any) (string, bool) {
	switch r := req.(type) {
	case *clusterpb.NodeRegisterRequest:
		return r.GetNode().GetId(), true
	case interface{ GetNodeId() string }:
		return r.GetNodeId(), true
	case *pb.ReportBadBlocksRequest:
		return r.GetReporter(), true
	}
	return "", false
}

// authorize decides whether the peer of ctx may call method with req (nil
// for a stream, whose messages authorize does not see). Without TLS every
// call passes.
func (s *Server) authorize(ctx context.Context, method string, req any) error {
	if s.cfg.Security.TLS == nil || strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	id, ok := tlsgrpc.PeerIdentity(ctx)
	if !ok {
		return s.statusErr(codes.Unauthenticated, pb.ReasonNoIdentity, fmt.Sprintf("%s needs a client certificate of the cluster CA", method))
	}
	switch {
	case strings.HasPrefix(method, peerPrefix):
		if id.Role != pki.RoleCoordinator {
			return s.refuse(method, id, "only coordinators call the Peer service")
		}
		if r, ok := req.(*clusterpb.RegisterMemberRequest); ok && r.GetMember().GetId() != id.Name {
			return s.refuse(method, id, fmt.Sprintf("the certificate names member %q, the request member %q", id.Name, r.GetMember().GetId()))
		}
	case strings.HasPrefix(method, nodeLinkPrefix):
		if id.Role != pki.RoleNode {
			return s.refuse(method, id, "only storage nodes call the NodeLink service")
		}
		if claim, ok := nodeClaim(req); ok && claim != id.Name {
			return s.refuse(method, id, fmt.Sprintf("the certificate names node %q, the request node %q", id.Name, claim))
		}
	}
	return nil
}

func (s *Server) refuse(method string, id pki.Identity, why string) error {
	s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", why)
	return s.statusErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s is not allowed: %s", method, id, why))
}
