package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"unicode"
)

// Role is what a certificate's holder is to the cluster.
type Role string

// The roles a certificate can name.
const (
	RoleCoordinator Role = "coordinator"
	RoleNode        Role = "node"
	RoleClient      Role = "client"
)

// Roles lists every role.
var Roles = []Role{RoleCoordinator, RoleNode, RoleClient}

// ParseRole parses a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: want coordinator, node or client", s)
}

// MaxNameLen bounds a certificate's name (a member id or user name).
const MaxNameLen = 128

// ValidateName checks a member id or user name for a certificate: 1 to
// MaxNameLen printable characters with no space or slash.
func ValidateName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("name %q: want 1 to %d characters", s, MaxNameLen)
	}
	for _, c := range s {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) || c == '/' {
			return fmt.Errorf("name %q: only printable characters without spaces or slashes", s)
		}
	}
	return nil
}

// Identity is who a verified certificate belongs to.
type Identity struct {
	Role Role
	Name string
}

func (id Identity) String() string { return string(id.Role) + " " + id.Name }

// ErrNoIdentity is wrapped by IdentityOf when a certificate names no
// Logbook identity.
var ErrNoIdentity = errors.New("pki: certificate names no Logbook identity")

// IdentityOf reads the identity a certificate names: exactly one role in
// the subject's OrganizationalUnit and a valid name in its CommonName.
// The caller must have verified the certificate's chain.
func IdentityOf(c *x509.Certificate) (Identity, error) {
	if c == nil {
		return Identity{}, fmt.Errorf("%w: no certificate", ErrNoIdentity)
	}
	var role Role
	n := 0
	for _, ou := range c.Subject.OrganizationalUnit {
		if r, err := ParseRole(ou); err == nil {
			role = r
			n++
		}
	}
	if n != 1 {
		return Identity{}, fmt.Errorf("%w: subject %q needs exactly one OU of coordinator, node or client", ErrNoIdentity, c.Subject)
	}
	if err := ValidateName(c.Subject.CommonName); err != nil {
		return Identity{}, fmt.Errorf("%w: subject %q: %v", ErrNoIdentity, c.Subject, err)
	}
	return Identity{Role: role, Name: c.Subject.CommonName}, nil
}
