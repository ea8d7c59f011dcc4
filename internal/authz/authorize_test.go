package authz

import (
	"strings"
	"testing"
)

// testPolicy: bob writes under /home/bob and the fs.* and app.orders.*
// events and reads everything; carol administers the journal only; dave
// reads /shared; erin is bound to a role with no grants; the storage node
// n1 and the coordinator c1 have no bindings.
func testPolicy(t testing.TB) Policy {
	t.Helper()
	p, err := NewPolicy([]Role{
		{Name: "home-bob", Grants: []Grant{
			{Level: AccessWrite, Scope: ScopeFS, Prefixes: []string{"/home/bob"}},
			{Level: AccessWrite, Scope: ScopeJournal, Prefixes: []string{"fs.", "app.orders."}},
		}},
		{Name: "journal-ops", Grants: []Grant{{Level: AccessAdmin, Scope: ScopeJournal}}},
		{Name: "shared-ro", Grants: []Grant{{Level: AccessRead, Scope: ScopeFS, Prefixes: []string{"/shared"}}}},
		{Name: "nothing"},
	}, map[string][]string{
		"bob":   {"home-bob", RoleReader},
		"carol": {"journal-ops"},
		"dave":  {"shared-ro"},
		"erin":  {"nothing"},
		"root":  {RoleAdmin},
		"wendy": {RoleWriter},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func token(name string) Identity { return Identity{Kind: KindToken, Name: name} }

func cert(name, role string) Identity { return Identity{Kind: KindCertificate, Name: name, Role: role} }

func TestAuthorize(t *testing.T) {
	p := testPolicy(t)
	bob, carol, dave, erin, root, wendy := token("bob"), token("carol"), token("dave"), token("erin"), token("root"), token("wendy")
	bobCert := cert("bob", CertRoleClient)
	node, coord := cert("n1", CertRoleNode), cert("c1", CertRoleCoordinator)
	tokenClaimingCoord := Identity{Kind: KindToken, Name: "c1", Role: CertRoleCoordinator}
	nameless := Identity{Kind: KindCertificate, Role: CertRoleCoordinator}
	tests := []struct {
		rule   string
		id     Identity
		access Access
		res    Resource
		want   Outcome
		reason string // a piece of the reason
	}{
		// 1. Public: anyone.
		{"public, anonymous", Anonymous, AccessPublic, Resource{}, Allow, ""},
		{"public, anyone", erin, AccessPublic, Resource{}, Allow, ""},
		// 2. No class: refused, whoever calls.
		{"no class", root, accessUnspecified, Resource{}, Forbidden, "no access class"},
		{"no class, coordinator", coord, accessUnspecified, Resource{}, Forbidden, "no access class"},
		{"unknown class", coord, Access(42), Resource{}, Forbidden, "Access(42)"},
		// 3. Anonymous or nameless: unauthenticated.
		{"anonymous read", Anonymous, AccessRead, Resource{}, Unauthenticated, "a read call needs a client certificate or a token"},
		{"anonymous block", Anonymous, AccessBlock, Resource{}, Unauthenticated, "block call"},
		{"anonymous member", Anonymous, AccessMember, Resource{}, Unauthenticated, "member call"},
		{"nameless coordinator certificate", nameless, AccessMember, Resource{}, Unauthenticated, ""},
		{"anonymous with a name", Identity{Name: "root"}, AccessRead, Resource{}, Unauthenticated, ""},
		// 4. A coordinator certificate: everything (forwarded calls).
		{"coordinator, member", coord, AccessMember, Resource{}, Allow, ""},
		{"coordinator, node (a forwarded NodeLink call)", coord, AccessNode, Resource{}, Allow, ""},
		{"coordinator, recovery", coord, AccessRecovery, Resource{}, Allow, ""},
		{"coordinator, admin (a forwarded call)", coord, AccessAdmin, Resource{}, Allow, ""},
		{"coordinator, write a path", coord, AccessWrite, Paths("/etc"), Allow, ""},
		// The authenticated class: anyone who proved who they are.
		{"authenticated, a token with no roles", erin, AccessAuthenticated, Resource{}, Allow, ""},
		{"authenticated, a node", node, AccessAuthenticated, Resource{}, Allow, ""},
		{"authenticated, anonymous", Anonymous, AccessAuthenticated, Resource{}, Unauthenticated, "authenticated call"},
		// Some of a scope: any grant of the level in it.
		{"some of the journal, a prefix grant", bob, AccessWrite, SomeOf(ScopeJournal), Allow, ""},
		{"some of the fs, a prefix grant", bob, AccessWrite, SomeOf(ScopeFS), Allow, ""},
		{"some of the fs, a journal admin", carol, AccessWrite, SomeOf(ScopeFS), Forbidden, `lacks write on any part of the fs`},
		{"some of the fs, an fs reader", dave, AccessWrite, SomeOf(ScopeFS), Forbidden, "lacks write"},
		{"some of the journal, a writer on everything", wendy, AccessWrite, SomeOf(ScopeJournal), Allow, ""},
		// 5. Member: coordinators only.
		{"member, node", node, AccessMember, Resource{}, Forbidden, `certificate "n1" of role "node" is not a coordinator`},
		{"member, admin user", root, AccessMember, Resource{}, Forbidden, `user "root" is not a coordinator`},
		{"member, a token claiming the role", tokenClaimingCoord, AccessMember, Resource{}, Forbidden, "is not a coordinator"},
		{"member, client certificate", bobCert, AccessMember, Resource{}, Forbidden, "is not a coordinator"},
		{"member, certificate without a role", cert("c1", ""), AccessMember, Resource{}, Forbidden, "is not a coordinator"},
		// 6. Node: storage nodes only.
		{"node, node", node, AccessNode, Resource{}, Allow, ""},
		{"node, admin user", root, AccessNode, Resource{}, Forbidden, `user "root" is not a storage node`},
		{"node, token claiming the role", Identity{Kind: KindToken, Name: "n1", Role: CertRoleNode}, AccessNode, Resource{}, Forbidden, "not a storage node"},
		// 7. Recovery: nodes and coordinators.
		{"recovery, node", node, AccessRecovery, Resource{}, Allow, ""},
		{"recovery, client", bobCert, AccessRecovery, Resource{}, Forbidden, "neither a storage node nor a coordinator"},
		{"recovery, admin user", root, AccessRecovery, Resource{}, Forbidden, "neither"},
		// 8. Block: any authenticated caller.
		{"block, a user without roles", token("nobody"), AccessBlock, Resource{}, Allow, ""},
		{"block, client certificate", bobCert, AccessBlock, Resource{}, Allow, ""},
		{"block, node", node, AccessBlock, Resource{}, Allow, ""},
		// 9. User levels: the grants.
		{"no scope, reader reads", bob, AccessRead, Resource{}, Allow, ""},
		{"no scope, admin", root, AccessAdmin, Resource{}, Allow, ""},
		{"no scope, admin implies read", root, AccessRead, Resource{}, Allow, ""},
		{"no scope, writer is not admin", wendy, AccessAdmin, Resource{}, Forbidden, `user "wendy" lacks admin on the cluster`},
		{"no scope, journal admin is not cluster admin", carol, AccessAdmin, Resource{}, Forbidden, `user "carol" lacks admin on the cluster`},
		{"no scope, scoped reader", dave, AccessRead, Resource{}, Forbidden, "lacks read on the cluster"},
		{"no scope, ScopeAll is no scope", root, AccessAdmin, Resource{Scope: ScopeAll}, Allow, ""},
		{"no scope, names without a scope", root, AccessRead, Resource{Names: []string{"/a"}}, Forbidden, "without a scope"},
		{"unknown scope", root, AccessRead, Resource{Scope: Scope(9)}, Forbidden, "unknown scope"},
		{"unknown user", token("mallory"), AccessRead, Resource{}, Forbidden, `user "mallory" lacks read on the cluster`},
		{"a role with no grants", erin, AccessRead, Paths("/"), Forbidden, `user "erin" lacks read on path "/"`},
		{"a node certificate has no user rights", node, AccessRead, Resource{}, Forbidden, `user "n1" lacks read`},
		{"certificate and token share a user", bobCert, AccessWrite, Paths("/home/bob/x"), Allow, ""},
		{"whole journal, journal admin", carol, AccessAdmin, EventTypes(), Allow, ""},
		{"event type, journal admin reads", carol, AccessRead, EventTypes("x"), Allow, ""},
		{"whole journal, prefixed writer", bob, AccessWrite, EventTypes(), Forbidden, `user "bob" lacks write on every journal event type`},
		{"whole journal, reader reads", bob, AccessRead, EventTypes(), Allow, ""},
		{"event type covered", bob, AccessWrite, EventTypes("fs.create"), Allow, ""},
		{"event types, all covered", bob, AccessWrite, EventTypes("fs.create", "app.orders.new", "fs.x"), Allow, ""},
		{"event types, one not covered", bob, AccessWrite, EventTypes("fs.create", "app.users.new"), Forbidden, `user "bob" lacks write on journal event type "app.users.new"`},
		{"event type, the family without its dot", bob, AccessWrite, EventTypes("fs"), Forbidden, `lacks write on journal event type "fs"`},
		{"event type, empty", bob, AccessWrite, EventTypes(""), Forbidden, `journal event type ""`},
		{"event type, journal grant is not fs", carol, AccessRead, Paths("/x"), Forbidden, `user "carol" lacks read on path "/x"`},
		{"whole fs, writer", wendy, AccessWrite, Paths(), Allow, ""},
		{"whole fs, prefixed", bob, AccessWrite, Paths(), Forbidden, `user "bob" lacks write on every path`},
		{"path covered", bob, AccessWrite, Paths("/home/bob/notes.txt"), Allow, ""},
		{"path, the prefix itself", bob, AccessWrite, Paths("/home/bob"), Allow, ""},
		{"path, a sibling sharing bytes", bob, AccessWrite, Paths("/home/bobby"), Forbidden, `user "bob" lacks write on path "/home/bobby"`},
		{"path, a rename out", bob, AccessWrite, Paths("/home/bob/a", "/tmp/a"), Forbidden, `path "/tmp/a"`},
		{"path, read through reader", bob, AccessRead, Paths("/etc"), Allow, ""},
		{"path, read only", dave, AccessWrite, Paths("/shared/x"), Forbidden, `user "dave" lacks write on path "/shared/x"`},
		{"path, read", dave, AccessRead, Paths("/shared/x", "/shared"), Allow, ""},
		{"path, dot-dot out of the prefix", bob, AccessWrite, Paths("/home/bob/../../etc"), Forbidden, "invalid path"},
		{"path, relative", root, AccessRead, Paths("etc"), Forbidden, "invalid path"},
		{"path, trailing slash", bob, AccessWrite, Paths("/home/bob/"), Forbidden, "invalid path"},
		{"path, empty", root, AccessRead, Paths(""), Forbidden, "invalid path"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			d := p.Authorize(tt.id, tt.access, tt.res)
			if d.Outcome != tt.want || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("%s", d)
			}
			if d.Allowed() != (tt.want == Allow) || (d.Reason == "") != d.Allowed() {
				t.Fatalf("Allowed %v with reason %q", d.Allowed(), d.Reason)
			}
			switch d.Outcome {
			case Forbidden:
				if !strings.HasPrefix(d.Reason, "permission denied: ") {
					t.Fatalf("a refusal reads %q", d.Reason)
				}
			case Unauthenticated:
				if !strings.HasPrefix(d.Reason, "unauthenticated: ") {
					t.Fatalf("an unauthenticated refusal reads %q", d.Reason)
				}
			}
		})
	}
}

// TestZeroValues: the zero Policy refuses every user call and decides the
// component classes as usual; the zero Decision allows nothing.
func TestZeroValues(t *testing.T) {
	var p Policy
	if d := p.Authorize(token("root"), AccessRead, Resource{}); d.Outcome != Forbidden {
		t.Errorf("zero Policy, read: %s", d)
	}
	if d := p.Authorize(cert("n1", CertRoleNode), AccessNode, Resource{}); !d.Allowed() {
		t.Errorf("zero Policy, node: %s", d)
	}
	if d := p.Authorize(Anonymous, AccessPublic, Resource{}); !d.Allowed() {
		t.Errorf("zero Policy, public: %s", d)
	}
	if (Decision{}).Allowed() {
		t.Error("the zero Decision allows")
	}
	if s := Outcome(7).String(); s != "Outcome(7)" {
		t.Errorf("unknown outcome prints %q", s)
	}
}

// TestAuthorizeDoesNotAllocate: an allowed call costs no allocation
// (the RPC layer asks on every call).
func TestAuthorizeDoesNotAllocate(t *testing.T) {
	p := testPolicy(t)
	bob := token("bob")
	res := Paths("/home/bob/a/b/c")
	ev := EventTypes("app.orders.new")
	n := testing.AllocsPerRun(100, func() {
		if !p.Authorize(bob, AccessWrite, res).Allowed() || !p.Authorize(bob, AccessWrite, ev).Allowed() {
			t.Fatal("refused")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per allowed call", n)
	}
}
