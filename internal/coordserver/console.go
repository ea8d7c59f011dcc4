package coordserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/console"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// The web console (internal/console) on the HTTP port: its figures come
// from the gRPC handlers, called in process through the same
// authorization (decide) and forwarding (forwardOrHandle) as a gRPC call,
// as the caller the console's gate identified with the same token and
// certificate checks (bearerIdentity, pki.IdentityOf).

// consoleGateMethod is the call a console caller must be allowed to make:
// reading the journal's positions, a reader's right (docs/console.md).
var consoleGateMethod = "/" + pb.Journal_ServiceDesc.ServiceName + "/Positions"

// consoleCallerKey holds the console caller's identity in the context of
// its Source calls (with TLS on).
type consoleCallerKey struct{}

func (s *Server) newConsole() (*console.Console, error) {
	return console.New(console.Config{
		Source:       consoleSource{s},
		Gate:         s.consoleGate,
		SecureCookie: s.cfg.Security.TLS != nil,
		Gatherer:     s.metrics.reg,
		SampleEvery:  s.cfg.ConsoleSampleEvery,
		Logger:       s.log,
	})
}

// consoleGate identifies a console request: without TLS anyone reads
// (as every port of such a cluster trusts whoever connects); with it, a
// bearer token (checked as a gRPC call's) or else the verified client
// certificate, allowed to read the journal's positions.
func (s *Server) consoleGate(r *http.Request, token string) (context.Context, string, error) {
	ctx := r.Context()
	if s.cfg.Security.TLS == nil {
		return ctx, "anonymous", nil
	}
	id := authz.Anonymous
	if st := r.TLS; st != nil && len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		if pid, err := pki.IdentityOf(st.PeerCertificates[0]); err == nil {
			id = authz.Identity{Kind: authz.KindCertificate, Name: pid.Name, Role: string(pid.Role)}
		}
	}
	if token != "" {
		tid, err := s.bearerIdentity("console", token)
		if err != nil {
			return nil, "", &console.Refusal{Status: http.StatusUnauthorized, Reason: status.Convert(err).Message()}
		}
		id = tid
	}
	d, _ := s.verdict(id, consoleGateMethod, &pb.PositionsRequest{})
	switch d.Outcome {
	case authz.Allow:
	case authz.Unauthenticated:
		need := "a client certificate of the cluster CA"
		if s.cfg.Security.ACL {
			need += " or a token"
		}
		return nil, "", &console.Refusal{Status: http.StatusUnauthorized, Reason: "the console needs " + need}
	default:
		s.log.Warn("refused a console request", "identity", id.String(), "path", r.URL.Path, "reason", d.Reason)
		return nil, "", &console.Refusal{Status: http.StatusForbidden, Reason: "the console needs read on the journal: " + d.Reason}
	}
	return context.WithValue(ctx, consoleCallerKey{}, id), id.String(), nil
}

// consoleSource is the console's Source on this member.
type consoleSource struct{ s *Server }

var _ console.Source = consoleSource{}

