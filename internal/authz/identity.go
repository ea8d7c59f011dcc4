package authz

import "fmt"

// Kind is how a caller authenticated.
type Kind uint8

const (
	// KindAnonymous: no certificate, no token (or authentication is off).
	KindAnonymous Kind = iota
	// KindCertificate: a client certificate the cluster's CA signed; Name
	// is its subject's name and Role the role written in it.
	KindCertificate
	// KindToken: a bearer token the cluster verified; Name is its user.
	KindToken
)

func (k Kind) String() string {
	switch k {
	case KindAnonymous:
		return "anonymous"
	case KindCertificate:
		return "certificate"
	case KindToken:
		return "token"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// The roles a certificate can carry. Only a certificate's role counts: a
// token that claims one is a user like any other.
const (
	CertRoleCoordinator = "coordinator"
	CertRoleNode        = "node"
	CertRoleClient      = "client"
)

// Identity is who calls, as authentication established it. The RPC layer
// builds it once per connection or token and keeps it: Authorize only
// reads it.
type Identity struct {
	Kind Kind
	// Name is the user: the certificate's name or the token's user. Both
	// kinds share one namespace, the one Policy bindings name.
	Name string
	// Role is the certificate's role (CertRoleCoordinator, CertRoleNode,
	// CertRoleClient); ignored for other kinds.
	Role string
}

// Anonymous is the identity of a caller that presented nothing.
var Anonymous = Identity{}

// authenticated reports whether id names a caller that proved who it is.
func (id Identity) authenticated() bool {
	return (id.Kind == KindCertificate || id.Kind == KindToken) && id.Name != ""
}

// certRole reports whether id is a certificate of role role.
func (id Identity) certRole(role string) bool {
	return id.Kind == KindCertificate && id.Name != "" && id.Role == role
}

// String describes id in refusals: `user "bob"`, `certificate "n1" of role
// "node"`.
func (id Identity) String() string {
	switch {
	case !id.authenticated():
		return "an anonymous caller"
	case id.Kind == KindCertificate && id.Role != "":
		return fmt.Sprintf("certificate %q of role %q", id.Name, id.Role)
	case id.Kind == KindCertificate:
		return fmt.Sprintf("certificate %q", id.Name)
	}
	return fmt.Sprintf("user %q", id.Name)
}
