package coordserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// With --acl-enabled (Security.ACL) a call's identity is its bearer token
// (Authorization metadata) when it has one, else its client certificate;
// user calls (read, write, admin) are decided by the roles the cluster
// holds (fsm.ACL, one atomic load) for what the request touches: the
// event types of an append, the path of a file operation, the whole
// journal or file system for the others of their service, the cluster
// for the rest. A follower authorizes its caller and, when it forwards
// the call, names the caller to the leader (mdCaller), which authorizes
// that identity again by its own state and journals it as the actor.

// mdCaller carries the identity a coordinator forwards a call for; only a
// coordinator certificate's word for it is taken.
const mdCaller = "logbook-caller"

// callerKey is the context key of a call's authenticated identity (ACLs
// on only): forwarding and the audit trail read it.
type callerKey struct{}

func withCaller(ctx context.Context, id authz.Identity) context.Context {
	return context.WithValue(ctx, callerKey{}, id)
}

// callerOf is the identity authorize established for ctx's call, or the
// certificate's when ACLs are off.
func callerOf(ctx context.Context) authz.Identity {
	if id, ok := ctx.Value(callerKey{}).(authz.Identity); ok {
		return id
	}
	return tlsgrpc.Caller(ctx)
}

// actorOf names the caller of ctx for an audit record.
func actorOf(ctx context.Context) string {
	id := callerOf(ctx)
	if id.Name == "" {
		return "anonymous"
	}
	return encodeCaller(id)
}

// encodeCaller writes an identity as mdCaller carries it:
// "token:NAME" or "certificate:ROLE:NAME".
func encodeCaller(id authz.Identity) string {
	if id.Kind == authz.KindToken {
		return "token:" + id.Name
	}
	return "certificate:" + id.Role + ":" + id.Name
}

func decodeCaller(v string) (authz.Identity, error) {
	kind, rest, _ := strings.Cut(v, ":")
	var id authz.Identity
	switch kind {
	case "token":
		id = authz.Identity{Kind: authz.KindToken, Name: rest}
	case "certificate":
		role, name, ok := strings.Cut(rest, ":")
		if !ok {
			return id, fmt.Errorf("forwarded caller %.80q: no role", v)
		}
		id = authz.Identity{Kind: authz.KindCertificate, Role: role, Name: name}
	default:
		return id, fmt.Errorf("forwarded caller %.80q: unknown kind", v)
	}
	if err := authz.ValidateUserName(id.Name); err != nil {
		return authz.Identity{}, fmt.Errorf("forwarded caller: %v", err)
	}
	return id, nil
}

// identify establishes who calls: a coordinator's certificate (or the
// caller it forwards for), a bearer token the cluster holds, or the
// client certificate.
func (s *Server) identify(ctx context.Context, method string) (authz.Identity, error) {
	id := tlsgrpc.Caller(ctx)
	if id.Kind == authz.KindCertificate && id.Role == authz.CertRoleCoordinator {
		v := metadata.ValueFromIncomingContext(ctx, mdCaller)
		if len(v) == 0 {
			return id, nil
		}
		fwd, err := decodeCaller(v[0])
		if err != nil || len(v) > 1 {
			return id, s.statusErr(codes.InvalidArgument, ReasonBadRequest, fmt.Sprintf("%s: %v", method, err))
		}
		return fwd, nil
	}
	vals := metadata.ValueFromIncomingContext(ctx, pb.MDAuthorization)
	if len(vals) == 0 {
		return id, nil
	}
	if len(vals) > 1 {
		s.log.Warn("refused a token", "method", method, "reason", "several authorization values")
		return authz.Anonymous, s.statusErr(codes.Unauthenticated, pb.ReasonBadToken, fmt.Sprintf("%s: %d authorization values, want one", method, len(vals)))
	}
	return s.bearerIdentity(method, vals[0])
}

