// Package httpserve is the HTTP endpoint of every Logbook process, the
// coordinator's and the storage node's alike: Prometheus metrics at
// /metrics, liveness at /healthz, readiness at /readyz (where the process
// has a notion of it), Go profiling under /debug/pprof/ when asked, the
// coordinator's web console at every other path, TLS when configured. It owns its listener and its serving goroutine; it
// knows nothing of Raft, gRPC or the dataset: the caller passes what each
// route reports.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/logbookhq/logbook/internal/pki"
)

// Config says what the endpoint serves.
type Config struct {
	// Addr is the listen address; port 0 picks a free one (Server.Addr).
	Addr string
	// TLS, when set, serves HTTPS with it.
	TLS *tls.Config
	// Metrics serves /metrics (nil: not served).
	Metrics http.Handler
	// Healthy answers /healthz: nil is 200 "ok", an error 503 with its
	// text. Required.
	Healthy func() error
	// Ready answers /readyz the same way (nil: /readyz is not served).
	Ready func() error
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Console, when set, serves every other path (the coordinator's web
	// console, internal/console, which authenticates its callers itself).
	Console http.Handler
	// Private, when set, guards /metrics and /debug/pprof/: a request it
	// returns an error for gets 403 with the error's text. /healthz and
	// /readyz stay open to probes.
	Private func(*http.Request) error
	// Logger takes the server's own errors (failed TLS handshakes, broken
	// requests) at warn level (nil: discarded).
	Logger *slog.Logger
	// OnServeError is called once if serving stops with an error before
	// Close (the listener failed); the caller usually stops the process.
	OnServeError func(error)
}

// Server is a running endpoint.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Healthy == nil {
		return nil, errors.New("httpserve: Config.Healthy is required")
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("httpserve: listen: %w", err)
	}
	mux := http.NewServeMux()
	if cfg.Metrics != nil {
		mux.Handle("/metrics", guard(cfg.Private, cfg.Metrics))
	}
	if cfg.Console != nil {
		mux.Handle("/", cfg.Console)
	}
	mux.Handle("/healthz", check(cfg.Healthy))
	if cfg.Ready != nil {
		mux.Handle("/readyz", check(cfg.Ready))
	}
	if cfg.Pprof {
		mux.Handle("/debug/pprof/", guard(cfg.Private, http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(cfg.Private, http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(cfg.Private, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(cfg.Private, http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(cfg.Private, http.HandlerFunc(pprof.Trace)))
	}
	s := &Server{
		ln:   ln,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: cfg.TLS, ErrorLog: errorLog(cfg.Logger)},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		var err error
		if cfg.TLS != nil {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) && cfg.OnServeError != nil {
			cfg.OnServeError(fmt.Errorf("httpserve: serve: %w", err))
		}
	}()
	return s, nil
}

func errorLog(l *slog.Logger) *log.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return slog.NewLogLogger(l.With("component", "http").Handler(), slog.LevelWarn)
}

// Secure serves cfg with the TLS of src (nil: plaintext, cfg unchanged):
// probes stay open, /metrics and pprof need a certificate of src's CA.
func (cfg *Config) Secure(src *pki.Source) {
	if src == nil {
		return
	}
	cfg.TLS = src.ServerConfig(pki.OptionalCert)
	cfg.Private = RequireCert
}

// RequireCert is a Config.Private that lets through requests with a
// client certificate verified at the TLS handshake.
func RequireCert(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return errors.New("this endpoint needs a client certificate of the cluster CA")
	}
	return nil
}

// guard answers 403 where allow refuses the request.
func guard(allow func(*http.Request) error, h http.Handler) http.Handler {
	if allow == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := allow(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check answers 200 "ok" while fn returns nil, else 503 with the error.
func check(fn func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, lets requests in flight finish for up to two
// seconds, and returns once the serving goroutine has ended.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	return err
}
