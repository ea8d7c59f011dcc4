package authz

import "fmt"

// Scope is the part of the cluster a grant reaches.
type Scope uint8

const (
	scopeUnspecified Scope = iota
	// ScopeAll: the journal, the file system and the calls with no scope
	// (status, membership, snapshots); a grant of it has no prefixes.
	ScopeAll
	// ScopeJournal: the journal's events, all of them or those whose type
	// starts with one of the grant's prefixes.
	ScopeJournal
	// ScopeFS: the file system, all of it or the paths under one of the
	// grant's prefixes.
	ScopeFS
	scopeEnd
)

func (s Scope) String() string {
	switch s {
	case ScopeAll:
		return "everything"
	case ScopeJournal:
		return "journal"
	case ScopeFS:
		return "fs"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Bounds of roles, so that a role that comes over the network is checked
// before it is kept.
const (
	MaxRoleNameBytes    = 64
	MaxGrantsPerRole    = 32
	MaxPrefixesPerGrant = 64
)

// Grant is one permission: Level (read, write or admin) on Scope, limited
// to Prefixes (event-type prefixes for ScopeJournal, path prefixes for
// ScopeFS; none: all of the scope).
type Grant struct {
	Level    Access
	Scope    Scope
	Prefixes []string
}

// Role is a named list of grants. A user bound to several roles holds all
// of their grants.
type Role struct {
	Name   string
	Grants []Grant
}

// The built-in roles: their level on everything.
const (
	RoleReader = "reader"
	RoleWriter = "writer"
	RoleAdmin  = "admin"
)

// BuiltinRoles returns the roles every Policy holds: reader, writer and
// admin, each its level on everything. A Policy refuses a role of one of
// these names.
func BuiltinRoles() []Role {
	return []Role{
		{Name: RoleReader, Grants: []Grant{{Level: AccessRead, Scope: ScopeAll}}},
		{Name: RoleWriter, Grants: []Grant{{Level: AccessWrite, Scope: ScopeAll}}},
		{Name: RoleAdmin, Grants: []Grant{{Level: AccessAdmin, Scope: ScopeAll}}},
	}
}

func builtin(name string) bool { return name == RoleReader || name == RoleWriter || name == RoleAdmin }

// ValidateRoleName reports why name cannot name a role, or nil:
// 1..MaxRoleNameBytes of ASCII letters, digits, '.', '_' and '-',
// starting with a letter or digit.
func ValidateRoleName(name string) error {
	if name == "" {
		return invalidf("empty role name")
	}
	if len(name) > MaxRoleNameBytes {
		return invalidf("role name of %d bytes, at most %d", len(name), MaxRoleNameBytes)
	}
	for i := range len(name) {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return invalidf("role name %q: letters, digits, '.', '_' and '-' only, starting with a letter or digit", name)
		}
	}
	return nil
}

// ValidateGrant reports why g cannot be a grant, or nil: a user level, a
// known scope, no prefixes on ScopeAll, at most MaxPrefixesPerGrant valid
// prefixes of the scope's kind, none twice.
func ValidateGrant(g Grant) error {
	if !g.Level.UserLevel() {
		return invalidf("grant of %s: a grant is read, write or admin", g.Level)
	}
	if g.Scope <= scopeUnspecified || g.Scope >= scopeEnd {
		return invalidf("grant on %s: the scope is everything, journal or fs", g.Scope)
	}
	if g.Scope == ScopeAll && len(g.Prefixes) > 0 {
		return invalidf("grant on everything with %d prefixes: prefixes limit a journal or fs grant", len(g.Prefixes))
	}
	if len(g.Prefixes) > MaxPrefixesPerGrant {
		return invalidf("grant with %d prefixes, at most %d", len(g.Prefixes), MaxPrefixesPerGrant)
	}
	validate := ValidateEventTypePrefix
	if g.Scope == ScopeFS {
		validate = ValidatePathPrefix
	}
	for i, p := range g.Prefixes {
		if err := validate(p); err != nil {
			return err
		}
		for _, q := range g.Prefixes[:i] {
			if p == q {
				return invalidf("prefix %q listed twice", p)
			}
		}
	}
	return nil
}

// ValidateRole reports why r cannot be a role, or nil: a valid name and at
// most MaxGrantsPerRole valid grants (none is allowed: a role that grants
// nothing yet).
func ValidateRole(r Role) error {
	if err := ValidateRoleName(r.Name); err != nil {
		return err
	}
	if len(r.Grants) > MaxGrantsPerRole {
		return invalidf("role %q with %d grants, at most %d", r.Name, len(r.Grants), MaxGrantsPerRole)
	}
	for i, g := range r.Grants {
		if err := ValidateGrant(g); err != nil {
			return fmt.Errorf("role %q, grant %d: %w", r.Name, i, err)
		}
	}
	return nil
}

// covers reports whether g allows level want on one thing of scope s
// named name ("" with s: all of the scope; s == ScopeAll: a call with no
// scope). name must be valid for s (a clean path for ScopeFS).
func (g *Grant) covers(want Access, s Scope, name string) bool {
	if !g.Level.Includes(want) {
		return false
	}
	if g.Scope == ScopeAll {
		return true
	}
	if g.Scope != s {
		return false
	}
	if len(g.Prefixes) == 0 {
		return true
	}
	if name == "" {
		return false // the whole scope, and the grant reaches part of it
	}
	for _, p := range g.Prefixes {
		if s == ScopeFS && pathCovers(p, name) || s == ScopeJournal && eventTypeCovers(p, name) {
			return true
		}
	}
	return false
}
