package fsm

import (
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
	"google.golang.org/protobuf/proto"
)

// AclFormat is the first log format whose entries may carry
// COMMAND_TYPE_ACL, which a build before it cannot apply: the cluster
// holds its access control — roles, the roles bound to each user, and
// bearer tokens as SHA-256 hashes of their secrets — and every member
// authorizes calls by the same replicated rules (internal/authz).
const AclFormat = 12

// Bounds of the replicated access control.
const (
	MaxAclTokens           = 10_000
	MaxAclUsers            = 10_000
	MaxAclDescriptionBytes = 256
	// MaxAclDeniedField bounds each string of a denied-call audit record.
	MaxAclDeniedField = 512
)

// The audit events of the access control, one per accepted AclCommand.
// Their payload is the command with token hashes cleared.
const (
	EventAclBootstrap    = "logbook.acl.bootstrap"
	EventAclRolePut      = "logbook.acl.role_put"
	EventAclRoleDeleted  = "logbook.acl.role_deleted"
	EventAclBound        = "logbook.acl.bound"
	EventAclUnbound      = "logbook.acl.unbound"
	EventAclTokenCreated = "logbook.acl.token_created"
	EventAclTokenRevoked = "logbook.acl.token_revoked"
	EventAclDenied       = "logbook.acl.denied"
	// EventAdmin records an admin operation and who did it.
	EventAdmin = "logbook.admin"
)

// Refusals of an AclCommand (a refusal changes nothing).
var (
	ErrAclFormat       = newKindError(KindFailedPrecondition, "fsm: access control needs log format 12 (every voter upgraded)")
	ErrAclBootstrapped = newKindError(KindFailedPrecondition, "fsm: the access control is already bootstrapped")
	ErrAclInvalid      = newKindError(KindInvalidArgument, "fsm: invalid access control change")
	ErrAclNotFound     = newKindError(KindNotFound, "fsm: not in the access control")
	ErrAclExists       = newKindError(KindAlreadyExists, "fsm: already in the access control")
	ErrAclInUse        = newKindError(KindFailedPrecondition, "fsm: the role is bound to users")
	ErrAclFull         = newKindError(KindResourceExhausted, "fsm: the access control is full")
)

// AclResult is the outcome of one AclCommand.
type AclResult struct {
	Index uint64
	// Seq is the audit event's seq (0 when Unchanged or refused).
	Seq uint64
	// Unchanged: nothing to do (a binding already there).
	Unchanged bool
	Err       error
}

// aclTable is the replicated access control. Records are never modified
// once stored (a change stores new ones), so an ACL view shares them.
type aclTable struct {
	bootstrapped bool
	roles        map[string]*pb.AclRole // not the built-in ones
	bindings     map[string][]string    // user -> role names, in bind order
	tokens       map[string]*pb.AclToken
	blockKeys    []*pb.AclBlockKey // ids rising (acl_blockkeys.go)
	// gen counts changes (derived, not replicated): FSM republishes its
	// ACL view when it moves.
	gen uint64
}

func newAclTable() aclTable {
	return aclTable{roles: map[string]*pb.AclRole{}, bindings: map[string][]string{}, tokens: map[string]*pb.AclToken{}}
}

func (t *aclTable) empty() bool {
	return !t.bootstrapped && len(t.roles) == 0 && len(t.bindings) == 0 && len(t.tokens) == 0 && len(t.blockKeys) == 0
}