// bearerIdentity is the user of an Authorization value ("Bearer " and a
// token) the cluster holds, unexpired, or Unauthenticated with the
// reason: gRPC calls and the web console check tokens with it alike.
func (s *Server) bearerIdentity(method, bearer string) (authz.Identity, error) {
	unauth := func(reason, msg string) (authz.Identity, error) {
		s.log.Warn("refused a token", "method", method, "reason", msg)
		return authz.Anonymous, s.statusErr(codes.Unauthenticated, reason, fmt.Sprintf("%s: %s", method, msg))
	}
	tok, err := authz.ParseBearer(bearer)
	if err != nil {
		return unauth(pb.ReasonBadToken, err.Error())
	}
	rec, ok := s.fsm.ACL().Token(tok.Accessor)
	if !ok {
		return unauth(pb.ReasonTokenUnknown, fmt.Sprintf("token %s is not known here: revoked, never created, or created after index %d", tok.Accessor, s.fsm.AppliedIndex()))
	}
	if h := tok.Hash(); subtle.ConstantTimeCompare(h[:], rec.SecretSha256) != 1 {
		return unauth(pb.ReasonBadToken, fmt.Sprintf("token %s: wrong secret", tok.Accessor))
	}
	if rec.ExpiresUnixNanos != 0 && time.Now().UnixNano() >= rec.ExpiresUnixNanos {
		return unauth(pb.ReasonTokenExpired, fmt.Sprintf("token %s expired at %s", tok.Accessor, time.Unix(0, rec.ExpiresUnixNanos).UTC().Format(time.RFC3339)))
	}
	return authz.Identity{Kind: authz.KindToken, Name: rec.User}, nil
}

// decideUser is the decision on a read, write or admin call of method
// with req by id under acl's policy, for what req touches.
func decideUser(acl *fsm.ACL, id authz.Identity, class authz.Access, method string, req any) authz.Decision {
	p := acl.Policy
	res, alt := resourcesOf(method, req)
	if len(res.Names) > 0 {
		// A grant on the whole scope covers every name: decided without
		// walking them (every append of a writer takes this path).
		if d := p.Authorize(id, class, authz.Resource{Scope: res.Scope}); d.Allowed() {
			return d
		}
	}
	d := p.Authorize(id, class, res)
	if !d.Allowed() && alt.Scope != 0 {
		if d2 := p.Authorize(id, class, alt); d2.Allowed() {
			return d2
		}
	}
	if !d.Allowed() && !acl.Bootstrapped {
		d.Reason += " (the access control is not bootstrapped: run coord acl bootstrap)"
	}
	return d
}

// resourcesOf is what a user call touches and, for a call that serves the
// journal and the file system alike (sessions, leases), the other scope
// that also lets it through.
func resourcesOf(method string, req any) (res, alt authz.Resource) {
	switch r := req.(type) {
	case *pb.AppendRequest:
		types := make([]string, len(r.Events))
		for i, e := range r.Events {
			types[i] = e.GetType()
		}
		return authz.EventTypes(types...), authz.Resource{}
	case *pb.ListRequest:
		return fsPath(r.GetDir()), authz.Resource{}
	case *pb.OpenSessionRequest, *pb.CloseSessionRequest:
		return authz.SomeOf(authz.ScopeJournal), authz.SomeOf(authz.ScopeFS)
	case *pb.RenewLeaseRequest, *pb.ReportBadBlocksRequest:
		return authz.SomeOf(authz.ScopeFS), authz.Resource{}
	case *pb.ListCacheDirectivesRequest, *pb.RemoveCacheDirectiveRequest:
		return authz.Paths(), authz.Resource{}
	case interface{ GetPath() string }:
		if strings.HasPrefix(method, "/"+pb.Namespace_ServiceDesc.ServiceName+"/") {
			return fsPath(r.GetPath()), authz.Resource{}
		}
	}
	if strings.HasPrefix(method, "/"+pb.Journal_ServiceDesc.ServiceName+"/") {
		return authz.EventTypes(), authz.Resource{}
	}
	return authz.Resource{}, authz.Resource{}
}

