package coordserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/authz"
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
//	                     (and coordinators, which forward them to the leader)
//	gRPC client services any certificate of the cluster CA
//	gRPC health          anyone (container and load-balancer probes)
//	HTTP /healthz, /readyz  anyone; /metrics, pprof: any certificate
//
// The TLS handshake verifies the chain and the role where a port takes one
// role; authorize checks the rest per call from the verified certificate
// and the method's access class.

var healthPrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

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

// authorize decides whether the caller of ctx may call method with req
// (nil for a stream, whose messages authorize does not see), by the
// method's access class (routes.go, the proto's (logbook.v1.access)
// option) and internal/authz's rules; with ACLs on, user calls by the
// roles the cluster holds (acl_edge.go). It returns ctx with the caller's
// identity when ACLs are on. Without TLS every call passes.
func (s *Server) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	sec := s.cfg.Security
	if sec.TLS == nil || strings.HasPrefix(method, healthPrefix) {
		return ctx, nil
	}
	id, err := s.identify(ctx, method)
	if err != nil {
		return ctx, err
	}
	return s.decide(ctx, id, method, req)
}

// decide is authorize's verdict on id's call of method with req, once
// the caller is identified (the web console decides its calls with it
// too).
func (s *Server) decide(ctx context.Context, id authz.Identity, method string, req any) (context.Context, error) {
	sec := s.cfg.Security
	d, class := s.verdict(id, method, req)
	if sec.ACL && class.UserLevel() && d.Outcome == authz.Forbidden && req == nil && method == appendStreamMethod {
		// Allowed some event types only: each message is checked
		// (checkedStream).
		return context.WithValue(withCaller(ctx, id), checkEachKey{}, true), nil
	}
	switch d.Outcome {
	case authz.Allow:
	case authz.Unauthenticated:
		need := "a client certificate of the cluster CA"
		if sec.ACL {
			need += " or a token"
		}
		return ctx, s.statusErr(codes.Unauthenticated, pb.ReasonNoIdentity, fmt.Sprintf("%s needs %s", method, need))
	default:
		if class.UserLevel() {
			return ctx, s.deny(method, id, d.Reason)
		}
		return ctx, s.refuse(method, id.String(), d.Reason)
	}
	// A node or member speaks only for itself; a coordinator's call may be
	// one it forwards for its caller, whom it checked.
	if claim, ok := memberClaim(req); ok && claim != id.Name && (id.Role != authz.CertRoleCoordinator || !forwardable(method)) {
		return ctx, s.refuse(method, id.String(), fmt.Sprintf("the certificate names %q, the request %q", id.Name, claim))
	}
	if sec.ACL {
		ctx = withCaller(ctx, id)
	}
	return ctx, nil
}

// verdict is the rules' decision on id's call of method with req, and
// the method's access class; it records nothing.
func (s *Server) verdict(id authz.Identity, method string, req any) (authz.Decision, authz.Access) {
	sec := s.cfg.Security
	class := authz.AccessRead // gRPC reflection: no Logbook RPC
	if r, ok := routes[method]; ok {
		class = authz.Access(r.access)
	}
	if sec.ACL && class.UserLevel() {
		return decideUser(s.fsm.ACL(), id, class, method, req), class
	}
	return tlsgrpc.Decide(s.fsm.ACL().Policy, sec.ACL, id, class, authz.Resource{}), class
}

var appendStreamMethod = "/" + pb.Journal_ServiceDesc.ServiceName + "/AppendStream"

// checkEachKey marks a stream whose messages authorize checks one by one.
type checkEachKey struct{}

// forwardable reports whether members forward method to the leader.
func forwardable(method string) bool { return routes[method].route == pb.Route_ROUTE_FORWARD }

// memberClaim is the node or member a NodeLink or Peer request speaks for.
func memberClaim(req any) (string, bool) {
	switch r := req.(type) {
	case *clusterpb.RegisterMemberRequest:
		return r.GetMember().GetId(), true
	case *clusterpb.NodeRegisterRequest:
		return r.GetNode().GetId(), true
	case *clusterpb.NodeHeartbeatRequest, *clusterpb.NodeBlockReportRequest, *clusterpb.NodeIncrementalReportRequest, *clusterpb.CommitBlockSyncRequest:
		return r.(interface{ GetNodeId() string }).GetNodeId(), true
	}
	return "", false
}

func (s *Server) refuse(method, id, why string) error {
	s.log.Warn("refused a call", "method", method, "identity", id, "reason", why)
	return s.statusErr(codes.PermissionDenied, pb.ReasonWrongRole, fmt.Sprintf("%s: %s", method, why))
}

// certWarnBefore is how long before its certificate expires a member
// warns in coord status.
const certWarnBefore = 14 * 24 * time.Hour

// certWarning is member's status warning about a certificate that
// expires at notAfter ("" while it has longer than certWarnBefore).
func certWarning(member string, notAfter, now time.Time) string {
	switch left := notAfter.Sub(now); {
	case left <= 0:
		return fmt.Sprintf("member %s: TLS certificate expired at %s", member, notAfter.UTC().Format(time.RFC3339))
	case left < certWarnBefore:
		return fmt.Sprintf("member %s: TLS certificate expires in %s, at %s", member, left.Round(time.Hour), notAfter.UTC().Format(time.RFC3339))
	}
	return ""
}
