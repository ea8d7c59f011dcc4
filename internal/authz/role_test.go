package authz

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateRoleName(t *testing.T) {
	for _, ok := range []string{"a", "ops", "team-a", "team_a.readers", "R2", "9lives", strings.Repeat("x", MaxRoleNameBytes)} {
		if err := ValidateRoleName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", ".a", "_a", "a b", "a/b", "a:b", "é", "a\x00", strings.Repeat("x", MaxRoleNameBytes+1)} {
		if err := ValidateRoleName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateGrant(t *testing.T) {
	many := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	tests := []struct {
		name  string
		grant Grant
		bad   string // a piece of the error, "" if valid
	}{
		{"read on everything", Grant{Level: AccessRead, Scope: ScopeAll}, ""},
		{"admin on the journal", Grant{Level: AccessAdmin, Scope: ScopeJournal}, ""},
		{"write on two event families", Grant{Level: AccessWrite, Scope: ScopeJournal, Prefixes: []string{"fs.", "app."}}, ""},
		{"write on paths", Grant{Level: AccessWrite, Scope: ScopeFS, Prefixes: []string{"/home/bob", "/tmp"}}, ""},
		{"the most prefixes", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: many(MaxPrefixesPerGrant, func(i int) string { return fmt.Sprintf("/p%d", i) })}, ""},
		{"no level", Grant{Scope: ScopeAll}, "read, write or admin"},
		{"public is no level", Grant{Level: AccessPublic, Scope: ScopeAll}, "read, write or admin"},
		{"member is no level", Grant{Level: AccessMember, Scope: ScopeAll}, "read, write or admin"},
		{"no scope", Grant{Level: AccessRead}, "the scope is"},
		{"unknown scope", Grant{Level: AccessRead, Scope: Scope(9)}, "the scope is"},
		{"prefixes on everything", Grant{Level: AccessRead, Scope: ScopeAll, Prefixes: []string{"/"}}, "prefixes limit"},
		{"too many prefixes", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: many(MaxPrefixesPerGrant+1, func(i int) string { return fmt.Sprintf("/p%d", i) })}, "at most"},
		{"a relative path", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"home"}}, "not absolute"},
		{"an unclean path", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"/a/../b"}}, `".." component`},
		{"a trailing slash", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"/a/"}}, "ends with a slash"},
		{"an empty event-type prefix", Grant{Level: AccessRead, Scope: ScopeJournal, Prefixes: []string{""}}, "empty event-type"},
		{"a path as an event type is fine", Grant{Level: AccessRead, Scope: ScopeJournal, Prefixes: []string{"/a"}}, ""},
		{"an event type as a path is not", Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"fs."}}, "not absolute"},
		{"a prefix twice", Grant{Level: AccessRead, Scope: ScopeJournal, Prefixes: []string{"a.", "b.", "a."}}, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateGrant(tt.grant)
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.bad != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("%v, want ErrInvalid saying %q", err, tt.bad)
			}
		})
	}
}

func TestValidateRole(t *testing.T) {
	grants := make([]Grant, MaxGrantsPerRole+1)
	for i := range grants {
		grants[i] = Grant{Level: AccessRead, Scope: ScopeAll}
	}
	tests := []struct {
		name string
		role Role
		bad  string
	}{
		{"no grants", Role{Name: "empty"}, ""},
		{"the most grants", Role{Name: "big", Grants: grants[:MaxGrantsPerRole]}, ""},
		{"too many grants", Role{Name: "big", Grants: grants}, "at most"},
		{"bad name", Role{Name: "a b"}, "role name"},
		{"bad grant, named", Role{Name: "ops", Grants: []Grant{{Level: AccessRead, Scope: ScopeAll}, {Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"x"}}}}, `role "ops", grant 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateRole(tt.role)
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.bad != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("%v, want ErrInvalid saying %q", err, tt.bad)
			}
		})
	}
	for _, r := range BuiltinRoles() {
		if err := ValidateRole(r); err != nil || !builtin(r.Name) {
			t.Errorf("built-in role %q: %v", r.Name, err)
		}
	}
}

func TestGrantCovers(t *testing.T) {
	all := Grant{Level: AccessWrite, Scope: ScopeAll}
	journal := Grant{Level: AccessWrite, Scope: ScopeJournal}
	fsEvents := Grant{Level: AccessWrite, Scope: ScopeJournal, Prefixes: []string{"fs.", "app.orders."}}
	home := Grant{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"/home/bob", "/shared"}}
	tests := []struct {
		name  string
		grant Grant
		want  Access
		scope Scope
		what  string
		ok    bool
	}{
		{"everything, no scope", all, AccessWrite, ScopeAll, "", true},
		{"everything, lower level", all, AccessRead, ScopeFS, "/x", true},
		{"everything, higher level", all, AccessAdmin, ScopeAll, "", false},
		{"journal grant, no-scope call", journal, AccessRead, ScopeAll, "", false},
		{"journal grant, whole journal", journal, AccessWrite, ScopeJournal, "", true},
		{"journal grant, an event type", journal, AccessWrite, ScopeJournal, "x.y", true},
		{"journal grant, a path", journal, AccessRead, ScopeFS, "/x", false},
		{"prefixed, covered type", fsEvents, AccessWrite, ScopeJournal, "fs.create", true},
		{"prefixed, second prefix", fsEvents, AccessRead, ScopeJournal, "app.orders.new", true},
		{"prefixed, other type", fsEvents, AccessWrite, ScopeJournal, "app.users.new", false},
		{"prefixed, whole journal", fsEvents, AccessRead, ScopeJournal, "", false},
		{"paths, under", home, AccessRead, ScopeFS, "/home/bob/notes", true},
		{"paths, itself", home, AccessRead, ScopeFS, "/shared", true},
		{"paths, a sibling sharing bytes", home, AccessRead, ScopeFS, "/home/bobby", false},
		{"paths, the parent", home, AccessRead, ScopeFS, "/home", false},
		{"paths, write on read", home, AccessWrite, ScopeFS, "/home/bob/x", false},
		{"paths, whole fs", home, AccessRead, ScopeFS, "", false},
		{"paths, an event type", home, AccessRead, ScopeJournal, "/home/bob", false},
	}
	for _, tt := range tests {
		if got := tt.grant.covers(tt.want, tt.scope, tt.what); got != tt.ok {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.ok)
		}
	}
}
