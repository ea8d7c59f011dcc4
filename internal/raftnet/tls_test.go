package raftnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"github.com/hashicorp/raft"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSignedTLS returns a config that serves and trusts one certificate
// for 127.0.0.1, with client certificates required (mutual TLS).
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "logbook-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13,
	}
}

// tlsOf serves and dials with conf, checking the dialled host.
func tlsOf(conf *tls.Config) *TLS {
	return &TLS{Server: conf, Client: func(host string) *tls.Config {
		c := conf.Clone()
		c.ServerName = host
		return c
	}}
}

func TestTLSHandshakeAndPlaintextRefused(t *testing.T) {
	conf := selfSignedTLS(t)
	a, err := ListenTLS("127.0.0.1:0", "", "tls-cluster", tlsOf(conf), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenTLS("127.0.0.1:0", "", "tls-cluster", tlsOf(conf), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	accepted := acceptAsync(a)
	c, err := b.Dial(rafAddr(a), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := waitAccept(t, accepted)
	defer s.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	// A plaintext stream layer cannot talk to the TLS one.
	p, err := Listen("127.0.0.1:0", "", "tls-cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if c2, err := p.Dial(rafAddr(a), 2*time.Second); err == nil {
		c2.Close()
		t.Fatal("plaintext dial to a TLS stream layer succeeded")
	}
}

func rafAddr(s *StreamLayer) raft.ServerAddress { return raft.ServerAddress(s.Addr().String()) }
