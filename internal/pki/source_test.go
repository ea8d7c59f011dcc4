package pki

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeSet writes a certificate for (name, role) signed by ca and the CA
// bundle into dir, and returns the Files naming them.
func writeSet(t *testing.T, dir string, ca *CA, name string, role Role, caPEM ...[]byte) Files {
	t.Helper()
	is := issue(t, ca, name, role)
	if _, _, err := WriteFiles(dir, name, is, true); err != nil {
		t.Fatal(err)
	}
	bundle := encodeCert(ca.Cert.Raw)
	if len(caPEM) > 0 {
		bundle = nil
		for _, b := range caPEM {
			bundle = append(bundle, b...)
		}
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	return Files{Cert: CertFile(dir, name), Key: KeyFile(dir, name), CA: caPath}
}

func load(t *testing.T, f Files) *Source {
	t.Helper()
	s, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve accepts TLS connections with conf and echoes; it returns the
// address and a channel of the peers' identities.
func serve(t *testing.T, conf *tls.Config) (string, chan Identity) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ids := make(chan Identity, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					return
				}
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					id, _ := IdentityOf(pc[0])
					ids <- id
				} else {
					ids <- Identity{}
				}
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), ids
}

func dial(addr string, conf *tls.Config) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := c.Write([]byte("x")); err != nil {
		c.Close()
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// mustRefuse fails the test if a dial to addr with conf succeeds.
func mustRefuse(t *testing.T, addr string, conf *tls.Config, what string) {
	t.Helper()
	if c, err := dial(addr, conf); err == nil {
		c.Close()
		t.Error(what)
	}
}

func TestMutualTLSChecksRolesAndCA(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t)
	srv := load(t, writeSet(t, filepath.Join(dir, "s"), ca, "c1", RoleCoordinator))
	addr, ids := serve(t, srv.ServerConfig(RequireCert, RoleCoordinator))

	peer := load(t, writeSet(t, filepath.Join(dir, "p"), ca, "c2", RoleCoordinator))
	c, err := dial(addr, peer.ClientConfig(RoleCoordinator, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if id := <-ids; id != (Identity{RoleCoordinator, "c2"}) {
		t.Fatalf("server saw %v", id)
	}
	if c.ConnectionState().Version != tls.VersionTLS13 {
		t.Fatalf("version %x", c.ConnectionState().Version)
	}

	// A client certificate where a coordinator one is required.
	cl := load(t, writeSet(t, filepath.Join(dir, "cl"), ca, "alice", RoleClient))
	mustRefuse(t, addr, cl.ClientConfig(RoleCoordinator, "127.0.0.1"), "a client certificate joined a coordinator-only listener")
	// The server is not of the role the dialer wants.
	mustRefuse(t, addr, peer.ClientConfig(RoleNode, "127.0.0.1"), "dialer accepted a coordinator where it wanted a node")
	// Another CA's certificate, and another CA's server.
	other := testCA(t)
	stranger := load(t, writeSet(t, filepath.Join(dir, "x"), other, "c3", RoleCoordinator))
	mustRefuse(t, addr, stranger.ClientConfig(RoleCoordinator, "127.0.0.1"), "a certificate of another CA was accepted")
	// No certificate at all.
	anon, err := CAOnly(peer.files.CA)
	if err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, addr, anon.ClientConfig(RoleCoordinator, "127.0.0.1"), "an anonymous client passed RequireCert")
	// Plaintext TLS 1.2 only.
	old := peer.ClientConfig(RoleCoordinator, "127.0.0.1")
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	mustRefuse(t, addr, old, "TLS 1.2 accepted")
}

func TestOptionalCertAcceptsAnonymous(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t)
	srv := load(t, writeSet(t, filepath.Join(dir, "s"), ca, "c1", RoleCoordinator))
	addr, ids := serve(t, srv.ServerConfig(OptionalCert))
	anon, err := CAOnly(srv.files.CA)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(addr, anon.ClientConfig(RoleCoordinator, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if id := <-ids; id != (Identity{}) {
		t.Fatalf("anonymous seen as %v", id)
	}
	// A certificate that is sent is still verified.
	stranger := load(t, writeSet(t, filepath.Join(dir, "x"), testCA(t), "u", RoleClient))
	mustRefuse(t, addr, stranger.ClientConfig(RoleCoordinator, "127.0.0.1"), "a certificate of another CA was accepted")
}

func TestExpiredCertificateRefused(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t)
	srv := load(t, writeSet(t, filepath.Join(dir, "s"), ca, "c1", RoleCoordinator))
	addr, _ := serve(t, srv.ServerConfig(RequireCert))
	is, err := ca.Issue(Request{Name: "old", Role: RoleClient, Days: 1}, time.Now().AddDate(0, 0, -3))
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "e")
	WriteFiles(d, "old", is, false)
	os.WriteFile(filepath.Join(d, "ca.pem"), encodeCert(ca.Cert.Raw), 0o644)
	exp := load(t, Files{Cert: CertFile(d, "old"), Key: KeyFile(d, "old"), CA: filepath.Join(d, "ca.pem")})
	mustRefuse(t, addr, exp.ClientConfig(RoleCoordinator, "127.0.0.1"), "an expired certificate was accepted")
}

