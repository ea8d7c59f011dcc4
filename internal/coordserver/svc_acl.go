package coordserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc/codes"
)

// aclService is the Acl service: tokens, roles and bindings held by the
// cluster (fsm/acl.go). Changes are leader-only (forwarded), lists read
// the member's applied state.
type aclService struct {
	pb.UnimplementedAclServer
	s *Server
}

// MaxTokenTTL bounds a token's lifetime.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

func (a *aclService) Bootstrap(ctx context.Context, req *pb.AclBootstrapRequest) (*pb.AclTokenSecret, error) {
	user := req.GetUser()
	if user == "" {
		user = authz.RoleAdmin
	}
	tok, rec, err := a.newToken(ctx, user, req.GetDescription(), 0)
	if err != nil {
		return nil, err
	}
	if a.s.fsm.ACL().Bootstrapped {
		return nil, a.s.statusErr(codes.FailedPrecondition, pb.ReasonAclBootstrapped, "the access control is already bootstrapped: an admin creates tokens with coord acl token create")
	}
	r, err := a.s.applyAcl(&fsmpb.AclCommand{Actor: actorOf(ctx), Op: &fsmpb.AclCommand_Bootstrap{Bootstrap: &fsmpb.AclBootstrapOp{Token: rec}}})
	if err != nil {
		return nil, err
	}
	a.s.log.Info("access control bootstrapped", "user", user, "accessor", rec.Accessor, "by", actorOf(ctx))
	return &pb.AclTokenSecret{Token: tokenInfo(rec, time.Now()), Secret: tok.String(), Index: r.Index}, nil
}

func (a *aclService) CreateToken(ctx context.Context, req *pb.CreateTokenRequest) (*pb.AclTokenSecret, error) {
	if req.GetTtlSeconds() > uint64(MaxTokenTTL/time.Second) {
		return nil, a.s.badRequest(fmt.Sprintf("create token: ttl %d s, at most %d (10 years)", req.GetTtlSeconds(), uint64(MaxTokenTTL/time.Second)))
	}
	tok, rec, err := a.newToken(ctx, req.GetUser(), req.GetDescription(), time.Duration(req.GetTtlSeconds())*time.Second)
	if err != nil {
		return nil, err
	}
	r, err := a.s.applyAcl(&fsmpb.AclCommand{Actor: actorOf(ctx), Op: &fsmpb.AclCommand_CreateToken{CreateToken: &fsmpb.AclCreateTokenOp{Token: rec}}})
	if err != nil {
		return nil, err
	}
	a.s.log.Info("token created", "user", rec.User, "accessor", rec.Accessor, "by", actorOf(ctx))
	return &pb.AclTokenSecret{Token: tokenInfo(rec, time.Now()), Secret: tok.String(), Index: r.Index}, nil
}

// newToken makes a token for user; the state machine keeps its record
// (the secret's hash), the caller alone gets the secret.
func (a *aclService) newToken(ctx context.Context, user, desc string, ttl time.Duration) (authz.Token, *fsmpb.AclToken, error) {
	if err := a.s.needFormat(fsm.AclFormat, "access control needs"); err != nil {
		return authz.Token{}, nil, err
	}
	if err := authz.ValidateUserName(user); err != nil {
		return authz.Token{}, nil, a.s.badRequest(fmt.Sprintf("token: %v", err))
	}
	if len(desc) > fsm.MaxAclDescriptionBytes {
		return authz.Token{}, nil, a.s.badRequest(fmt.Sprintf("token: a description of %d bytes, at most %d", len(desc), fsm.MaxAclDescriptionBytes))
	}
	tok, err := authz.NewToken()
	if err != nil {
		return authz.Token{}, nil, a.s.statusErr(codes.Internal, "", fmt.Sprintf("token: %v", err))
	}
	now := time.Now()
	h := tok.Hash()
	rec := &fsmpb.AclToken{Accessor: tok.Accessor, SecretSha256: h[:], User: user, Description: desc, CreatedUnixNanos: now.UnixNano(), CreatedBy: clip(actorOf(ctx))}
	if ttl > 0 {
		rec.ExpiresUnixNanos = now.Add(ttl).UnixNano()
	}
	return tok, rec, nil
}

func tokenInfo(t *fsmpb.AclToken, now time.Time) *pb.AclTokenInfo {
	return &pb.AclTokenInfo{
		Accessor: t.Accessor, User: t.User, Description: t.Description, CreatedUnixNanos: t.CreatedUnixNanos,
		ExpiresUnixNanos: t.ExpiresUnixNanos, CreatedBy: t.CreatedBy,
		Expired: t.ExpiresUnixNanos != 0 && now.UnixNano() >= t.ExpiresUnixNanos,
	}
}

func (a *aclService) ListTokens(ctx context.Context, req *pb.ListTokensRequest) (*pb.ListTokensResponse, error) {
	acl, now := a.s.fsm.ACL(), time.Now()
	out := &pb.ListTokensResponse{Bootstrapped: acl.Bootstrapped, Enforced: a.s.cfg.Security.ACL}
	for _, t := range acl.Tokens() {
		if req.GetUser() == "" || t.User == req.GetUser() {
			out.Tokens = append(out.Tokens, tokenInfo(t, now))
		}
	}
	return out, nil
}

func (a *aclService) RevokeToken(ctx context.Context, req *pb.RevokeTokenRequest) (*pb.AclChangeResponse, error) {
	if err := authz.ValidAccessor(req.GetAccessor()); err != nil {
		return nil, a.s.badRequest(fmt.Sprintf("revoke token: %v", err))
	}
	return a.change(ctx, "token revoked", &fsmpb.AclCommand{Op: &fsmpb.AclCommand_RevokeToken{RevokeToken: &fsmpb.AclRevokeTokenOp{Accessor: req.GetAccessor()}}})
}

