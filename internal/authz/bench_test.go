package authz

import (
	"fmt"
	"testing"
)

// BenchmarkAuthorize: one allowed call of a user among many, whose roles
// hold a few dozen prefixes, the way the RPC layer asks on every call
// (an Identity it keeps per connection).
func BenchmarkAuthorize(b *testing.B) {
	var roles []Role
	bindings := map[string][]string{}
	for i := range 100 {
		g := Grant{Level: AccessWrite, Scope: ScopeFS}
		for j := range 16 {
			g.Prefixes = append(g.Prefixes, fmt.Sprintf("/team%d/project%d", i, j))
		}
		e := Grant{Level: AccessWrite, Scope: ScopeJournal}
		for j := range 16 {
			e.Prefixes = append(e.Prefixes, fmt.Sprintf("team%d.kind%d.", i, j))
		}
		roles = append(roles, Role{Name: fmt.Sprintf("team%d", i), Grants: []Grant{g, e}})
	}
	for u := range 10_000 {
		bindings[fmt.Sprintf("user%d", u)] = []string{fmt.Sprintf("team%d", u%100), RoleReader}
	}
	p, err := NewPolicy(roles, bindings)
	if err != nil {
		b.Fatal(err)
	}
	id := Identity{Kind: KindCertificate, Name: "user4242", Role: CertRoleClient}
	cases := []struct {
		name   string
		access Access
		res    Resource
	}{
		{"path", AccessWrite, Paths("/team42/project15/logs/2026/12/07/part-00001")},
		{"event-type", AccessWrite, EventTypes("team42.kind15.created")},
		{"no-scope-read", AccessRead, Resource{}},
		{"block", AccessBlock, Resource{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !p.Authorize(id, c.access, c.res).Allowed() {
					b.Fatal("refused")
				}
			}
		})
	}
}