// fsPath is the resource of a call on path: the whole file system for a
// path the namespace would refuse, so the handler says why (and a caller
// scoped to some paths is refused).
func fsPath(path string) authz.Resource {
	if fsm.ValidPath(path) != nil {
		return authz.Paths()
	}
	return authz.Paths(path)
}

// checkedStream authorizes every message of an AppendStream whose caller
// lacks write on the whole journal, by the message's event types.
type checkedStream struct {
	grpc.ServerStream
	ctx    context.Context // the stream's, with the caller
	s      *Server
	id     authz.Identity
	method string
}

func (c *checkedStream) Context() context.Context { return c.ctx }

func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if d := decideUser(c.s.fsm.ACL(), c.id, authz.AccessWrite, c.method, m); !d.Allowed() {
		return c.s.deny(c.method, c.id, d.Reason)
	}
	return nil
}

// deny answers a user call its roles do not allow, and has it journaled.
func (s *Server) deny(method string, id authz.Identity, why string) error {
	s.log.Warn("refused a call", "method", method, "identity", id.String(), "reason", why)
	s.audit.deny(&fsmpb.AclDeniedOp{Identity: clip(encodeCaller(id)), Method: clip(method), Reason: clip(why), Member: s.cfg.ID})
	return s.statusErr(codes.PermissionDenied, pb.ReasonPermission, fmt.Sprintf("%s: %s", method, why))
}

func clip(v string) string {
	if len(v) <= fsm.MaxAclDeniedField {
		return v
	}
	v = v[:fsm.MaxAclDeniedField]
	for len(v) > 0 && v[len(v)-1]&0xc0 == 0x80 { // do not cut a rune
		v = v[:len(v)-1]
	}
	if len(v) > 0 && v[len(v)-1] >= 0xc0 {
		v = v[:len(v)-1]
	}
	return v
}

// deniedEvery is how often a member journals a refused call at most; the
// refusals in between are counted in the next record.
const deniedEvery = time.Second

// auditQueue bounds the admin records waiting to be journaled; one beyond
// it is dropped and logged.
const auditQueue = 256

// auditRecorder journals a member's audit records off the call path:
// refused user calls (logbook.acl.denied, at most one per deniedEvery,
// counting the rest) and admin operations carried out here
// (logbook.admin), from one goroutine of its own so that no call waits
// for the log.
type auditRecorder struct {
	s          *Server
	mu         sync.Mutex
	last       time.Time
	suppressed uint64
	denied     *fsmpb.AclCommand // the next denied record, if any
	queue      []*fsmpb.AclCommand
	running    bool
}

// denied queues a refused call's record unless one was journaled less
// than deniedEvery ago or is waiting.
func (r *auditRecorder) deny(op *fsmpb.AclDeniedOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.denied != nil || time.Since(r.last) < deniedEvery {
		r.suppressed++
		return
	}
	r.last = time.Now()
	op.Suppressed, r.suppressed = r.suppressed, 0
	r.denied = &fsmpb.AclCommand{Actor: op.Identity, Op: &fsmpb.AclCommand_Denied{Denied: op}}
	r.kick()
}

// admin queues an admin operation's record.
func (r *auditRecorder) admin(actor, method string, req any) {
	op := &fsmpb.AclAdminOp{Method: method, Request: requestSummary(req), Member: r.s.cfg.ID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) >= auditQueue {
		r.s.log.Warn("audit queue full: an admin operation goes unjournaled", "method", method, "actor", actor)
		return
	}
	r.queue = append(r.queue, &fsmpb.AclCommand{Actor: clip(actor), Op: &fsmpb.AclCommand_Admin{Admin: op}})
	r.kick()
}

// kick starts the sender unless it runs (r.mu held).
func (r *auditRecorder) kick() {
	if !r.running {
		r.running = true
		go r.send()
	}
}