func TestHostNameChecked(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t)
	is, err := ca.Issue(Request{Name: "c1", Role: RoleCoordinator, DNS: []string{"c1.example"}, Days: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "s")
	WriteFiles(d, "c1", is, false)
	os.WriteFile(filepath.Join(d, "ca.pem"), encodeCert(ca.Cert.Raw), 0o644)
	srv := load(t, Files{Cert: CertFile(d, "c1"), Key: KeyFile(d, "c1"), CA: filepath.Join(d, "ca.pem")})
	addr, _ := serve(t, srv.ServerConfig(OptionalCert))
	cl, _ := CAOnly(filepath.Join(d, "ca.pem"))
	mustRefuse(t, addr, cl.ClientConfig(RoleCoordinator, "127.0.0.1"), "a certificate for c1.example served 127.0.0.1")
	c, err := dial(addr, cl.ClientConfig(RoleCoordinator, "c1.example"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestReloadRotatesWithoutDroppingConnections: a new certificate and a new
// CA (bundled with the old during the rollover) apply to new connections;
// a connection opened before keeps working; a broken file keeps the old
// material.
func TestReloadRotatesWithoutDroppingConnections(t *testing.T) {
	dir := t.TempDir()
	ca1 := testCA(t)
	sdir, pdir := filepath.Join(dir, "s"), filepath.Join(dir, "p")
	sf := writeSet(t, sdir, ca1, "c1", RoleCoordinator)
	srv := load(t, sf)
	addr, _ := serve(t, srv.ServerConfig(RequireCert))
	peer := load(t, writeSet(t, pdir, ca1, "c2", RoleCoordinator))
	old, err := dial(addr, peer.ClientConfig(RoleCoordinator, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	serial1 := old.ConnectionState().PeerCertificates[0].SerialNumber

	// Rotate both sides onto a new CA, trusting both CAs meanwhile.
	ca2 := testCA(t)
	both := [][]byte{encodeCert(ca1.Cert.Raw), encodeCert(ca2.Cert.Raw)}
	writeSet(t, sdir, ca2, "c1", RoleCoordinator, both...)
	writeSet(t, pdir, ca2, "c2", RoleCoordinator, both...)
	for _, s := range []*Source{srv, peer} {
		if changed, err := s.Reload(); err != nil || !changed {
			t.Fatalf("reload: %v, %v", changed, err)
		}
	}
	if changed, err := srv.Reload(); err != nil || changed {
		t.Fatalf("second reload of the same files: %v, %v", changed, err)
	}
	fresh, err := dial(addr, peer.ClientConfig(RoleCoordinator, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	fresh.Close()
	if fresh.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(serial1) == 0 {
		t.Fatal("the new connection saw the old certificate")
	}
	// The connection opened before the rotation still works.
	old.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := old.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(old, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	// A half-written file: the reload fails and the loaded material stays.
	before := srv.NotAfter()
	os.WriteFile(sf.Cert, []byte("-----BEGIN CERT"), 0o644)
	if _, err := srv.Reload(); err == nil {
		t.Fatal("a broken certificate file reloaded")
	}
	if !srv.NotAfter().Equal(before) {
		t.Fatal("a failed reload replaced the certificate")
	}
	c, err := dial(addr, peer.ClientConfig(RoleCoordinator, "127.0.0.1"))
	if err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
	c.Close()
}

func TestLoadRefusesMismatchedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t)
	f := writeSet(t, dir, ca, "n1", RoleNode)
	if _, err := Load(Files{Cert: f.Cert, Key: f.Key}, nil); err == nil {
		t.Fatal("loaded without a CA")
	}
	other := filepath.Join(dir, "other.pem")
	os.WriteFile(other, encodeCert(testCA(t).Cert.Raw), 0o644)
	if _, err := Load(Files{Cert: f.Cert, Key: f.Key, CA: other}, nil); err == nil {
		t.Fatal("loaded a certificate another CA signed")
	}
	is := issue(t, ca, "n2", RoleNode)
	WriteFiles(dir, "n2", is, false)
	if _, err := Load(Files{Cert: f.Cert, Key: KeyFile(dir, "n2"), CA: f.CA}, nil); err == nil {
		t.Fatal("loaded a certificate with another's key")
	}
}