// applyAcl applies one AclCommand at index: a refusal changes nothing; an
// accepted change appends its audit event.
func (s *State) applyAcl(index uint64, c *pb.AclCommand) (AclResult, error) {
	refuse := func(err error) (AclResult, error) { return AclResult{Index: index, Err: err}, nil }
	t := &s.acl
	var typ string
	switch x := c.Op.(type) {
	case *pb.AclCommand_Bootstrap:
		tok := x.Bootstrap.GetToken()
		if t.bootstrapped {
			return refuse(ErrAclBootstrapped)
		}
		if err := validAclToken(tok); err != nil {
			return refuse(err)
		}
		if err := t.canAddToken(tok.Accessor); err != nil {
			return refuse(err)
		}
		if err := t.canBind(tok.User, authz.RoleAdmin); err != nil && err != errAlreadyBound {
			return refuse(err)
		}
		t.bootstrapped = true
		t.tokens[tok.Accessor] = proto.CloneOf(tok)
		t.bind(tok.User, authz.RoleAdmin)
		typ = EventAclBootstrap
	case *pb.AclCommand_PutRole:
		r := x.PutRole.GetRole()
		if r == nil {
			return refuse(errorf(ErrAclInvalid, "put role: no role"))
		}
		if err := authz.ValidateRole(RoleOf(r)); err != nil {
			return refuse(errorf(ErrAclInvalid, "%v", err))
		}
		if builtinRole(r.Name) {
			return refuse(errorf(ErrAclInvalid, "role %q is built in", r.Name))
		}
		if _, ok := t.roles[r.Name]; !ok && len(t.roles) >= authz.MaxRoles-3 {
			return refuse(errorf(ErrAclFull, "%d roles", len(t.roles)))
		}
		t.roles[r.Name] = proto.CloneOf(r)
		typ = EventAclRolePut
	case *pb.AclCommand_DeleteRole:
		name := x.DeleteRole.GetName()
		if builtinRole(name) {
			return refuse(errorf(ErrAclInvalid, "role %q is built in", name))
		}
		if _, ok := t.roles[name]; !ok {
			return refuse(errorf(ErrAclNotFound, "no role %q", name))
		}
		if users := t.usersOf(name); len(users) > 0 {
			return refuse(errorf(ErrAclInUse, "role %q is bound to %d users (%q first): unbind them first", name, len(users), users[0]))
		}
		delete(t.roles, name)
		typ = EventAclRoleDeleted
	case *pb.AclCommand_Bind:
		user, role := x.Bind.GetUser(), x.Bind.GetRole()
		switch err := t.canBind(user, role); err {
		case nil:
		case errAlreadyBound:
			return AclResult{Index: index, Unchanged: true}, nil
		default:
			return refuse(err)
		}
		t.bind(user, role)
		typ = EventAclBound
	case *pb.AclCommand_Unbind:
		user, role := x.Unbind.GetUser(), x.Unbind.GetRole()
		roles := t.bindings[user]
		i := slices.Index(roles, role)
		if i < 0 {
			return refuse(errorf(ErrAclNotFound, "user %q is not bound to role %q", user, role))
		}
		if rest := slices.Delete(slices.Clone(roles), i, i+1); len(rest) > 0 {
			t.bindings[user] = rest
		} else {
			delete(t.bindings, user)
		}
		typ = EventAclUnbound
	case *pb.AclCommand_CreateToken:
		tok := x.CreateToken.GetToken()
		if err := validAclToken(tok); err != nil {
			return refuse(err)
		}
		if err := t.canAddToken(tok.Accessor); err != nil {
			return refuse(err)
		}
		t.tokens[tok.Accessor] = proto.CloneOf(tok)
		typ = EventAclTokenCreated
	case *pb.AclCommand_RevokeToken:
		acc := x.RevokeToken.GetAccessor()
		if _, ok := t.tokens[acc]; !ok {
			return refuse(errorf(ErrAclNotFound, "no token %q", acc))
		}
		delete(t.tokens, acc)
		typ = EventAclTokenRevoked
	case *pb.AclCommand_Denied:
		d := x.Denied
		for _, f := range []string{d.GetIdentity(), d.GetMethod(), d.GetReason(), d.GetMember()} {
			if len(f) > MaxAclDeniedField || !utf8.ValidString(f) {
				return refuse(errorf(ErrAclInvalid, "denied call: a field of %d bytes, at most %d of UTF-8", len(f), MaxAclDeniedField))
			}
		}
		typ = EventAclDenied
	case *pb.AclCommand_Admin:
		a := x.Admin
		for _, f := range []string{c.Actor, a.GetMethod(), a.GetRequest(), a.GetMember()} {
			if len(f) > MaxAclDeniedField*2 || !utf8.ValidString(f) {
				return refuse(errorf(ErrAclInvalid, "admin record: a field of %d bytes, at most %d of UTF-8", len(f), MaxAclDeniedField*2))
			}
		}
		typ = EventAdmin
	case *pb.AclCommand_RollBlockKey:
		// No journal event: the key is secret and a roll is routine.
		if err := t.rollBlockKey(x.RollBlockKey.GetKey(), c.UnixNanos); err != nil {
			return refuse(err)
		}
		t.gen++
		return AclResult{Index: index}, nil
	default:
		return refuse(errorf(ErrAclInvalid, "empty op"))
	}
	if typ != EventAclDenied && typ != EventAdmin {
		t.gen++
	}
	ev := proto.CloneOf(c)
	switch x := ev.Op.(type) {
	case *pb.AclCommand_Bootstrap:
		x.Bootstrap.Token.SecretSha256 = nil
	case *pb.AclCommand_CreateToken:
		x.CreateToken.Token.SecretSha256 = nil
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		return AclResult{}, fmt.Errorf("fsm: encode ACL audit event at index %d: %w", index, err)
	}
	seq := s.nextSeq
	s.addEvent(typ, payload, "", 0, index)
	if s.ns.auditFrom == 0 {
		s.ns.auditFrom = seq
	}
	return AclResult{Index: index, Seq: seq}, nil
}

