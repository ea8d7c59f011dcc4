package raftnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults for the acceptor side of the handshake.
const (
	// DefaultHandshakeTimeout bounds how long an accepted connection may take
	// to send its preamble and receive the answer.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultMaxPendingHandshakes bounds concurrently running handshakes.
	DefaultMaxPendingHandshakes = 64
	// MaxClusterIDLen is the longest cluster id the preamble can carry.
	MaxClusterIDLen = 255
)

// dropLogInterval rate-limits the warning about connections closed because
// too many handshakes are pending.
const dropLogInterval = 10 * time.Second

var _ raft.StreamLayer = (*StreamLayer)(nil)

// options are the tunables tests shorten; production uses the defaults.
type options struct {
	handshakeTimeout time.Duration
	maxPending       int
}

func defaultOptions() options {
	return options{handshakeTimeout: DefaultHandshakeTimeout, maxPending: DefaultMaxPendingHandshakes}
}

// StreamLayer is a raft.StreamLayer over TCP whose connections all passed
// the cluster-id handshake. It is safe for concurrent use.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	clusterID string
	preamble  []byte
	logger    *slog.Logger
	opts      options

	conns chan net.Conn  // handshaken connections, handed to Accept
	slots chan struct{}  // one token per pending handshake
	done  chan struct{}  // closed by Close
	once  sync.Once      // guards Close
	wg    sync.WaitGroup // accept loop and handshake goroutines
	fail  chan struct{}  // closed when the accept loop stopped on its own
	err   error          // why it stopped; written before fail is closed

	dial DialFunc // nil: plain TCP; set before first use
	tls  *TLS     // nil: plaintext

	mu          sync.Mutex
	closed      bool                       // guarded by mu
	handshaking map[net.Conn]struct{}      // guarded by mu; closed by Close
	accepted    map[*acceptedConn]struct{} // guarded by mu; closed by Close

	// Owned by the accept loop.
	dropped     int
	lastDropLog time.Time
}

// DialFunc opens the TCP connection for Dial; the handshake runs over it.
type DialFunc func(addr string, timeout time.Duration) (net.Conn, error)

// SetDialFunc replaces the TCP dialer (fault-injection tests cut the network
// this way). Call it before the stream layer is handed to a transport.
func (s *StreamLayer) SetDialFunc(fn DialFunc) { s.dial = fn }

// ValidateClusterID reports whether id can be used as a cluster id: it must
// be non-empty and at most MaxClusterIDLen bytes.
func ValidateClusterID(id string) error {
	switch {
	case id == "":
		return errors.New("raftnet: cluster id is empty")
	case len(id) > MaxClusterIDLen:
		return fmt.Errorf("raftnet: cluster id is %d bytes, at most %d allowed", len(id), MaxClusterIDLen)
	}
	return nil
}

// NewStreamLayer serves Raft connections accepted on ln and dials peers,
// requiring both sides to share clusterID. advertise is the address peers
// reach this node at (nil: ln.Addr()). A nil logger discards. The stream
// layer owns ln and closes it on Close.
//
// NewStreamLayer panics if clusterID fails ValidateClusterID; Listen
// returns that as an error instead.
func NewStreamLayer(ln net.Listener, advertise net.Addr, clusterID string, logger *slog.Logger) *StreamLayer {
	return newStreamLayer(ln, advertise, clusterID, logger, defaultOptions())
}

