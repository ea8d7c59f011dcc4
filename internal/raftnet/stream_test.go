package raftnet

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestSameClusterExchangesBytes(t *testing.T) {
	a, _ := newLayer(t, "c1", defaultOptions())
	b, _ := newLayer(t, "c1", defaultOptions())
	accepted := acceptAsync(b)
	client := mustDial(t, a, b.Addr())
	server := waitAccept(t, accepted)

	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := server.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}
}

func TestClusterMismatch(t *testing.T) {
	mine, _ := newLayer(t, "mine", defaultOptions())
	other, logs := newLayer(t, "other", defaultOptions())
	accepted := acceptAsync(other)

	_, err := mine.Dial(raft.ServerAddress(other.Addr().String()), waitFor)
	if !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("Dial error = %v, want ErrClusterMismatch", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `belongs to cluster "other", we are "mine"`) ||
		!strings.Contains(msg, other.Addr().String()) {
		t.Errorf("error message %q", msg)
	}
	// The acceptor logs before it answers, so the warning is already there.
	for _, want := range []string{"level=WARN", "remote-addr=127.0.0.1:", "want-cluster-id=other", "got-cluster-id=mine"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	// The refused connection never reaches Accept: the next accepted one is
	// a good connection dialed afterwards.
	peer, _ := newLayer(t, "other", defaultOptions())
	good := mustDial(t, peer, other.Addr())
	server := waitAccept(t, accepted)
	if server.RemoteAddr().String() != good.LocalAddr().String() {
		t.Fatalf("accepted %v, want the good connection from %v", server.RemoteAddr(), good.LocalAddr())
	}
}

func TestGarbageDoesNotBlockAccept(t *testing.T) {
	opts := defaultOptions()
	opts.handshakeTimeout = time.Minute // a silent client must not hold up anything
	s, _ := newLayer(t, "c1", opts)
	accepted := acceptAsync(s)

	silent := dialRaw(t, s.Addr())
	garbage := dialRaw(t, s.Addr())
	if _, err := garbage.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	expectStatusThenClose(t, garbage, statusBadPreamble)

	peer, _ := newLayer(t, "c1", defaultOptions())
	good := mustDial(t, peer, s.Addr())
	server := waitAccept(t, accepted)
	if server.RemoteAddr().String() != good.LocalAddr().String() {
		t.Fatalf("accepted %v, want %v", server.RemoteAddr(), good.LocalAddr())
	}

	// Close ends the silent client's pending handshake without waiting for
	// its timeout.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := silent.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent client read %d, %v; want the connection closed", n, err)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	opts := defaultOptions()
	opts.handshakeTimeout = 50 * time.Millisecond
	s, logs := newLayer(t, "c1", opts)
	silent := dialRaw(t, s.Addr())
	expectStatusThenClose(t, silent, statusBadPreamble)
	if !strings.Contains(logs.String(), "reason=\"reading magic\"") {
		t.Errorf("log lacks the timeout warning:\n%s", logs.String())
	}
}

func TestBadVersion(t *testing.T) {
	s, _ := newLayer(t, "c1", defaultOptions())
	c := dialRaw(t, s.Addr())
	if _, err := c.Write([]byte("LBRF\x02\x02c1")); err != nil {
		t.Fatal(err)
	}
	expectStatusThenClose(t, c, statusBadPreamble)
}

func TestDialSeesBadPreambleStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a peer speaking a newer protocol
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.ReadFull(c, make([]byte, 8))
		_, _ = c.Write([]byte{statusBadPreamble})
	}()
	s, _ := newLayer(t, "c1", defaultOptions())
	if _, err := s.Dial(raft.ServerAddress(ln.Addr().String()), waitFor); !errors.Is(err, ErrHandshake) {
		t.Fatalf("Dial error = %v, want ErrHandshake", err)
	}
}

func TestDialTimesOutOnSilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, _ := newLayer(t, "c1", defaultOptions())
	start := time.Now()
	_, err = s.Dial(raft.ServerAddress(ln.Addr().String()), 100*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Dial error = %v, want a deadline error", err)
	}
	if elapsed := time.Since(start); elapsed > waitFor {
		t.Fatalf("Dial took %v", elapsed)
	}
}

func TestPendingHandshakeLimit(t *testing.T) {
	opts := defaultOptions()
	opts.handshakeTimeout = time.Minute
	opts.maxPending = 2
	s, logs := newLayer(t, "c1", opts)
	first := dialRaw(t, s.Addr())
	_ = dialRaw(t, s.Addr())
	// Connections are accepted in order, so the third finds no free slot
	// and is closed without an answer.
	third := dialRaw(t, s.Addr())
	if got, err := io.ReadAll(third); err != nil || len(got) != 0 {
		t.Fatalf("third connection read %q, %v; want immediate close", got, err)
	}
	if !strings.Contains(logs.String(), "max-pending=2") {
		t.Errorf("log lacks the overload warning:\n%s", logs.String())
	}

	// Freeing a slot lets a good connection through again.
	_ = first.Close()
	accepted := acceptAsync(s)
	peer, _ := newLayer(t, "c1", defaultOptions())
	deadline := time.Now().Add(waitFor)
	for {
		c, err := peer.Dial(raft.ServerAddress(s.Addr().String()), waitFor)
		if err == nil {
			defer c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot freed: %v", err)
		}
	}
	waitAccept(t, accepted)
}

func TestCloseUnblocksAccept(t *testing.T) {
	s, _ := newLayer(t, "c1", defaultOptions())
	accepted := acceptAsync(s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-accepted:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("Accept after Close = %v, %v; want net.ErrClosed", r.conn, r.err)
		}
	case <-time.After(waitFor):
		t.Fatal("Accept still blocked after Close")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on closed layer = %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), waitFor); err == nil {
		t.Fatal("listener still open after Close")
	}
}

func TestListenerClosedUnderneath(t *testing.T) {
	s, _ := newLayer(t, "c1", defaultOptions())
	_ = s.ln.Close()
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept = %v, want net.ErrClosed", err)
	}
}
