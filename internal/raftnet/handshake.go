package raftnet

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

const protocolVersion = 1

// A refused connection is drained of at most refuseDrainBytes for at most
// refuseLinger (or the handshake timeout, if shorter) before it is closed.
const (
	refuseDrainBytes = 64 << 10
	refuseLinger     = time.Second
)

var magic = []byte("LBRF")

// Handshake status bytes sent by the acceptor.
const (
	statusOK              byte = 0
	statusClusterMismatch byte = 1
	statusBadPreamble     byte = 2
)

var (
	// ErrClusterMismatch is wrapped by Dial errors when the peer belongs to
	// another cluster.
	ErrClusterMismatch = errors.New("raftnet: cluster id mismatch")
	// ErrHandshake is wrapped by Dial errors when the peer refused the
	// preamble (another protocol version) or answered with an unknown status.
	ErrHandshake = errors.New("raftnet: handshake refused")
)

func encodePreamble(clusterID string) []byte {
	b := make([]byte, 0, len(magic)+2+len(clusterID))
	b = append(b, magic...)
	b = append(b, protocolVersion, byte(len(clusterID)))
	return append(b, clusterID...)
}

// Dial connects to a peer and performs the handshake; timeout bounds both
// (a non-positive timeout uses DefaultHandshakeTimeout). It fails with an
// error wrapping ErrClusterMismatch when the peer belongs to another cluster.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	deadline := time.Now().Add(timeout)
	var conn net.Conn
	var err error
	if s.dial != nil {
		conn, err = s.dial(string(address), timeout)
	} else {
		d := net.Dialer{Deadline: deadline}
		conn, err = d.Dial("tcp", string(address))
	}
	if err != nil {
		return nil, fmt.Errorf("raftnet: %w", err)
	}
	if s.tls != nil {
		host, _, err := net.SplitHostPort(string(address))
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("raftnet: %w", err)
		}
		tc := tls.Client(conn, s.tls.Client(host))
		_ = tc.SetDeadline(deadline)
		if err := tc.Handshake(); err != nil {
			_ = tc.Close()
			return nil, fmt.Errorf("raftnet: TLS with %s: %w", address, err)
		}
		conn = tc
	}
	if err := s.clientHandshake(conn, string(address), deadline); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

func (s *StreamLayer) clientHandshake(conn net.Conn, addr string, deadline time.Time) error {
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("raftnet: handshake with %s: %w", addr, err)
	}
	if _, err := conn.Write(s.preamble); err != nil {
		return fmt.Errorf("raftnet: handshake with %s: send preamble: %w", addr, err)
	}
	var status [1]byte
	if _, err := io.ReadFull(conn, status[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("raftnet: handshake with %s: peer closed the connection without answering (not a raftnet listener, or overloaded): %w", addr, err)
		}
		return fmt.Errorf("raftnet: handshake with %s: read status: %w", addr, err)
	}
	switch status[0] {
	case statusOK:
	case statusClusterMismatch:
		if peer, err := readClusterID(conn); err == nil {
			return fmt.Errorf("%w: peer at %s belongs to cluster %q, we are %q", ErrClusterMismatch, addr, peer, s.clusterID)
		}
		return fmt.Errorf("%w: peer at %s belongs to another cluster, we are %q", ErrClusterMismatch, addr, s.clusterID)
	case statusBadPreamble:
		return fmt.Errorf("%w: peer at %s rejected our preamble (protocol version %d)", ErrHandshake, addr, protocolVersion)
	default:
		return fmt.Errorf("%w: peer at %s answered unknown status %d", ErrHandshake, addr, status[0])
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("raftnet: handshake with %s: %w", addr, err)
	}
	return nil
}

// readClusterID reads a length byte and that many bytes.
func readClusterID(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	id := make([]byte, n[0])
	if _, err := io.ReadFull(r, id); err != nil {
		return "", err
	}
	return string(id), nil
}

// handshake verifies one accepted connection and hands it to Accept.
func (s *StreamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.slots }()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	s.handshaking[c] = struct{}{}
	s.mu.Unlock()

	ok := s.serverHandshake(c)

	s.mu.Lock()
	delete(s.handshaking, c)
	s.mu.Unlock()
	if !ok {
		_ = c.Close()
		return
	}
	select {
	case s.conns <- c:
	case <-s.done:
		_ = c.Close()
	}
}

// closing reports whether Close has started.
func (s *StreamLayer) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// serverHandshake reads the preamble and answers it; it reports whether the
// connection may carry Raft traffic.
func (s *StreamLayer) serverHandshake(c net.Conn) bool {
	remote := c.RemoteAddr().String()
	if err := c.SetDeadline(time.Now().Add(s.opts.handshakeTimeout)); err != nil {
		s.logger.Debug("raft handshake aborted", "remote-addr", remote, "error", err)
		return false
	}
	reject := func(reason string, err error) bool {
		if s.closing() {
			return false // Close interrupted the handshake: not the peer's fault
		}
		args := []any{"remote-addr", remote, "want-cluster-id", s.clusterID, "got-cluster-id", "", "reason", reason}
		if err != nil {
			args = append(args, "error", err)
		}
		s.logger.Warn("refused raft connection: bad handshake preamble", args...)
		s.refuse(c, []byte{statusBadPreamble})
		return false
	}

	var hdr [6]byte
	if n, err := io.ReadFull(c, hdr[:len(magic)]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			// A TCP health check or port probe: not worth a warning.
			s.logger.Debug("raft connection closed before handshake", "remote-addr", remote)
			return false
		}
		return reject("reading magic", err)
	}
	if !bytes.Equal(hdr[:len(magic)], magic) {
		return reject(fmt.Sprintf("bad magic %q", hdr[:len(magic)]), nil)
	}
	if _, err := io.ReadFull(c, hdr[len(magic):]); err != nil {
		return reject("reading version", err)
	}
	if v := hdr[len(magic)]; v != protocolVersion {
		return reject(fmt.Sprintf("unsupported protocol version %d", v), nil)
	}
	id := make([]byte, hdr[len(magic)+1])
	if _, err := io.ReadFull(c, id); err != nil {
		return reject("reading cluster id", err)
	}
	if string(id) != s.clusterID {
		s.logger.Warn("refused raft connection from another cluster", "remote-addr", remote,
			"want-cluster-id", s.clusterID, "got-cluster-id", string(id))
		s.refuse(c, append([]byte{statusClusterMismatch, byte(len(s.clusterID))}, s.clusterID...))
		return false
	}
	if _, err := c.Write([]byte{statusOK}); err != nil {
		s.logger.Debug("raft handshake aborted", "remote-addr", remote, "error", err)
		return false
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return false
	}
	return true
}

// refuse sends reply and then closes gracefully: it half-closes and drains
// what the peer still sends, so that the peer reads the status instead of a
// connection reset caused by unread data. The caller closes c.
func (s *StreamLayer) refuse(c net.Conn, reply []byte) {
	// The handshake deadline may have passed already (silent client).
	_ = c.SetDeadline(time.Now().Add(min(s.opts.handshakeTimeout, refuseLinger)))
	if _, err := c.Write(reply); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c, refuseDrainBytes))
	}
}
