// Package tlsflag is the --tls-cert, --tls-key, --tls-ca and
// --tls-reload-interval flags that coord serve, node serve and the CLI
// share, and the reloading of what they name: on SIGHUP and whenever the
// files change.
package tlsflag

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/logbookhq/logbook/internal/pki"
	"github.com/spf13/pflag"
)

// DefaultReloadInterval is how often a server looks at its TLS files.
const DefaultReloadInterval = 10 * time.Second

// Flags are the parsed values.
type Flags struct {
	pki.Files
	ReloadInterval time.Duration
}

// Add registers the flags on fs; reload adds --tls-reload-interval (for
// servers, which keep running while the files are rotated).
func Add(fs *pflag.FlagSet, reload bool) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Cert, "tls-cert", "", "PEM certificate of this process (coord tls cert create); with --tls-key and --tls-ca it turns TLS on for every connection")
	fs.StringVar(&f.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.CA, "tls-ca", "", "PEM bundle of the cluster CA (more than one CA while rotating)")
	if reload {
		fs.DurationVar(&f.ReloadInterval, "tls-reload-interval", DefaultReloadInterval, "how often to look for changed TLS files (they are also reloaded on SIGHUP)")
	}
	return f
}

// Source loads the files into a pki.Source; nil, nil when no TLS flag is
// given.
func (f *Flags) Source(log *slog.Logger) (*pki.Source, error) {
	if !f.Set() {
		return nil, nil
	}
	if f.ReloadInterval < 0 {
		return nil, errors.New("--tls-reload-interval must not be negative")
	}
	return pki.Load(f.Files, log)
}

// Watch reloads src on SIGHUP and every interval (0: only on SIGHUP) until
// ctx ends. Each reload is logged; a failed one keeps the loaded files.
func Watch(ctx context.Context, src *pki.Source, interval time.Duration) {
	if src == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			src.ReloadAndLog("SIGHUP")
		case <-tick:
			src.ReloadAndLog("files changed")
		}
	}
}
