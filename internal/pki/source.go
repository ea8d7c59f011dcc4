package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Files names a process's certificate, its private key and the cluster CA
// bundle, all PEM.
type Files struct {
	Cert, Key, CA string
}

// Set reports whether any file is named.
func (f Files) Set() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Validate checks that all three files are named.
func (f Files) Validate() error {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return errors.New("TLS needs a certificate, its key and the CA (--tls-cert, --tls-key, --tls-ca)")
	}
	return nil
}

// Source holds the current certificate, key and CA pool read from Files
// and reloads them (Reload). TLS configurations from ServerConfig
// and ClientConfig read the current values at every handshake.
type Source struct {
	files Files
	log   *slog.Logger
	mu    sync.Mutex // serialises Reload
	raw   [3][]byte  // the files' bytes at the last load
	cur   atomic.Pointer[material]
}

type material struct {
	cert *tls.Certificate // Leaf set
	id   Identity
	pool *x509.CertPool
}

// Load reads f and returns a Source over it. The certificate must name a
// Logbook identity (IdentityOf) and be signed by the CA.
func Load(f Files, log *slog.Logger) (*Source, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: f, log: log}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. It reports whether anything changed; on
// an error it keeps what was loaded before.
func (s *Source) Reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var raw [3][]byte
	for i, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		b, err := os.ReadFile(p)
		if err != nil {
			return false, fmt.Errorf("pki: %w", err)
		}
		raw[i] = b
	}
	if s.cur.Load() != nil && bytes.Equal(raw[0], s.raw[0]) && bytes.Equal(raw[1], s.raw[1]) && bytes.Equal(raw[2], s.raw[2]) {
		return false, nil
	}
	m, err := parseMaterial(raw[0], raw[1], raw[2])
	if err != nil {
		return false, fmt.Errorf("pki: %s, %s, %s: %w", s.files.Cert, s.files.Key, s.files.CA, err)
	}
	s.raw = raw
	s.cur.Store(m)
	return true, nil
}

func parseMaterial(certPEM, keyPEM, caPEM []byte) (*material, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cas, err := ParseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	leaf := cert.Leaf
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	// An expired certificate still loads (and serves nobody: peers refuse
	// it); its expiry shows in coord status and a metric.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		var inv x509.CertificateInvalidError
		if !errors.As(err, &inv) || inv.Reason != x509.Expired {
			return nil, fmt.Errorf("the certificate is not signed by the CA: %w", err)
		}
	}
	return &material{cert: &cert, id: id, pool: pool}, nil
}

// Identity is the identity the current certificate names.
func (s *Source) Identity() Identity { return s.cur.Load().id }

// NotAfter is the current certificate's expiry.
func (s *Source) NotAfter() time.Time { return s.cur.Load().cert.Leaf.NotAfter }

// ReloadAndLog is Reload with its outcome logged; why says what asked
// for it.
func (s *Source) ReloadAndLog(why string) {
	changed, err := s.Reload()
	switch {
	case err != nil:
		s.log.Error("TLS reload failed; the loaded certificate stays in use", "trigger", why, "error", err)
	case changed:
		s.log.Info("TLS certificate and CA reloaded", "trigger", why, "identity", s.Identity().String(), "not-after", s.NotAfter())
	}
}

// ClientAuth is what a listener asks of the other side's certificate.
type ClientAuth int

const (
	// RequireCert refuses a connection without a valid certificate.
	RequireCert ClientAuth = iota
	// OptionalCert verifies a certificate when one is sent (clients with a
	// token send none).
	OptionalCert
)

// ServerConfig is the TLS configuration of a listener: TLS 1.3, this
// Source's current certificate, and peers' certificates verified against
// the current CA. A peer certificate must name an identity whose role is
// one of roles (every role when roles is empty).
func (s *Source) ServerConfig(auth ClientAuth, roles ...Role) *tls.Config {
	ca := tls.RequireAndVerifyClientCert
	if auth == OptionalCert {
		ca = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   ca,
				NextProtos:   []string{"h2", "http/1.1"},
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 {
						return nil // only reached with OptionalCert
					}
					return checkRole(cs.PeerCertificates[0], roles)
				},
			}, nil
		},
	}
}

// ClientConfig is the TLS configuration of one dial to serverName (a host
// name or IP address, without a port): TLS 1.3, this Source's current
// certificate, and the server's certificate verified against the current
// CA and serverName; it must name an identity of role want. Build one per
// dial so that a reloaded CA applies to the next connection.
func (s *Source) ClientConfig(want Role, serverName string) *tls.Config {
	m := s.cur.Load()
	return clientConfig(m.pool, m.cert, want, serverName)
}

func clientConfig(pool *x509.CertPool, cert *tls.Certificate, want Role, serverName string) *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		ServerName: serverName,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pki: the server sent no certificate")
			}
			return checkRole(cs.PeerCertificates[0], []Role{want})
		},
	}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// Dialer makes the client TLS configuration of each dial.
type Dialer interface {
	ClientConfig(want Role, serverName string) *tls.Config
}

// CAOnly is a Dialer that trusts the CA bundle in caFile and presents no
// certificate (a client that authenticates with a token). The CA is read
// once.
func CAOnly(caFile string) (Dialer, error) {
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	return caOnly{pool}, nil
}

// LoadPool reads a PEM CA bundle into a pool.
func LoadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	cas, err := ParseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	return pool, nil
}

type caOnly struct{ pool *x509.CertPool }

func (c caOnly) ClientConfig(want Role, serverName string) *tls.Config {
	return clientConfig(c.pool, nil, want, serverName)
}

func checkRole(c *x509.Certificate, roles []Role) error {
	id, err := IdentityOf(c)
	if err != nil {
		return err
	}
	if len(roles) > 0 && !slices.Contains(roles, id.Role) {
		return fmt.Errorf("pki: certificate of %s: role %s is not accepted here (want %v)", id.Name, id.Role, roles)
	}
	return nil
}

// StaticClientConfig is a client TLS configuration read once from files:
// it trusts the CA bundle in caFile and, when certFile and keyFile are
// given, presents that certificate. The server must present a coordinator
// or node certificate of that CA for the address dialled (the SDK's
// LoadTLS).
func StaticClientConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, errors.New("TLS needs the cluster CA file")
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and key files")
	}
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pki: the server sent no certificate")
			}
			return checkRole(cs.PeerCertificates[0], []Role{RoleCoordinator, RoleNode})
		},
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
