package client

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// bearer sends a token with every call (Config.Token).
type bearer struct{ header string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{pb.MDAuthorization: b.header}, nil
}

// RequireTransportSecurity: a token never goes out in plaintext.
func (bearer) RequireTransportSecurity() bool { return true }

// LoadToken reads a bearer token from a file (the token on its first
// line; surrounding space ignored).
func LoadToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("logbook: token file: %w", err)
	}
	tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(tok), nil
}

// Acl is the access control API (coord acl): tokens, roles and the roles
// bound to users, held by the cluster. Every call but WhoAmI and the
// one-time Bootstrap needs the admin role.
type Acl struct{ c *Client }

// Acl returns the access control API.
func (c *Client) Acl() *Acl { return &Acl{c: c} }

// Token is a bearer token as the cluster lists it (never its secret).
type Token struct {
	Accessor    string
	User        string
	Description string
	Created     time.Time
	// Expires is zero for a token that never expires.
	Expires   time.Time
	CreatedBy string
	// Expired by the answering member's clock.
	Expired bool
}

// NewToken is a token just created: Secret ("lbt_...") is shown once.
type NewToken struct {
	Token
	Secret string
	Index  uint64
}

// Grant is one permission of a role: Level "read", "write" or "admin" on
// Scope "all", "journal" or "fs", limited to Prefixes (event-type or path
// prefixes) when there are any.
type Grant struct {
	Level    string
	Scope    string
	Prefixes []string
}

// Role is a named list of grants; Users are bound to it.
type Role struct {
	Name    string
	Grants  []Grant
	Builtin bool
	Users   []string
}

// Identity is who the cluster takes the caller for (WhoAmI).
type Identity struct {
	Name string
	// Kind is "certificate" or "token".
	Kind            string
	CertificateRole string
	Roles           []string
	Grants          []Grant
	// Enforced: the answering member enforces ACLs (--acl-enabled).
	Enforced     bool
	Bootstrapped bool
}

func tokenOf(t *pb.AclTokenInfo) Token {
	out := Token{Accessor: t.Accessor, User: t.User, Description: t.Description, Created: time.Unix(0, t.CreatedUnixNanos), CreatedBy: t.CreatedBy, Expired: t.Expired}
	if t.ExpiresUnixNanos != 0 {
		out.Expires = time.Unix(0, t.ExpiresUnixNanos)
	}
	return out
}

var levelNames = map[pb.Access]string{pb.Access_ACCESS_READ: "read", pb.Access_ACCESS_WRITE: "write", pb.Access_ACCESS_ADMIN: "admin"}
var scopeNames = map[pb.AclScope]string{pb.AclScope_ACL_SCOPE_ALL: "all", pb.AclScope_ACL_SCOPE_JOURNAL: "journal", pb.AclScope_ACL_SCOPE_FS: "fs"}

func grantsOf(gs []*pb.AclGrant) []Grant {
	out := make([]Grant, 0, len(gs))
	for _, g := range gs {
		out = append(out, Grant{Level: levelNames[g.Level], Scope: scopeNames[g.Scope], Prefixes: g.Prefixes})
	}
	return out
}

// ParseGrant reads a grant written as LEVEL[:SCOPE[:PREFIX,PREFIX...]]:
// "read", "write:journal:app.,fs.", "admin:fs:/data".
func ParseGrant(s string) (Grant, error) {
	parts := strings.SplitN(s, ":", 3)
	g := Grant{Level: parts[0], Scope: "all"}
	if len(parts) > 1 {
		g.Scope = parts[1]
	}
	if len(parts) > 2 && parts[2] != "" {
		g.Prefixes = strings.Split(parts[2], ",")
	}
	if _, err := g.proto(); err != nil {
		return Grant{}, err
	}
	return g, nil
}

func (g Grant) proto() (*pb.AclGrant, error) {
	out := &pb.AclGrant{Prefixes: g.Prefixes}
	for k, v := range levelNames {
		if v == g.Level {
			out.Level = k
		}
	}
	for k, v := range scopeNames {
		if v == g.Scope {
			out.Scope = k
		}
	}
	if out.Level == pb.Access_ACCESS_UNSPECIFIED {
		return nil, fmt.Errorf("%w: grant level %q: want read, write or admin", ErrInvalidArgument, g.Level)
	}
	if out.Scope == pb.AclScope_ACL_SCOPE_UNSPECIFIED {
		return nil, fmt.Errorf("%w: grant scope %q: want all, journal or fs", ErrInvalidArgument, g.Scope)
	}
	return out, nil
}

func (a *Acl) call(ctx context.Context, leader bool, fn func(ctx context.Context, c pb.AclClient) error) error {
	return a.c.do(ctx, leader, func(ctx context.Context, cc *grpc.ClientConn) error { return fn(ctx, pb.NewAclClient(cc)) })
}

func newToken(resp *pb.AclTokenSecret) NewToken {
	return NewToken{Token: tokenOf(resp.Token), Secret: resp.Secret, Index: resp.Index}
}

