package client

import (
	"crypto/tls"
	"fmt"

	"github.com/logbookhq/logbook/internal/pki"
)

// LoadTLS is the Config.TLS of a client of a cluster that runs with TLS:
// it trusts the cluster CA in caFile and, when certFile and keyFile are
// given, presents that client certificate (coord tls cert create --role
// client). Servers must present a coordinator or storage node certificate
// of that CA for the address dialled. The files are read once.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	conf, err := pki.StaticClientConfig(certFile, keyFile, caFile)
	if err != nil {
		return nil, fmt.Errorf("logbook: %w", err)
	}
	return conf, nil
}
