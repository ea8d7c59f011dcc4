package authz

import (
	"errors"
	"strings"
	"testing"
)

// FuzzValidateRole: role input as it could come over the network (a name,
// a level, a scope and newline-separated prefixes) never panics the
// validation; a role it accepts builds a Policy, and authorizing any call
// against it never panics either. For a valid fs grant and a valid path,
// coverage is the component rule.
func FuzzValidateRole(f *testing.F) {
	f.Add("ops", uint8(AccessWrite), uint8(ScopeFS), "/home/bob\n/shared", "/home/bob/x", uint8(AccessWrite))
	f.Add("ops", uint8(AccessRead), uint8(ScopeJournal), "fs.\napp.", "fs.create", uint8(AccessRead))
	f.Add("admin", uint8(AccessAdmin), uint8(ScopeAll), "", "", uint8(AccessAdmin))
	f.Add("-x", uint8(0), uint8(0), "\n\n", "/a/../b", uint8(9))
	f.Add("a.b_c-d", uint8(AccessAdmin), uint8(ScopeFS), "/\n/a//b\n/a/", "/ab", uint8(AccessRead))
	f.Add(strings.Repeat("r", 70), uint8(200), uint8(200), strings.Repeat("/x", 3000), "\x00", uint8(AccessMember))
	f.Fuzz(func(t *testing.T, name string, level, scope uint8, prefixes, target string, want uint8) {
		var ps []string
		if prefixes != "" {
			ps = strings.Split(prefixes, "\n")
		}
		r := Role{Name: name, Grants: []Grant{{Level: Access(level), Scope: Scope(scope), Prefixes: ps}}}
		err := ValidateRole(r)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("an error that is not ErrInvalid: %v", err)
		}
		_ = ValidateRoleName(name)
		_ = ValidateUserName(name)
		_ = ValidatePathPrefix(target)
		_ = ValidateEventTypePrefix(target)
		if err != nil {
			if _, perr := NewPolicy([]Role{r}, nil); perr == nil {
				t.Fatalf("NewPolicy took a role ValidateRole refused (%v)", err)
			}
			return
		}
		user := "u"
		p, err := NewPolicy([]Role{r}, map[string][]string{user: {r.Name}})
		if builtin(r.Name) {
			if err == nil {
				t.Fatal("NewPolicy took a role of a built-in name")
			}
			return
		}
		if err != nil {
			t.Fatalf("NewPolicy refused a valid role: %v", err)
		}
		id := token(user)
		for _, res := range []Resource{{}, Paths(target), EventTypes(target), Paths(), EventTypes(), {Scope: Scope(scope), Names: []string{target}}} {
			d := p.Authorize(id, Access(want), res)
			if d.Outcome < Allow || d.Outcome > Forbidden || d.Allowed() == (d.Reason != "") {
				t.Fatalf("%v on %+v: %s", Access(want), res, d)
			}
		}
		g := r.Grants[0]
		if g.Scope == ScopeFS && validPath(target) == nil {
			covered := false
			for _, pre := range g.Prefixes {
				covered = covered || pre == "/" || target == pre || strings.HasPrefix(target, pre+"/")
			}
			if len(g.Prefixes) == 0 {
				covered = true
			}
			if got := g.covers(AccessRead, ScopeFS, target); got != covered {
				t.Fatalf("grant %q covers %q: %v, want %v", g.Prefixes, target, got, covered)
			}
		}
	})
}