// Bootstrap creates the first token, for user (default "admin"), and
// binds that user to the admin role; once per cluster (FailedPrecondition
// ALREADY_BOOTSTRAPPED after). It needs a client certificate of the
// cluster CA.
func (a *Acl) Bootstrap(ctx context.Context, user, description string) (NewToken, error) {
	var resp *pb.AclTokenSecret
	err := a.call(ctx, true, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = c.Bootstrap(ctx, &pb.AclBootstrapRequest{User: user, Description: description})
		return err
	})
	if err != nil {
		return NewToken{}, err
	}
	return newToken(resp), nil
}

// CreateToken creates a token for user; ttl 0 never expires.
func (a *Acl) CreateToken(ctx context.Context, user, description string, ttl time.Duration) (NewToken, error) {
	if ttl < 0 {
		return NewToken{}, fmt.Errorf("%w: negative ttl", ErrInvalidArgument)
	}
	var resp *pb.AclTokenSecret
	err := a.call(ctx, true, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = c.CreateToken(ctx, &pb.CreateTokenRequest{User: user, Description: description, TtlSeconds: uint64(ttl / time.Second)})
		return err
	})
	if err != nil {
		return NewToken{}, err
	}
	return newToken(resp), nil
}

// Tokens lists the tokens (of user, or all with ""), and whether the
// cluster is bootstrapped and the answering member enforces ACLs.
func (a *Acl) Tokens(ctx context.Context, user string) (tokens []Token, bootstrapped, enforced bool, err error) {
	var resp *pb.ListTokensResponse
	err = a.call(ctx, false, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = c.ListTokens(ctx, &pb.ListTokensRequest{User: user})
		return err
	})
	if err != nil {
		return nil, false, false, err
	}
	for _, t := range resp.Tokens {
		tokens = append(tokens, tokenOf(t))
	}
	return tokens, resp.Bootstrapped, resp.Enforced, nil
}

// RevokeToken revokes a token by its accessor; it returns the index from
// which every member refuses it once applied.
func (a *Acl) RevokeToken(ctx context.Context, accessor string) (uint64, error) {
	return a.change(ctx, func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error) {
		return c.RevokeToken(ctx, &pb.RevokeTokenRequest{Accessor: accessor})
	})
}

// PutRole creates or replaces a role (not reader, writer or admin).
func (a *Acl) PutRole(ctx context.Context, name string, grants []Grant) (uint64, error) {
	r := &pb.AclRole{Name: name}
	for _, g := range grants {
		pg, err := g.proto()
		if err != nil {
			return 0, err
		}
		r.Grants = append(r.Grants, pg)
	}
	return a.change(ctx, func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error) {
		return c.PutRole(ctx, &pb.PutRoleRequest{Role: r})
	})
}

// DeleteRole deletes a role bound to nobody.
func (a *Acl) DeleteRole(ctx context.Context, name string) (uint64, error) {
	return a.change(ctx, func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error) {
		return c.DeleteRole(ctx, &pb.DeleteRoleRequest{Name: name})
	})
}

// Bind binds user to role (binding it again changes nothing).
func (a *Acl) Bind(ctx context.Context, user, role string) (uint64, error) {
	return a.change(ctx, func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error) {
		return c.Bind(ctx, &pb.BindRequest{User: user, Role: role})
	})
}

// Unbind removes role from user.
func (a *Acl) Unbind(ctx context.Context, user, role string) (uint64, error) {
	return a.change(ctx, func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error) {
		return c.Unbind(ctx, &pb.BindRequest{User: user, Role: role})
	})
}

func (a *Acl) change(ctx context.Context, fn func(ctx context.Context, c pb.AclClient) (*pb.AclChangeResponse, error)) (uint64, error) {
	var resp *pb.AclChangeResponse
	err := a.call(ctx, true, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = fn(ctx, c)
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// Roles lists every role (the built-in ones first) with its users, and
// every user's roles.
func (a *Acl) Roles(ctx context.Context) ([]Role, map[string][]string, error) {
	var resp *pb.ListRolesResponse
	err := a.call(ctx, false, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = c.ListRoles(ctx, &pb.ListRolesRequest{})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	roles := make([]Role, 0, len(resp.Roles))
	for _, r := range resp.Roles {
		roles = append(roles, Role{Name: r.Name, Grants: grantsOf(r.Grants), Builtin: r.Builtin, Users: r.Users})
	}
	bindings := make(map[string][]string, len(resp.Bindings))
	for _, b := range resp.Bindings {
		bindings[b.User] = b.Roles
	}
	return roles, bindings, nil
}

// WhoAmI is who the cluster takes this client for, and what its roles
// grant.
func (a *Acl) WhoAmI(ctx context.Context) (Identity, error) {
	var resp *pb.WhoAmIResponse
	err := a.call(ctx, false, func(ctx context.Context, c pb.AclClient) (err error) {
		resp, err = c.WhoAmI(ctx, &pb.WhoAmIRequest{})
		return err
	})
	if err != nil {
		return Identity{}, err
	}
	return Identity{Name: resp.Name, Kind: resp.Kind, CertificateRole: resp.CertificateRole, Roles: resp.Roles, Grants: grantsOf(resp.Grants), Enforced: resp.Enforced, Bootstrapped: resp.Bootstrapped}, nil
}
