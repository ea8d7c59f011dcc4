package coordserver

import (
	"encoding/base64"
	"path/filepath"
	"strings"

	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/membership"

	"github.com/logbookhq/logbook/internal/pki"
)

// ClusterUser is the client certificate a secure Cluster makes for its
// callers (ClusterTLS.ClientTLS).
const ClusterUser = "admin"

// ClusterTLS is the throwaway PKI of a secure Cluster (ClusterOptions.
// Secure): a CA and one certificate per member and for ClusterUser, and
// the gossip key every member encrypts gossip with, under Dir. A directory that already holds them (a cluster started again on the
// same data) is reused.
type ClusterTLS struct {
	Dir string
	ca  *pki.CA
	// GossipKey encrypts the cluster's gossip (gossip.key in Dir).
	GossipKey []byte
}

func newClusterTLS(dir string) (*ClusterTLS, error) {
	t := &ClusterTLS{Dir: dir}
	certPath, keyPath := pki.CertFile(dir, "ca"), pki.KeyFile(dir, "ca")
	ca, err := pki.LoadCA(certPath, keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		var is pki.Issued
		if ca, is, err = pki.NewCA("Logbook throwaway CA", 30, time.Now()); err == nil {
			_, _, err = pki.WriteFiles(dir, "ca", is, false)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("coordserver: cluster TLS: %w", err)
	}
	t.ca = ca
	gossipPath := filepath.Join(dir, "gossip.key")
	b, err := os.ReadFile(gossipPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.GossipKey = membership.GenerateKey()
		err = durable.WriteFileMode(gossipPath, []byte(base64.StdEncoding.EncodeToString(t.GossipKey)+"\n"), 0o600)
	case err == nil:
		t.GossipKey, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	}
	if err != nil {
		return nil, fmt.Errorf("coordserver: cluster gossip key: %w", err)
	}
	return t, nil
}

// CA is the CA certificate's file.
func (t *ClusterTLS) CA() string { return pki.CertFile(t.Dir, "ca") }

// Files are the certificate files of (name, role), created when missing.
func (t *ClusterTLS) Files(name string, role pki.Role) (pki.Files, error) {
	f := pki.Files{Cert: pki.CertFile(t.Dir, name), Key: pki.KeyFile(t.Dir, name), CA: t.CA()}
	if _, err := os.Stat(f.Cert); errors.Is(err, fs.ErrNotExist) {
		is, err := t.ca.Issue(pki.Request{Name: name, Role: role, Days: 30}, time.Now())
		if err != nil {
			return pki.Files{}, err
		}
		if _, _, err := pki.WriteFiles(t.Dir, name, is, true); err != nil {
			return pki.Files{}, err
		}
	}
	return f, nil
}

// Source loads the certificate of (name, role), creating it when missing.
func (t *ClusterTLS) Source(name string, role pki.Role) (*pki.Source, error) {
	f, err := t.Files(name, role)
	if err != nil {
		return nil, fmt.Errorf("coordserver: cluster TLS: %w", err)
	}
	return pki.Load(f, nil)
}

// ClientTLS is the SDK's TLS as ClusterUser.
func (t *ClusterTLS) ClientTLS() (*tls.Config, error) {
	f, err := t.Files(ClusterUser, pki.RoleClient)
	if err != nil {
		return nil, err
	}
	return pki.StaticClientConfig(f.Cert, f.Key, f.CA)
}

// TLS is the secure cluster's PKI (nil unless ClusterOptions.Secure).
func (c *Cluster) TLS() *ClusterTLS { return c.tls }
