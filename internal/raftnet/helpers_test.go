package raftnet

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// waitFor bounds every wait in these tests.
const waitFor = 5 * time.Second

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLayer(t *testing.T, clusterID string, opts options) (*StreamLayer, *logBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newStreamLayer(ln, nil, clusterID, logger, opts)
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

type acceptResult struct {
	conn net.Conn
	err  error
}

// acceptAsync runs one Accept in the background.
func acceptAsync(s *StreamLayer) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := s.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

func waitAccept(t *testing.T, ch <-chan acceptResult) net.Conn {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { _ = r.conn.Close() })
		return r.conn
	case <-time.After(waitFor):
		t.Fatal("Accept did not return")
		return nil
	}
}

func dialRaw(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), waitFor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitFor))
	return c
}

func mustDial(t *testing.T, s *StreamLayer, to net.Addr) net.Conn {
	t.Helper()
	c, err := s.Dial(raft.ServerAddress(to.String()), waitFor)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// expectStatusThenClose reads the acceptor's status byte and then EOF.
func expectStatusThenClose(t *testing.T, c net.Conn, want byte) {
	t.Helper()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, got)
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("acceptor sent %v, want status %d then close", got, want)
	}
}
