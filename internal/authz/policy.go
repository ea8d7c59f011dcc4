package authz

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of a policy.
const (
	MaxRoles        = 1024
	MaxUsers        = 100_000
	MaxRolesPerUser = 16
	// MaxUserNameBytes is the namespace's bound on client names
	// (fsm.MaxNameBytes).
	MaxUserNameBytes = 128
)

// Policy is who may do what: roles (the built-in ones and others) and the
// roles bound to each user. It is immutable once built, and a copy is a
// pointer's worth: share it, and replace it as a whole when roles or
// bindings change. The zero Policy binds nobody: every read, write and
// admin call is refused, the other classes are decided as usual.
type Policy struct {
	p *policy
}

type policy struct {
	// grants holds every grant of every role bound to a user, by user
	// name, in the order of the bindings: one map lookup and a scan per
	// call.
	grants map[string][]Grant
	roles  map[string]Role
}

// NewPolicy validates roles (ValidateRole; a built-in name or a name twice
// is refused) and bindings (user name to role names: valid user names, at
// most MaxRolesPerUser known roles each, none twice) and builds the
// Policy. It copies what it keeps: later changes to its arguments do not
// reach the Policy.
func NewPolicy(roles []Role, bindings map[string][]string) (Policy, error) {
	if len(roles) > MaxRoles {
		return Policy{}, invalidf("%d roles, at most %d", len(roles), MaxRoles)
	}
	if len(bindings) > MaxUsers {
		return Policy{}, invalidf("%d users, at most %d", len(bindings), MaxUsers)
	}
	p := &policy{grants: make(map[string][]Grant, len(bindings)), roles: make(map[string]Role, len(roles)+3)}
	for _, r := range BuiltinRoles() {
		p.roles[r.Name] = r
	}
	for _, r := range roles {
		if err := ValidateRole(r); err != nil {
			return Policy{}, err
		}
		if builtin(r.Name) {
			return Policy{}, invalidf("role %q is built in", r.Name)
		}
		if _, dup := p.roles[r.Name]; dup {
			return Policy{}, invalidf("role %q defined twice", r.Name)
		}
		p.roles[r.Name] = copyRole(r)
	}
	for user, names := range bindings {
		if err := ValidateUserName(user); err != nil {
			return Policy{}, err
		}
		if len(names) > MaxRolesPerUser {
			return Policy{}, invalidf("user %q bound to %d roles, at most %d", user, len(names), MaxRolesPerUser)
		}
		var gs []Grant
		for i, name := range names {
			r, ok := p.roles[name]
			if !ok {
				return Policy{}, invalidf("user %q bound to role %q, which is not defined", user, name)
			}
			for _, prev := range names[:i] {
				if prev == name {
					return Policy{}, invalidf("user %q bound to role %q twice", user, name)
				}
			}
			gs = append(gs, r.Grants...)
		}
		p.grants[user] = gs
	}
	return Policy{p: p}, nil
}

// ValidateUserName reports why name cannot name a user in a binding, or
// nil: 1..MaxUserNameBytes of UTF-8 without control characters.
func ValidateUserName(name string) error {
	switch {
	case name == "":
		return invalidf("empty user name")
	case len(name) > MaxUserNameBytes:
		return invalidf("user name of %d bytes, at most %d", len(name), MaxUserNameBytes)
	case !utf8.ValidString(name):
		return invalidf("user name %q is not UTF-8", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return invalidf("user name %q has a control character", name)
		}
	}
	return nil
}

func copyRole(r Role) Role {
	out := Role{Name: r.Name, Grants: make([]Grant, len(r.Grants))}
	for i, g := range r.Grants {
		out.Grants[i] = Grant{Level: g.Level, Scope: g.Scope, Prefixes: append([]string(nil), g.Prefixes...)}
	}
	return out
}

// Role returns the role of that name (a copy) and whether the Policy
// holds it; the built-in ones are always there.
func (p Policy) Role(name string) (Role, bool) {
	if p.p == nil {
		for _, r := range BuiltinRoles() {
			if r.Name == name {
				return r, true
			}
		}
		return Role{}, false
	}
	r, ok := p.p.roles[name]
	if !ok {
		return Role{}, false
	}
	return copyRole(r), true
}

// grantsOf is the grants of every role bound to user: nil for a user with
// no binding. The slice is the Policy's: do not modify it.
func (p Policy) grantsOf(user string) []Grant {
	if p.p == nil {
		return nil
	}
	return p.p.grants[user]
}

// String summarises p for logs: how many roles and users it holds.
func (p Policy) String() string {
	if p.p == nil {
		return "authz.Policy{3 roles, 0 users}"
	}
	return fmt.Sprintf("authz.Policy{%d roles, %d users}", len(p.p.roles), len(p.p.grants))
}
