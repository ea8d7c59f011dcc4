package tlsflag

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/poll"
	"github.com/spf13/pflag"
)

// issue writes a certificate for c1 valid for days, and the CA, into dir.
func issue(t *testing.T, ca *pki.CA, dir string, days int) pki.Files {
	t.Helper()
	is, err := ca.Issue(pki.Request{Name: "c1", Role: pki.RoleCoordinator, Days: days}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.WriteFiles(dir, "c1", is, true); err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca-src.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caPath, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return pki.Files{Cert: pki.CertFile(dir, "c1"), Key: pki.KeyFile(dir, "c1"), CA: caPath}
}

func setup(t *testing.T) (*pki.CA, string) {
	dir := t.TempDir()
	ca, is, err := pki.NewCA("t", 30, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-src.pem"), is.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func TestWatchReloadsChangedFiles(t *testing.T) {
	ca, dir := setup(t)
	src, err := pki.Load(issue(t, ca, dir, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := src.NotAfter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Watch(ctx, src, 10*time.Millisecond)
	issue(t, ca, dir, 2)
	if !poll.Within(10*time.Second, func() bool { return src.NotAfter().After(first) }) {
		t.Fatal("the rewritten certificate was not reloaded")
	}
}

func TestWatchReloadsOnSIGHUP(t *testing.T) {
	ca, dir := setup(t)
	src, err := pki.Load(issue(t, ca, dir, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := src.NotAfter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A SIGHUP delivered while Watch is not registered (before it starts,
	// or late, after it stopped) must not kill the test binary: keep a
	// handler for the binary's lifetime.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	go Watch(ctx, src, 0) // SIGHUP only
	issue(t, ca, dir, 2)
	// Watch registers for SIGHUP when it starts: send until it reloads.
	if !poll.Within(10*time.Second, func() bool {
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		return src.NotAfter().After(first)
	}) {
		t.Fatal("SIGHUP did not reload the certificate")
	}
}

func TestFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f := Add(fs, true)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if src, err := f.Source(nil); src != nil || err != nil {
		t.Fatalf("no flags: %v, %v", src, err)
	}
	if err := fs.Parse([]string{"--tls-cert", "c.pem"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Source(nil); err == nil {
		t.Fatal("a certificate without its key and CA loaded")
	}
	if f.ReloadInterval != DefaultReloadInterval {
		t.Fatalf("reload interval %v", f.ReloadInterval)
	}
}
