package raftnet

import (
	"crypto/tls"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/internal/pki"
)

// memberTLS is the Raft TLS of a process holding a certificate for (name,
// role) signed by ca, as a coordinator builds it: coordinator certificates
// only, both ways.
func memberTLS(t *testing.T, ca *pki.CA, name string, role pki.Role) *TLS {
	t.Helper()
	dir := t.TempDir()
	is, err := ca.Issue(pki.Request{Name: name, Role: role, Days: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.WriteFiles(dir, name, is, false); err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, pemCert(ca), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := pki.Load(pki.Files{Cert: pki.CertFile(dir, name), Key: pki.KeyFile(dir, name), CA: caPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &TLS{
		Server: src.ServerConfig(pki.RequireCert, pki.RoleCoordinator),
		Client: func(host string) *tls.Config { return src.ClientConfig(pki.RoleCoordinator, host) },
	}
}

func pemCert(ca *pki.CA) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// TestTLSAcceptsCoordinatorsOnly: the Raft port takes a connection only
// from a coordinator certificate of the cluster CA, and the cluster-id
// handshake still runs inside TLS.
func TestTLSAcceptsCoordinatorsOnly(t *testing.T) {
	ca, _, err := pki.NewCA("raft-ca", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ListenTLS("127.0.0.1:0", "", "c", memberTLS(t, ca, "c1", pki.RoleCoordinator), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	accepted := acceptAsync(a)
	dialer := func(conf *TLS, cluster string) error {
		b, err := ListenTLS("127.0.0.1:0", "", cluster, conf, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		c, err := b.Dial(rafAddr(a), 3*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dialer(memberTLS(t, ca, "c2", pki.RoleCoordinator), "c"); err != nil {
		t.Fatalf("a coordinator was refused: %v", err)
	}
	waitAccept(t, accepted).Close()
	other, _, _ := pki.NewCA("other", 1, time.Now())
	for name, conf := range map[string]*TLS{
		"node certificate":   memberTLS(t, ca, "n1", pki.RoleNode),
		"client certificate": memberTLS(t, ca, "u1", pki.RoleClient),
		"another CA":         memberTLS(t, other, "c2", pki.RoleCoordinator),
	} {
		if err := dialer(conf, "c"); err == nil {
			t.Errorf("%s: joined the Raft port", name)
		}
	}
	if err := dialer(memberTLS(t, ca, "c3", pki.RoleCoordinator), "other-cluster"); err == nil {
		t.Error("a coordinator of another cluster id passed the handshake")
	}
}

// TestAuthorizeMemberChecksTheClaimedID: over TLS an RPC whose header
// claims another member than the certificate names is refused before
// Raft sees it; the rightful member's goes through.
func TestAuthorizeMemberChecksTheClaimedID(t *testing.T) {
	ca, _, err := pki.NewCA("raft-ca", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ListenTLS("127.0.0.1:0", "", "c", memberTLS(t, ca, "c1", pki.RoleCoordinator), nil)
	if err != nil {
		t.Fatal(err)
	}
	ta := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: a, MaxPool: 1, Timeout: 5 * time.Second,
		AuthorizeRPC: AuthorizeMember(slog.New(slog.DiscardHandler))})
	defer ta.Close()
	go func() {
		for rpc := range ta.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		}
	}()
	send := func(certName, claim string) error {
		b, err := ListenTLS("127.0.0.1:0", "", "c", memberTLS(t, ca, certName, pki.RoleCoordinator), nil)
		if err != nil {
			t.Fatal(err)
		}
		tb := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: b, MaxPool: 1, Timeout: 5 * time.Second})
		defer tb.Close()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte(claim), Addr: []byte(b.Addr().String())}, Term: 7}
		var resp raft.AppendEntriesResponse
		err = tb.AppendEntries("c1", raft.ServerAddress(a.Addr().String()), req, &resp)
		if err == nil && !resp.Success {
			t.Fatalf("unexpected response %+v", resp)
		}
		return err
	}
	if err := send("c2", "c2"); err != nil {
		t.Fatalf("the rightful member was refused: %v", err)
	}
	if err := send("c9", "c2"); err == nil {
		t.Fatal("an RPC claiming c2 from c9's certificate was dispatched")
	}
}