func newStreamLayer(ln net.Listener, advertise net.Addr, clusterID string, logger *slog.Logger, opts options) *StreamLayer {
	if err := ValidateClusterID(clusterID); err != nil {
		panic(err)
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &StreamLayer{
		ln:          ln,
		advertise:   advertise,
		clusterID:   clusterID,
		preamble:    encodePreamble(clusterID),
		logger:      logger,
		opts:        opts,
		conns:       make(chan net.Conn),
		slots:       make(chan struct{}, opts.maxPending),
		done:        make(chan struct{}),
		fail:        make(chan struct{}),
		handshaking: make(map[net.Conn]struct{}),
		accepted:    make(map[*acceptedConn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Listen listens for Raft connections on bindAddr (host:port) and advertises
// advertiseAddr to peers. An empty advertiseAddr means the listener's
// address, which needs a specific bind IP: binding 0.0.0.0 or [::] requires
// an explicit advertise address. The advertise host may be an IP address or
// a DNS name; it must not be unspecified and needs a non-zero port.
func Listen(bindAddr, advertiseAddr, clusterID string, logger *slog.Logger) (*StreamLayer, error) {
	return ListenTLS(bindAddr, advertiseAddr, clusterID, nil, logger)
}

// TLS is a stream layer's transport security: every accepted connection
// is a TLS server connection with Server, and every dial a TLS client
// connection with the configuration Client returns for the dialled host
// (built per dial, so a reloaded certificate or CA applies to the next
// connection). The cluster-id handshake runs inside TLS.
type TLS struct {
	Server *tls.Config
	Client func(host string) *tls.Config
}

// ListenTLS is Listen with transport security (nil: plaintext).
func ListenTLS(bindAddr, advertiseAddr, clusterID string, conf *TLS, logger *slog.Logger) (*StreamLayer, error) {
	if conf != nil && (conf.Server == nil || conf.Client == nil) {
		return nil, errors.New("raftnet: TLS needs both a server and a client configuration")
	}
	if err := ValidateClusterID(clusterID); err != nil {
		return nil, err
	}
	var advertise net.Addr
	if advertiseAddr != "" {
		a, err := parseAdvertise(advertiseAddr)
		if err != nil {
			return nil, err
		}
		advertise = a
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raftnet: listen on %q: %w", bindAddr, err)
	}
	if advertise == nil {
		if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raftnet: bind address %q is not advertisable, set an advertise address", bindAddr)
		}
	}
	if conf == nil {
		return NewStreamLayer(ln, advertise, clusterID, logger), nil
	}
	sl := NewStreamLayer(tls.NewListener(ln, conf.Server), advertise, clusterID, logger)
	sl.tls = conf
	return sl, nil
}

// hostAddr is an advertise address given by DNS name, kept unresolved.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

func parseAdvertise(s string) (net.Addr, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("raftnet: advertise address %q: %w", s, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("raftnet: advertise address %q needs a port in 1-65535", s)
	}
	if host == "" {
		return nil, fmt.Errorf("raftnet: advertise address %q needs a host", s)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return hostAddr(net.JoinHostPort(host, portStr)), nil
	}
	if ip.IsUnspecified() {
		return nil, fmt.Errorf("raftnet: advertise address %q is unspecified, peers cannot reach it", s)
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port))), nil
}

// Accept waits for the next connection that passed the handshake. After
// Close it returns an error wrapping net.ErrClosed.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			_ = c.Close()
			return nil, fmt.Errorf("raftnet: accept: %w", net.ErrClosed)
		}
		ac := &acceptedConn{Conn: c, s: s}
		s.accepted[ac] = struct{}{}
		return ac, nil
	case <-s.done:
		return nil, fmt.Errorf("raftnet: accept: %w", net.ErrClosed)
	case <-s.fail:
		return nil, s.err
	}
}

// Close stops listening, closes connections still in their handshake and
// makes Accept return an error. It waits for the stream layer's goroutines;
// connections already returned by Accept or Dial are the caller's. Close is
// idempotent; only the first call reports the listener's close error.
func (s *StreamLayer) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		for c := range s.handshaking {
			_ = c.Close()
		}
		// Accepted connections too: their reader goroutines (in the raft
		// transport) would otherwise wait until the peer hangs up.
		for c := range s.accepted {
			_ = c.Conn.Close()
		}
		s.accepted = nil
		s.mu.Unlock()
		close(s.done)
		if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("raftnet: close listener: %w", cerr)
		}
		s.wg.Wait()
	})
	return err
}

// Addr returns the advertise address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// acceptLoop accepts TCP connections and starts a handshake for each while
// slots are free.
func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				s.err = fmt.Errorf("raftnet: accept: %w", err)
				close(s.fail)
				return
			}
			// Transient (e.g. out of file descriptors): back off like net/http.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.logger.Warn("raft listener accept failed, retrying", "error", err, "retry-in", delay)
			t := time.NewTimer(delay)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		delay = 0
		select {
		case s.slots <- struct{}{}:
			s.wg.Add(1)
			go s.handshake(c)
		default:
			s.noteDropped(c)
			_ = c.Close()
		}
	}
}

// noteDropped logs, at most once per dropLogInterval, that connections were
// closed because all handshake slots were taken.
func (s *StreamLayer) noteDropped(c net.Conn) {
	s.dropped++
	now := time.Now()
	if now.Sub(s.lastDropLog) < dropLogInterval {
		return
	}
	s.logger.Warn("too many pending raft handshakes, closing new connections",
		"remote-addr", c.RemoteAddr().String(), "max-pending", s.opts.maxPending, "dropped", s.dropped)
	s.lastDropLog, s.dropped = now, 0
}

// acceptedConn is a connection handed out by Accept; the stream layer
// closes it on Close.
type acceptedConn struct {
	net.Conn
	s    *StreamLayer
	once sync.Once
}

func (c *acceptedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.accepted, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
