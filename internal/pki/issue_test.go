package pki

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func testCA(t testing.TB) *CA {
	t.Helper()
	ca, _, err := NewCA("test-ca", 30, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t testing.TB, ca *CA, name string, role Role) Issued {
	t.Helper()
	is, err := ca.Issue(Request{Name: name, Role: role, Days: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return is
}

func TestIssueNamesTheIdentity(t *testing.T) {
	ca := testCA(t)
	for _, role := range Roles {
		is := issue(t, ca, "m1", role)
		certs, err := ParseCerts(is.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		c := certs[0]
		id, err := IdentityOf(c)
		if err != nil || id != (Identity{Role: role, Name: "m1"}) {
			t.Fatalf("%s: identity %v, %v", role, id, err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		usage := x509.ExtKeyUsageServerAuth
		if role == RoleClient {
			usage = x509.ExtKeyUsageClientAuth
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		serves := slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		if serves != (role != RoleClient) {
			t.Fatalf("%s: server auth %v", role, serves)
		}
		if role != RoleClient {
			if err := c.VerifyHostname("127.0.0.1"); err != nil {
				t.Fatalf("%s: default SANs: %v", role, err)
			}
			if err := c.VerifyHostname("m1"); err != nil {
				t.Fatalf("%s: default SANs: %v", role, err)
			}
		}
	}
}

func TestIssueExplicitSANsAndCALifetime(t *testing.T) {
	ca := testCA(t) // 30 days
	is, err := ca.Issue(Request{Name: "c1", Role: RoleCoordinator, DNS: []string{"coord-1.example"}, IPs: []net.IP{net.ParseIP("10.0.0.7")}, Days: 365}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ParseCerts(is.CertPEM)
	if err := c[0].VerifyHostname("coord-1.example"); err != nil {
		t.Fatal(err)
	}
	if err := c[0].VerifyHostname("10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	if c[0].VerifyHostname("127.0.0.1") == nil {
		t.Fatal("explicit SANs must replace the defaults")
	}
	if c[0].NotAfter.After(ca.Cert.NotAfter) {
		t.Fatalf("certificate outlives its CA: %v > %v", c[0].NotAfter, ca.Cert.NotAfter)
	}
}

func TestIssueRefusesBadRequests(t *testing.T) {
	ca := testCA(t)
	for _, r := range []Request{
		{Name: "", Role: RoleNode, Days: 1},
		{Name: "a b", Role: RoleNode, Days: 1},
		{Name: "a/b", Role: RoleNode, Days: 1},
		{Name: strings.Repeat("x", MaxNameLen+1), Role: RoleNode, Days: 1},
		{Name: "n1", Role: "superuser", Days: 1},
		{Name: "n1", Role: RoleNode, Days: 0},
		{Name: "n1", Role: RoleNode, Days: MaxDays + 1},
		{Name: "n1", Role: RoleNode, Days: 1, DNS: []string{""}},
	} {
		if _, err := ca.Issue(r, time.Now()); err == nil {
			t.Errorf("%+v: issued", r)
		}
	}
	if _, _, err := NewCA("", 1, time.Now()); err == nil {
		t.Error("a CA without a name")
	}
	if _, _, err := NewCA("x", 0, time.Now()); err == nil {
		t.Error("a CA of 0 days")
	}
}

func TestIdentityOfRefusesForeignSubjects(t *testing.T) {
	ca := testCA(t)
	is := issue(t, ca, "u1", RoleClient)
	certs, _ := ParseCerts(is.CertPEM)
	c := certs[0]
	for name, mod := range map[string]func(*x509.Certificate){
		"no OU":      func(c *x509.Certificate) { c.Subject.OrganizationalUnit = nil },
		"two roles":  func(c *x509.Certificate) { c.Subject.OrganizationalUnit = []string{"node", "client"} },
		"other OU":   func(c *x509.Certificate) { c.Subject.OrganizationalUnit = []string{"ops"} },
		"no CN":      func(c *x509.Certificate) { c.Subject.CommonName = "" },
		"CN w/space": func(c *x509.Certificate) { c.Subject.CommonName = "a b" },
	} {
		cc := *c
		mod(&cc)
		if _, err := IdentityOf(&cc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := IdentityOf(nil); err == nil {
		t.Error("nil accepted")
	}
}

func TestWriteFilesAndLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca, is, err := NewCA("c", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cp, kp, err := WriteFiles(dir, "ca", is, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(kp)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, %v", st.Mode(), err)
	}
	if _, _, err := WriteFiles(dir, "ca", is, false); err == nil {
		t.Fatal("overwrote without force")
	}
	if _, _, err := WriteFiles(dir, "ca", is, true); err != nil {
		t.Fatal(err)
	}
	back, err := LoadCA(cp, kp)
	if err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadCA: %v", err)
	}
	// A key that is not the CA's is refused.
	_, other, _ := NewCA("other", 1, time.Now())
	os.WriteFile(filepath.Join(dir, "other-key.pem"), other.KeyPEM, 0o600)
	if _, err := LoadCA(cp, filepath.Join(dir, "other-key.pem")); err == nil {
		t.Fatal("a CA with a foreign key loaded")
	}
	// A leaf certificate is not a CA.
	leaf := issue(t, ca, "n1", RoleNode)
	os.WriteFile(filepath.Join(dir, "n1.pem"), leaf.CertPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "n1-key.pem"), leaf.KeyPEM, 0o600)
	if _, err := LoadCA(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem")); err == nil {
		t.Fatal("a leaf loaded as a CA")
	}
	if _, err := ParseCerts([]byte("garbage")); err == nil {
		t.Fatal("garbage parsed")
	}
}
