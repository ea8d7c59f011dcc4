package httpserve

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRoutes(t *testing.T) {
	var sick, unready atomic.Bool
	s, err := Start(Config{
		Addr:    "127.0.0.1:0",
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "logbook_up 1\n") }),
		Healthy: func() error {
			if sick.Load() {
				return errors.New("raft is shut down")
			}
			return nil
		},
		Ready: func() error {
			if unready.Load() {
				return errors.New("no leader known")
			}
			return nil
		},
		Pprof: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "http://" + s.Addr()
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/metrics", 200, "logbook_up 1"},
		{"/healthz", 200, "ok"},
		{"/readyz", 200, "ok"},
		{"/debug/pprof/cmdline", 200, ""},
		{"/nothing", 404, ""},
	} {
		if code, body := get(t, base+c.path); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, code, body, c.code, c.body)
		}
	}
	sick.Store(true)
	unready.Store(true)
	if code, body := get(t, base+"/healthz"); code != 503 || !strings.Contains(body, "raft is shut down") {
		t.Errorf("/healthz when sick: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "no leader known") {
		t.Errorf("/readyz when not ready: %d %q", code, body)
	}
}

func TestWithoutOptionalRoutes(t *testing.T) {
	s, err := Start(Config{Addr: "127.0.0.1:0", Healthy: func() error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr()
	for _, p := range []string{"/readyz", "/metrics", "/debug/pprof/"} {
		if code, _ := get(t, base+p); code != 404 {
			t.Errorf("GET %s without it configured: %d, want 404", p, code)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := Start(Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("started without a health check")
	}
	s, err := Start(Config{Addr: "127.0.0.1:0", Healthy: func() error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Start(Config{Addr: s.Addr(), Healthy: func() error { return nil }}); err == nil {
		t.Fatal("started on an address already in use")
	}
}