// errAlreadyBound: canBind's answer for a binding that exists.
var errAlreadyBound = errorf(ErrAclExists, "already bound")

func (t *aclTable) canBind(user, role string) error {
	if err := authz.ValidateUserName(user); err != nil {
		return errorf(ErrAclInvalid, "%v", err)
	}
	if _, ok := t.roles[role]; !ok && !builtinRole(role) {
		return errorf(ErrAclNotFound, "no role %q", role)
	}
	roles, ok := t.bindings[user]
	switch {
	case slices.Contains(roles, role):
		return errAlreadyBound
	case len(roles) >= authz.MaxRolesPerUser:
		return errorf(ErrAclFull, "user %q is bound to %d roles, at most %d", user, len(roles), authz.MaxRolesPerUser)
	case !ok && len(t.bindings) >= MaxAclUsers:
		return errorf(ErrAclFull, "%d users bound, at most %d", len(t.bindings), MaxAclUsers)
	}
	return nil
}

// bind adds a binding canBind allowed (a new slice: views share the old).
func (t *aclTable) bind(user, role string) {
	t.bindings[user] = append(slices.Clone(t.bindings[user]), role)
}

func (t *aclTable) canAddToken(accessor string) error {
	if _, dup := t.tokens[accessor]; dup {
		return errorf(ErrAclExists, "token %q", accessor)
	}
	if len(t.tokens) >= MaxAclTokens {
		return errorf(ErrAclFull, "%d tokens, at most %d: revoke some", len(t.tokens), MaxAclTokens)
	}
	return nil
}