func (r *auditRecorder) send() {
	for {
		r.mu.Lock()
		var c *fsmpb.AclCommand
		switch {
		case r.denied != nil:
			c, r.denied = r.denied, nil
		case len(r.queue) > 0:
			c, r.queue = r.queue[0], r.queue[1:]
		default:
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if err := r.s.recordAudit(c); err != nil {
			r.s.log.Warn("could not journal an audit record", "record", c.String(), "err", err)
			if d := c.GetDenied(); d != nil {
				r.mu.Lock()
				r.suppressed += 1 + d.Suppressed // counted in the next one
				r.mu.Unlock()
			}
		}
	}
}

// requestSummary is a request as an admin record holds it: its JSON, or
// its type and size when that is over MaxAclDeniedField bytes.
func requestSummary(req any) string {
	m, ok := req.(proto.Message)
	if !ok {
		return ""
	}
	if n := proto.Size(m); n > fsm.MaxAclDeniedField/2 {
		return fmt.Sprintf("%s of %d bytes", m.ProtoReflect().Descriptor().FullName(), n)
	}
	b, err := protojson.Marshal(m)
	if err != nil || len(b) > fsm.MaxAclDeniedField {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return string(b)
}

// recordAudit journals an audit record: on the leader directly, from a
// follower through the leader's Peer.RecordAudit.
func (s *Server) recordAudit(c *fsmpb.AclCommand) error {
	if s.logFormat() < fsm.AclFormat {
		return nil // an older cluster has no such record
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if s.isLeader() {
		_, err := s.applyAcl(c)
		return err
	}
	_, addr, err := s.waitLeader(ctx)
	if err != nil {
		return err
	}
	conn, err := s.peers.get(addr)
	if err != nil {
		return err
	}
	_, err = clusterpb.NewPeerClient(conn).RecordAudit(ctx, &clusterpb.RecordAuditRequest{Record: c})
	return err
}

// applyAcl proposes one ACL command, stamped with the leader's clock,
// and answers its result (refusals as gRPC statuses).
func (s *Server) applyAcl(c *fsmpb.AclCommand) (fsm.AclResult, error) {
	c.UnixNanos = time.Now().UnixNano()
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_ACL, c)
	if err != nil {
		return fsm.AclResult{}, err
	}
	r, ok := resp.(fsm.AclResult)
	if !ok {
		return fsm.AclResult{}, s.statusErr(codes.Internal, "", fmt.Sprintf("ACL command answered %T", resp))
	}
	if r.Err != nil {
		if errors.Is(r.Err, fsm.ErrAclBootstrapped) {
			return r, s.statusErr(codes.FailedPrecondition, pb.ReasonAclBootstrapped, r.Err.Error())
		}
		return r, s.fsErr(r.Err)
	}
	return r, nil
}

// seedACL bootstraps the access control with Security.ACLBootstrapToken
// (the leader, once the log format allows it, while nobody has).
func (s *Server) seedACL(time.Time) {
	if s.fsm.ACL().Bootstrapped {
		return
	}
	tok, err := authz.ParseToken(s.cfg.Security.ACLBootstrapToken)
	if err != nil {
		return // Config.Validate refused it
	}
	h := tok.Hash()
	rec := &fsmpb.AclToken{Accessor: tok.Accessor, SecretSha256: h[:], User: authz.RoleAdmin, Description: "bootstrap token (--acl-bootstrap-token-file)", CreatedUnixNanos: time.Now().UnixNano(), CreatedBy: "member:" + s.cfg.ID}
	_, err = s.applyAcl(&fsmpb.AclCommand{Actor: "member:" + s.cfg.ID, Op: &fsmpb.AclCommand_Bootstrap{Bootstrap: &fsmpb.AclBootstrapOp{Token: rec}}})
	switch {
	case err == nil:
		s.log.Info("access control bootstrapped with the bootstrap token", "accessor", tok.Accessor)
	case s.fsm.ACL().Bootstrapped:
	default:
		s.log.Warn("bootstrapping the access control failed", "err", err)
	}
}
