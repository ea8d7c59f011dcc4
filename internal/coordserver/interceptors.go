package coordserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

const (
	healthServing    = healthpb.HealthCheckResponse_SERVING
	healthNotServing = healthpb.HealthCheckResponse_NOT_SERVING
)

func (s *Server) checkClusterID(ctx context.Context, method string) error {
	// ValueFromIncomingContext reads one key without copying the whole
	// metadata map (this runs on every call).
	ids := metadata.ValueFromIncomingContext(ctx, MDClusterID)
	peer := strings.HasPrefix(method, "/"+clusterpb.Peer_ServiceDesc.ServiceName+"/")
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
// timed and counted, refused if its caller may not make it (security.go)
// or comes from another cluster, and
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
	ctx, err := s.authorize(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	if err := s.checkClusterID(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return s.forwardOrHandle(ctx, req, info, handler)
}

// streamInterceptor is every stream's path through the server (after the
// metrics interceptor): refused if its caller may not open it, if it
// comes from another cluster, or if only the leader serves it
// (ROUTE_LEADER) and this member is not the leader.
func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.authorize(ss.Context(), info.FullMethod, nil)
	if err != nil {
		return err
	}
	if each, _ := ctx.Value(checkEachKey{}).(bool); each {
		ss = &checkedStream{ServerStream: ss, ctx: ctx, s: s, id: callerOf(ctx), method: info.FullMethod}
	}
	if err := s.checkClusterID(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if routes[info.FullMethod].route == pb.Route_ROUTE_LEADER && s.raft.State() != raft.Leader {
		return s.statusErr(codes.Unavailable, ReasonNotLeader, fmt.Sprintf("%s is served by the leader only", info.FullMethod))
	}
	return handler(srv, ss)
}

// forwardOrHandle proxies the calls the leader answers (ROUTE_FORWARD)
// from a follower to the leader with the caller's deadline; a call
// forwarded once is never forwarded again. Other calls are handled here.
func (s *Server) forwardOrHandle(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r := routes[info.FullMethod]
	if r.route != pb.Route_ROUTE_FORWARD || s.raft.State() == raft.Leader {
		return s.handleHere(ctx, req, info, handler)
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
		return s.handleHere(ctx, req, info, handler)
	}
	changed := s.fwd.leaderChange()
	if cur, _ := s.leaderHint(); cur != id {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "the leader changed; retry")
	}
	conn, err := s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	// A leader gone from the network neither answers nor refuses: the
	// call ends when the leadership moves (Unavailable NOT_LEADER), and
	// the caller retries.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if info.FullMethod == pb.Cluster_TransferLeadership_FullMethodName {
		changed = nil // the change it makes is its outcome
	}
	go func() {
		select {
		case <-changed:
			cancel()
		case <-ctx.Done():
		}
	}()
	out := r.reply.New().Interface()
	fctx := metadata.AppendToOutgoingContext(ctx, mdForwarded, s.cfg.ID)
	if id, ok := ctx.Value(callerKey{}).(authz.Identity); ok {
		fctx = metadata.AppendToOutgoingContext(fctx, mdCaller, encodeCaller(id))
	}
	if err := conn.Invoke(fctx, info.FullMethod, req, out); err != nil {
		select {
		case <-changed:
			return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, fmt.Sprintf("forward to leader %s: the leader changed; retry", id))
		default:
		}
		return nil, err
	}
	return out, nil
}

// aclPrefix is the Acl service, whose changes journal their own audit
// events.
var aclPrefix = "/" + pb.Acl_ServiceDesc.ServiceName + "/"

// handleHere runs the handler on this member; with TLS an admin call that
// succeeds is journaled with its caller (logbook.admin, off the call
// path).
func (s *Server) handleHere(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err == nil && s.cfg.Security.TLS != nil && routes[info.FullMethod].access == pb.Access_ACCESS_ADMIN && !strings.HasPrefix(info.FullMethod, aclPrefix) {
		s.audit.admin(actorOf(ctx), info.FullMethod, req)
	}
	return resp, err
}
