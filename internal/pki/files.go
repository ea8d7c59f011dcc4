package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logbookhq/logbook/internal/durable"
)

// File names in a directory written by WriteFiles: NAME.pem and
// NAME-key.pem (cfssl's convention).
func CertFile(dir, name string) string { return filepath.Join(dir, name+".pem") }

// KeyFile is the key file beside CertFile.
func KeyFile(dir, name string) string { return filepath.Join(dir, name+"-key.pem") }

// WriteFiles writes is as NAME.pem (mode 0644) and NAME-key.pem (mode
// 0600) in dir, each fsynced, and refuses to overwrite either file unless
// force is set.
func WriteFiles(dir, name string, is Issued, force bool) (certPath, keyPath string, err error) {
	certPath, keyPath = CertFile(dir, name), KeyFile(dir, name)
	if !force {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Stat(p); err == nil {
				return "", "", fmt.Errorf("%s exists (refusing to overwrite it)", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return "", "", err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := durable.WriteFileMode(keyPath, is.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := durable.WriteFileMode(certPath, is.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := durable.SyncDir(dir); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// LoadCA reads a CA written by WriteFiles (or any PEM certificate and key).
func LoadCA(certPath, keyPath string) (*CA, error) {
	c, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	k, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	ca, err := ParseCA(c, k)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	return ca, nil
}
