package authz

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestNewPolicy(t *testing.T) {
	ops := Role{Name: "ops", Grants: []Grant{{Level: AccessAdmin, Scope: ScopeJournal}}}
	home := Role{Name: "home", Grants: []Grant{{Level: AccessWrite, Scope: ScopeFS, Prefixes: []string{"/home/bob"}}}}
	tooManyRoles := make([]string, MaxRolesPerUser+1)
	for i := range tooManyRoles {
		tooManyRoles[i] = fmt.Sprintf("r%d", i)
	}
	tests := []struct {
		name     string
		roles    []Role
		bindings map[string][]string
		bad      string
	}{
		{"nothing", nil, nil, ""},
		{"built-in roles only", nil, map[string][]string{"bob": {RoleReader}, "alice": {RoleAdmin, RoleWriter}}, ""},
		{"own roles", []Role{ops, home}, map[string][]string{"bob": {"home", RoleReader}, "carol": {"ops"}, "dave": {}}, ""},
		{"a name with spaces and UTF-8", nil, map[string][]string{"Bob Smith, Zürich": {RoleReader}}, ""},
		{"a role twice", []Role{ops, ops}, nil, "defined twice"},
		{"a built-in name", []Role{{Name: RoleAdmin}}, nil, "built in"},
		{"an invalid role", []Role{{Name: "x", Grants: []Grant{{Level: AccessRead}}}}, nil, "the scope is"},
		{"an unknown role", nil, map[string][]string{"bob": {"nobody"}}, "not defined"},
		{"a binding twice", nil, map[string][]string{"bob": {RoleReader, RoleReader}}, "twice"},
		{"too many roles for a user", nil, map[string][]string{"bob": tooManyRoles}, "at most"},
		{"an empty user", nil, map[string][]string{"": {RoleReader}}, "empty user name"},
		{"a long user", nil, map[string][]string{strings.Repeat("u", MaxUserNameBytes+1): {RoleReader}}, "at most"},
		{"a user with a newline", nil, map[string][]string{"bob\n": {RoleReader}}, "control character"},
		{"a user that is not UTF-8", nil, map[string][]string{"b\xffb": {RoleReader}}, "not UTF-8"},
		{"too many roles", make([]Role, MaxRoles+1), nil, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPolicy(tt.roles, tt.bindings)
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.bad != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("%v, want ErrInvalid saying %q", err, tt.bad)
			}
		})
	}
}

// TestPolicyIsImmutable: changing the roles and bindings a Policy was
// built from, or the role it hands out, changes nothing in it.
func TestPolicyIsImmutable(t *testing.T) {
	roles := []Role{{Name: "home", Grants: []Grant{{Level: AccessWrite, Scope: ScopeFS, Prefixes: []string{"/home/bob"}}}}}
	bindings := map[string][]string{"bob": {"home"}}
	p, err := NewPolicy(roles, bindings)
	if err != nil {
		t.Fatal(err)
	}
	bob := Identity{Kind: KindToken, Name: "bob"}
	if d := p.Authorize(bob, AccessWrite, Paths("/home/bob/x")); !d.Allowed() {
		t.Fatal(d)
	}
	roles[0].Grants[0].Prefixes[0] = "/"
	roles[0].Grants[0].Level = AccessAdmin
	bindings["bob"][0] = RoleAdmin
	bindings["eve"] = []string{RoleAdmin}
	r, _ := p.Role("home")
	r.Grants[0].Prefixes[0] = "/"
	for _, id := range []Identity{bob, {Kind: KindToken, Name: "eve"}} {
		if d := p.Authorize(id, AccessWrite, Paths("/etc")); d.Allowed() {
			t.Errorf("%s writes /etc after its inputs changed", id)
		}
	}
	if d := p.Authorize(bob, AccessWrite, Paths("/home/bob/x")); !d.Allowed() {
		t.Fatal(d)
	}
}

func TestPolicyRoles(t *testing.T) {
	p, err := NewPolicy([]Role{{Name: "ops"}}, map[string][]string{"bob": {"ops"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range []Policy{p, {}} {
		for _, name := range []string{RoleReader, RoleWriter, RoleAdmin} {
			if r, ok := pol.Role(name); !ok || r.Name != name || len(r.Grants) != 1 {
				t.Errorf("%s: built-in %q: %+v %v", pol, name, r, ok)
			}
		}
		if _, ok := pol.Role("nobody"); ok {
			t.Errorf("%s holds a role it was not given", pol)
		}
	}
	if _, ok := p.Role("ops"); !ok {
		t.Error("the policy lost role ops")
	}
	if s := p.String(); s != "authz.Policy{4 roles, 1 users}" {
		t.Errorf("String: %s", s)
	}
}