// usersOf is the users bound to role, sorted.
func (t *aclTable) usersOf(role string) []string {
	var out []string
	for u, roles := range t.bindings {
		if slices.Contains(roles, role) {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

func validAclToken(tok *pb.AclToken) error {
	switch {
	case tok == nil:
		return errorf(ErrAclInvalid, "no token")
	case authz.ValidAccessor(tok.Accessor) != nil:
		return errorf(ErrAclInvalid, "%v", authz.ValidAccessor(tok.Accessor))
	case len(tok.SecretSha256) != 32:
		return errorf(ErrAclInvalid, "token %s: a secret hash of %d bytes, want 32", tok.Accessor, len(tok.SecretSha256))
	case authz.ValidateUserName(tok.User) != nil:
		return errorf(ErrAclInvalid, "token %s: %v", tok.Accessor, authz.ValidateUserName(tok.User))
	case len(tok.Description) > MaxAclDescriptionBytes || !utf8.ValidString(tok.Description):
		return errorf(ErrAclInvalid, "token %s: a description of %d bytes, at most %d of UTF-8", tok.Accessor, len(tok.Description), MaxAclDescriptionBytes)
	case len(tok.CreatedBy) > MaxAclDeniedField || !utf8.ValidString(tok.CreatedBy):
		return errorf(ErrAclInvalid, "token %s: a creator of %d bytes", tok.Accessor, len(tok.CreatedBy))
	case tok.ExpiresUnixNanos < 0:
		return errorf(ErrAclInvalid, "token %s: expiry before 1970", tok.Accessor)
	}
	return nil
}

func builtinRole(name string) bool {
	return name == authz.RoleReader || name == authz.RoleWriter || name == authz.RoleAdmin
}

// RoleOf converts a replicated role to internal/authz's.
func RoleOf(r *pb.AclRole) authz.Role {
	out := authz.Role{Name: r.GetName(), Grants: make([]authz.Grant, len(r.GetGrants()))}
	for i, g := range r.GetGrants() {
		lvl, sc := authz.Access(255), authz.Scope(255) // out of range: refused by validation
		if g.Level < 255 {
			lvl = authz.Access(g.Level)
		}
		if g.Scope < 255 {
			sc = authz.Scope(g.Scope)
		}
		out.Grants[i] = authz.Grant{Level: lvl, Scope: sc, Prefixes: slices.Clone(g.Prefixes)}
	}
	return out
}

// AclRoleOf converts an internal/authz role to its replicated form.
func AclRoleOf(r authz.Role) *pb.AclRole {
	out := &pb.AclRole{Name: r.Name}
	for _, g := range r.Grants {
		out.Grants = append(out.Grants, &pb.AclGrant{Level: uint32(g.Level), Scope: uint32(g.Scope), Prefixes: slices.Clone(g.Prefixes)})
	}
	return out
}

// ACL is an immutable view of the access control at one applied index,
// with its Policy built: share it freely; FSM.ACL publishes a new one
// after every change.
type ACL struct {
	// Bootstrapped: the one-time bootstrap happened.
	Bootstrapped bool
	// Policy decides calls (internal/authz).
	Policy authz.Policy
	// Err is why the Policy could not be built (a bug: the state machine
	// accepts no binding it could not build); the Policy is then empty
	// and refuses every user call.
	Err       error
	tokens    map[string]*pb.AclToken
	roles     map[string]*pb.AclRole
	bindings  map[string][]string
	blockKeys []BlockKey
}

// Token is the token of that accessor. The record is shared: do not
// modify it.
func (a *ACL) Token(accessor string) (*pb.AclToken, bool) {
	t, ok := a.tokens[accessor]
	return t, ok
}

// Tokens is every token, by accessor.
func (a *ACL) Tokens() []*pb.AclToken {
	out := make([]*pb.AclToken, 0, len(a.tokens))
	for _, t := range a.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Accessor < out[j].Accessor })
	return out
}

// Roles is every role that is not built in, by name.
func (a *ACL) Roles() []*pb.AclRole {
	out := make([]*pb.AclRole, 0, len(a.roles))
	for _, r := range a.roles {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Bindings is every user's roles, by user.
func (a *ACL) Bindings() []*pb.AclBinding {
	out := make([]*pb.AclBinding, 0, len(a.bindings))
	for u, roles := range a.bindings {
		out = append(out, &pb.AclBinding{User: u, Roles: slices.Clone(roles)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out
}

// RolesOf is the roles bound to user, in bind order.
func (a *ACL) RolesOf(user string) []string { return slices.Clone(a.bindings[user]) }

var emptyACL = &ACL{}

// ACL builds the view of the access control as it is now.
func (s *State) ACL() *ACL {
	t := &s.acl
	a := &ACL{Bootstrapped: t.bootstrapped, tokens: make(map[string]*pb.AclToken, len(t.tokens)), roles: make(map[string]*pb.AclRole, len(t.roles)), bindings: make(map[string][]string, len(t.bindings))}
	roles := make([]authz.Role, 0, len(t.roles))
	for name, r := range t.roles {
		a.roles[name] = r
		roles = append(roles, RoleOf(r))
	}
	for acc, tok := range t.tokens {
		a.tokens[acc] = tok
	}
	for u, rs := range t.bindings {
		a.bindings[u] = rs
	}
	a.blockKeys = blockKeyView(t.blockKeys)
	a.Policy, a.Err = authz.NewPolicy(roles, a.bindings)
	return a
}

// aclRecord is the snapshot record of the access control; nil when it is
// empty (a state that never had any writes snapshots as before).
func (t *aclTable) record() *pb.AclState {
	if t.empty() {
		return nil
	}
	st := &pb.AclState{Bootstrapped: t.bootstrapped}
	for _, r := range t.roles {
		st.Roles = append(st.Roles, r)
	}
	sort.Slice(st.Roles, func(i, j int) bool { return st.Roles[i].Name < st.Roles[j].Name })
	for u, roles := range t.bindings {
		st.Bindings = append(st.Bindings, &pb.AclBinding{User: u, Roles: roles})
	}
	sort.Slice(st.Bindings, func(i, j int) bool { return st.Bindings[i].User < st.Bindings[j].User })
	for _, tok := range t.tokens {
		st.Tokens = append(st.Tokens, tok)
	}
	sort.Slice(st.Tokens, func(i, j int) bool { return st.Tokens[i].Accessor < st.Tokens[j].Accessor })
	st.BlockKeys = t.blockKeys
	return st
}

// restoreAcl rebuilds the table from a snapshot record, checking it as
// the commands that built it were checked.
func restoreAcl(st *pb.AclState) (aclTable, error) {
	t := newAclTable()
	t.bootstrapped = st.Bootstrapped
	bad := func(format string, args ...any) (aclTable, error) {
		return aclTable{}, fmt.Errorf("%w: access control: "+format, append([]any{ErrSnapshotCorrupt}, args...)...)
	}
	if len(st.Roles) > authz.MaxRoles-3 || len(st.Bindings) > MaxAclUsers || len(st.Tokens) > MaxAclTokens {
		return bad("%d roles, %d users, %d tokens", len(st.Roles), len(st.Bindings), len(st.Tokens))
	}
	for _, r := range st.Roles {
		if err := authz.ValidateRole(RoleOf(r)); err != nil || builtinRole(r.Name) {
			return bad("role %q: %v", r.Name, err)
		}
		if _, dup := t.roles[r.Name]; dup {
			return bad("role %q twice", r.Name)
		}
		t.roles[r.Name] = r
	}
	for _, b := range st.Bindings {
		if _, dup := t.bindings[b.User]; dup || len(b.Roles) == 0 {
			return bad("user %q bound twice or to nothing", b.User)
		}
		for _, role := range b.Roles {
			if err := t.canBind(b.User, role); err != nil {
				return bad("user %q, role %q: %v", b.User, role, err)
			}
			t.bind(b.User, role)
		}
	}
	for _, tok := range st.Tokens {
		if err := validAclToken(tok); err != nil {
			return bad("%v", err)
		}
		if err := t.canAddToken(tok.Accessor); err != nil {
			return bad("%v", err)
		}
		t.tokens[tok.Accessor] = tok
	}
	keys, err := restoreBlockKeys(st.BlockKeys)
	if err != nil {
		return bad("%v", err)
	}
	t.blockKeys = keys
	return t, nil
}
