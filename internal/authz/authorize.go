package authz

import "fmt"

// Resource is what one call touches, as far as permissions go.
// Resource{} is a call with no scope (cluster status, membership,
// snapshots, node lists): it needs a grant on everything.
type Resource struct {
	// Scope is ScopeJournal or ScopeFS; zero (or ScopeAll): no scope.
	Scope Scope
	// Names are the event types (ScopeJournal) or the paths (ScopeFS)
	// the call touches; none: all of the scope (a read of the whole
	// journal, a trim). Paths must be absolute and clean: a call naming
	// another path is refused.
	Names []string
	// Some: the call needs the level on some part of the scope only (an
	// exactly-once session, a lease renewal: they serve whatever the
	// caller may write), so any grant of the level in it will do.
	Some bool
}

// SomeOf is a call that needs its level on some part of scope s.
func SomeOf(s Scope) Resource { return Resource{Scope: s, Some: true} }

// EventTypes is a journal call on events of these types; none: the whole
// journal.
func EventTypes(types ...string) Resource { return Resource{Scope: ScopeJournal, Names: types} }

// Paths is a file-system call on these paths; none: the whole file
// system.
func Paths(paths ...string) Resource { return Resource{Scope: ScopeFS, Names: paths} }

// Outcome is the verdict of Authorize.
type Outcome uint8

const (
	outcomeUnspecified Outcome = iota
	// Allow: go ahead.
	Allow
	// Unauthenticated: the call needs a caller that proves who it is
	// (gRPC UNAUTHENTICATED).
	Unauthenticated
	// Forbidden: the caller is known and lacks the permission (gRPC
	// PERMISSION_DENIED).
	Forbidden
)

func (o Outcome) String() string {
	switch o {
	case Allow:
		return "allow"
	case Unauthenticated:
		return "unauthenticated"
	case Forbidden:
		return "forbidden"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Decision is Authorize's answer. The zero Decision allows nothing.
type Decision struct {
	Outcome Outcome
	// Reason says, for a refusal, what is missing, in words:
	// `permission denied: user "bob" lacks write on journal event type
	// "fs.create"`. Empty when allowed.
	Reason string
}

// Allowed reports whether the call may go ahead.
func (d Decision) Allowed() bool { return d.Outcome == Allow }

func (d Decision) String() string {
	if d.Allowed() {
		return "allow"
	}
	return d.Outcome.String() + ": " + d.Reason
}

var allow = Decision{Outcome: Allow}

func forbidden(format string, args ...any) Decision {
	return Decision{Outcome: Forbidden, Reason: "permission denied: " + fmt.Sprintf(format, args...)}
}

// Authorize decides whether id may make a call of class access on res
// (the rules in order: doc.go). It does not allocate when the call is
// allowed.
func (p Policy) Authorize(id Identity, access Access, res Resource) Decision {
	if access == AccessPublic {
		return allow
	}
	if !access.Valid() {
		return forbidden("the call has no access class (%s)", access)
	}
	if !id.authenticated() {
		return Decision{Outcome: Unauthenticated, Reason: fmt.Sprintf("unauthenticated: a %s call needs a client certificate or a token", access)}
	}
	// A coordinator may call everything: members forward calls of every
	// class to the leader, and a forwarded call carries the forwarding
	// member's certificate, not its caller's. When forwarded calls carry
	// the original caller's identity, the leader authorizes that identity
	// and this narrows to member and recovery calls (doc.go).
	if id.certRole(CertRoleCoordinator) {
		return allow
	}
	switch access {
	case AccessMember:
		return forbidden("%s is not a coordinator: member calls need a certificate of role %q", id, CertRoleCoordinator)
	case AccessNode:
		if id.certRole(CertRoleNode) {
			return allow
		}
		return forbidden("%s is not a storage node: node calls need a certificate of role %q", id, CertRoleNode)
	case AccessRecovery:
		if id.certRole(CertRoleNode) {
			return allow
		}
		return forbidden("%s is neither a storage node nor a coordinator: block recovery calls need a certificate of role %q or %q", id, CertRoleNode, CertRoleCoordinator)
	case AccessAuthenticated:
		return allow
	case AccessBlock:
		// Later: the block access token the coordinator handed out.
		return allow
	}
	return p.authorizeUser(id, access, res)
}

// authorizeUser applies the grants bound to id's name: each thing the
// call touches must be covered by some grant of the level.
func (p Policy) authorizeUser(id Identity, want Access, res Resource) Decision {
	grants := p.grantsOf(id.Name)
	switch {
	case res.Scope == scopeUnspecified || res.Scope == ScopeAll:
		if len(res.Names) > 0 {
			return forbidden("the call names %d resources without a scope", len(res.Names))
		}
		if !anyCovers(grants, want, ScopeAll, "") {
			return forbidden("user %q lacks %s on the cluster", id.Name, want)
		}
		return allow
	case res.Scope != ScopeJournal && res.Scope != ScopeFS:
		return forbidden("the call touches an unknown scope (%s)", res.Scope)
	case res.Some:
		for i := range grants {
			if g := &grants[i]; g.Level.Includes(want) && (g.Scope == ScopeAll || g.Scope == res.Scope) {
				return allow
			}
		}
		return forbidden("user %q lacks %s on any part of the %s", id.Name, want, res.Scope)
	case len(res.Names) == 0:
		if !anyCovers(grants, want, res.Scope, "") {
			if res.Scope == ScopeJournal {
				return forbidden("user %q lacks %s on every journal event type", id.Name, want)
			}
			return forbidden("user %q lacks %s on every path", id.Name, want)
		}
		return allow
	}
	for _, name := range res.Names {
		if res.Scope == ScopeFS {
			if err := validPath(name); err != nil {
				return forbidden("user %q: the call names an invalid path: %v", id.Name, err)
			}
			if !anyCovers(grants, want, ScopeFS, name) {
				return forbidden("user %q lacks %s on path %q", id.Name, want, name)
			}
			continue
		}
		if name == "" || !anyCovers(grants, want, ScopeJournal, name) {
			return forbidden("user %q lacks %s on journal event type %q", id.Name, want, name)
		}
	}
	return allow
}

func anyCovers(grants []Grant, want Access, s Scope, name string) bool {
	for i := range grants {
		if grants[i].covers(want, s, name) {
			return true
		}
	}
	return false
}