func (a *aclService) PutRole(ctx context.Context, req *pb.PutRoleRequest) (*pb.AclChangeResponse, error) {
	r := req.GetRole()
	if r == nil {
		return nil, a.s.badRequest("put role: no role")
	}
	role := &fsmpb.AclRole{Name: r.Name}
	for _, g := range r.Grants {
		role.Grants = append(role.Grants, &fsmpb.AclGrant{Level: uint32(g.Level), Scope: uint32(g.Scope), Prefixes: g.Prefixes})
	}
	if err := authz.ValidateRole(fsm.RoleOf(role)); err != nil {
		return nil, a.s.badRequest(fmt.Sprintf("put role: %v", err))
	}
	return a.change(ctx, "role put", &fsmpb.AclCommand{Op: &fsmpb.AclCommand_PutRole{PutRole: &fsmpb.AclPutRoleOp{Role: role}}})
}

func (a *aclService) DeleteRole(ctx context.Context, req *pb.DeleteRoleRequest) (*pb.AclChangeResponse, error) {
	return a.change(ctx, "role deleted", &fsmpb.AclCommand{Op: &fsmpb.AclCommand_DeleteRole{DeleteRole: &fsmpb.AclDeleteRoleOp{Name: req.GetName()}}})
}

func (a *aclService) Bind(ctx context.Context, req *pb.BindRequest) (*pb.AclChangeResponse, error) {
	return a.change(ctx, "role bound", &fsmpb.AclCommand{Op: &fsmpb.AclCommand_Bind{Bind: &fsmpb.AclBindOp{User: req.GetUser(), Role: req.GetRole()}}})
}

func (a *aclService) Unbind(ctx context.Context, req *pb.BindRequest) (*pb.AclChangeResponse, error) {
	return a.change(ctx, "role unbound", &fsmpb.AclCommand{Op: &fsmpb.AclCommand_Unbind{Unbind: &fsmpb.AclUnbindOp{User: req.GetUser(), Role: req.GetRole()}}})
}

// change proposes one ACL change by the caller of ctx.
func (a *aclService) change(ctx context.Context, what string, c *fsmpb.AclCommand) (*pb.AclChangeResponse, error) {
	if err := a.s.needFormat(fsm.AclFormat, "access control needs"); err != nil {
		return nil, err
	}
	c.Actor = clip(actorOf(ctx))
	r, err := a.s.applyAcl(c)
	if err != nil {
		return nil, err
	}
	if !r.Unchanged {
		a.s.log.Info("access control changed", "change", what, "by", c.Actor, "index", r.Index)
	}
	return &pb.AclChangeResponse{Index: r.Index, Unchanged: r.Unchanged}, nil
}

func (a *aclService) ListRoles(ctx context.Context, req *pb.ListRolesRequest) (*pb.ListRolesResponse, error) {
	acl := a.s.fsm.ACL()
	bindings := acl.Bindings()
	out := &pb.ListRolesResponse{Bootstrapped: acl.Bootstrapped}
	add := func(r authz.Role, builtin bool) {
		pr := publicRole(r)
		pr.Builtin = builtin
		for _, b := range bindings {
			if slices.Contains(b.Roles, r.Name) {
				pr.Users = append(pr.Users, b.User)
			}
		}
		out.Roles = append(out.Roles, pr)
	}
	for _, r := range authz.BuiltinRoles() {
		add(r, true)
	}
	for _, r := range acl.Roles() {
		add(fsm.RoleOf(r), false)
	}
	for _, b := range bindings {
		out.Bindings = append(out.Bindings, &pb.AclBinding{User: b.User, Roles: b.Roles})
	}
	return out, nil
}

func publicRole(r authz.Role) *pb.AclRole {
	out := &pb.AclRole{Name: r.Name}
	for _, g := range r.Grants {
		out.Grants = append(out.Grants, &pb.AclGrant{Level: pb.Access(g.Level), Scope: pb.AclScope(g.Scope), Prefixes: slices.Clone(g.Prefixes)})
	}
	return out
}

func (a *aclService) WhoAmI(ctx context.Context, req *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	id, ok := ctx.Value(callerKey{}).(authz.Identity)
	if !ok {
		var err error
		if id, err = a.s.identify(ctx, "/logbook.v1.Acl/WhoAmI"); err != nil {
			return nil, err
		}
	}
	acl := a.s.fsm.ACL()
	out := &pb.WhoAmIResponse{Name: id.Name, Kind: id.Kind.String(), Enforced: a.s.cfg.Security.ACL, Bootstrapped: acl.Bootstrapped}
	if id.Kind == authz.KindCertificate {
		out.CertificateRole = id.Role
	}
	out.Roles = acl.RolesOf(id.Name)
	for _, name := range out.Roles {
		if r, ok := acl.Policy.Role(name); ok {
			out.Grants = append(out.Grants, publicRole(r).Grants...)
		}
	}
	return out, nil
}

// RecordAudit journals an audit record another member made (leader
// only): a refused call or an admin operation, nothing else.
func (p *peerService) RecordAudit(ctx context.Context, req *clusterpb.RecordAuditRequest) (*clusterpb.RecordAuditResponse, error) {
	s := p.s
	if !s.isLeader() {
		return nil, s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
	}
	c := req.GetRecord()
	if c.GetDenied() == nil && c.GetAdmin() == nil {
		return nil, s.badRequest("record audit: a denied or admin record only")
	}
	r, err := s.applyAcl(c)
	if err != nil {
		return nil, err
	}
	return &clusterpb.RecordAuditResponse{Seq: r.Seq}, nil
}
