package authz

import "testing"

func TestIdentity(t *testing.T) {
	tests := []struct {
		name   string
		id     Identity
		authed bool
		coord  bool
		str    string
	}{
		{"anonymous", Anonymous, false, false, "an anonymous caller"},
		{"anonymous with a name", Identity{Kind: KindAnonymous, Name: "bob"}, false, false, "an anonymous caller"},
		{"certificate without a name", Identity{Kind: KindCertificate, Role: CertRoleCoordinator}, false, false, "an anonymous caller"},
		{"token without a name", Identity{Kind: KindToken}, false, false, "an anonymous caller"},
		{"unknown kind", Identity{Kind: Kind(9), Name: "bob"}, false, false, "an anonymous caller"},
		{"token", Identity{Kind: KindToken, Name: "bob"}, true, false, `user "bob"`},
		{"token claiming a role", Identity{Kind: KindToken, Name: "bob", Role: CertRoleCoordinator}, true, false, `user "bob"`},
		{"client certificate", Identity{Kind: KindCertificate, Name: "bob", Role: CertRoleClient}, true, false, `certificate "bob" of role "client"`},
		{"certificate without a role", Identity{Kind: KindCertificate, Name: "bob"}, true, false, `certificate "bob"`},
		{"coordinator certificate", Identity{Kind: KindCertificate, Name: "c1", Role: CertRoleCoordinator}, true, true, `certificate "c1" of role "coordinator"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.authenticated(); got != tt.authed {
				t.Errorf("authenticated: %v, want %v", got, tt.authed)
			}
			if got := tt.id.certRole(CertRoleCoordinator); got != tt.coord {
				t.Errorf("a coordinator certificate: %v, want %v", got, tt.coord)
			}
			if got := tt.id.String(); got != tt.str {
				t.Errorf("String: %q, want %q", got, tt.str)
			}
		})
	}
	if Kind(7).String() != "Kind(7)" || KindToken.String() != "token" {
		t.Errorf("Kind strings: %s, %s", Kind(7), KindToken)
	}
}