// consoleCall runs handler as the gRPC server would run method's call
// with req: authorized as the console's caller, forwarded to the leader
// if only the leader answers it.
func consoleCall[Req, Resp any](s *Server, ctx context.Context, method string, req Req, handler func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	if s.cfg.Security.TLS != nil {
		id, _ := ctx.Value(consoleCallerKey{}).(authz.Identity)
		var err error
		if ctx, err = s.decide(ctx, id, method, req); err != nil {
			return zero, err
		}
	}
	h := func(ctx context.Context, r any) (any, error) { return handler(ctx, r.(Req)) }
	resp, err := s.forwardOrHandle(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
	if err != nil {
		return zero, err
	}
	out, ok := resp.(Resp)
	if !ok {
		return zero, fmt.Errorf("console: %s answered %T", method, resp)
	}
	return out, nil
}

func rpcName(sd grpc.ServiceDesc, name string) string { return "/" + sd.ServiceName + "/" + name }

func (c consoleSource) Status(ctx context.Context) (*pb.StatusResponse, error) {
	return consoleCall(c.s, ctx, rpcName(pb.Cluster_ServiceDesc, "Status"), &pb.StatusRequest{}, (&clusterService{s: c.s}).Status)
}

func (c consoleSource) Positions(ctx context.Context) (*pb.PositionsResponse, error) {
	return consoleCall(c.s, ctx, consoleGateMethod, &pb.PositionsRequest{}, (&journalService{s: c.s}).Positions)
}

func (c consoleSource) Segments(ctx context.Context) (*pb.SegmentsResponse, error) {
	return consoleCall(c.s, ctx, rpcName(pb.Journal_ServiceDesc, "Segments"), &pb.SegmentsRequest{}, (&journalService{s: c.s}).Segments)
}

func (c consoleSource) Consumers(ctx context.Context) (*pb.ListConsumersResponse, error) {
	return consoleCall(c.s, ctx, rpcName(pb.Journal_ServiceDesc, "ListConsumers"), &pb.ListConsumersRequest{}, (&journalService{s: c.s}).ListConsumers)
}

func (c consoleSource) Nodes(ctx context.Context) (*pb.ListNodesResponse, error) {
	return consoleCall(c.s, ctx, rpcName(pb.Namespace_ServiceDesc, "ListNodes"), &pb.ListNodesRequest{}, (&namespaceService{s: c.s}).ListNodes)
}

func (c consoleSource) List(ctx context.Context, dir, after string, limit int) (*pb.ListResponse, error) {
	req := &pb.ListRequest{Dir: dir, After: after, Limit: uint32(min(limit, maxFSListLimit))}
	return consoleCall(c.s, ctx, rpcName(pb.Namespace_ServiceDesc, "List"), req, (&namespaceService{s: c.s}).List)
}

func (c consoleSource) Stat(ctx context.Context, path string) (*pb.StatResponse, error) {
	resp, err := consoleCall(c.s, ctx, rpcName(pb.Namespace_ServiceDesc, "Stat"), &pb.StatRequest{Path: path}, (&namespaceService{s: c.s}).Stat)
	if err == nil {
		for _, b := range resp.Blocks {
			b.BlockToken = nil // a page never shows a credential
		}
	}
	return resp, err
}

func (c consoleSource) ReadJournal(ctx context.Context) error {
	_, err := consoleCall(c.s, ctx, rpcName(pb.Journal_ServiceDesc, "Read"), &pb.ReadRequest{}, func(context.Context, *pb.ReadRequest) (*pb.ReadResponse, error) {
		return &pb.ReadResponse{}, nil // allowed: the console reads the applied state itself
	})
	return err
}

func (c consoleSource) Applied(from uint64, max int) (evs []*pb.StoredEvent, first, next uint64, changed <-chan struct{}) {
	changed = c.s.fsm.ViewWait(func(st *fsm.State) {
		first, next = st.FirstSeq(), st.NextSeq()
		if max > 0 && from >= first {
			evs = apiEvents(st.Read(from, max))
		}
	})
	return evs, first, next, changed
}

func (c consoleSource) Member() console.Member {
	s := c.s
	_, lid := s.raft.LeaderWithID()
	m := console.Member{ID: s.cfg.ID, Leader: s.raft.State() == raft.Leader, LeaderID: string(lid), Term: s.raft.CurrentTerm(),
		CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.fsm.AppliedIndex(), Gossip: map[string]string{}}
	if !m.Leader {
		if t := s.raft.LastContact(); t.IsZero() {
			m.LastContactMs = -1
		} else {
			m.LastContactMs = time.Since(t).Milliseconds()
		}
	}
	if s.members != nil {
		for _, mem := range s.members.Members() {
			if mem.Meta.Role == membership.RoleCoordinator {
				m.Gossip[mem.Meta.ID] = mem.State.String()
			}
		}
	}
	return m
}
