package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// memberlist v0.5.4 trusts some length fields of TCP streams: a push/pull
// header announcing a negative or huge node count or user-state length, a
// user-message header with such a length, or a compressed stream that
// decompresses to nothing makes it panic in a connection goroutine it does not
// recover, which kills the process (fixed in memberlist v0.7.0, which this
// module cannot use yet). Without a SecretKey anyone who can reach the gossip
// port and knows the cluster ID can send such a stream.
//
// guardedTransport closes that hole: it wraps memberlist's NetTransport and
// inspects the start of every stream, inbound and outbound, before memberlist
// reads it. Streams this package never produces (user messages, compressed
// streams: compression is disabled) and push/pull headers with out-of-range
// counts are rejected; everything else is replayed to memberlist unchanged.
// Encrypted streams are passed through: memberlist authenticates them before
// decoding, so only holders of the key can send them.

// maxPushPullNodes bounds the node count of an accepted push/pull header.
const maxPushPullNodes = 1 << 14

// memberlist wire message types (memberlist v0.5.4 net.go and label.go).
const (
	wirePushPull = 6
	wireUser     = 8
	wireCompress = 9
	wireLabel    = 244
)

// pushPullHeader mirrors memberlist's header; field names are the msgpack
// map keys.
type pushPullHeader struct {
	Nodes        int
	UserStateLen int
	Join         bool
}

// errEmptyStream marks a stream closed before sending anything (port
// scanners, health checks).
var errEmptyStream = errors.New("membership: empty gossip stream")

// guardedTransport also holds every inbound packet and stream back until
// open is called, once memberlist.Create has returned: memberlist listens
// before it records the local member, so gossip that arrives first (a member
// restarted at an address another member just left hears that one's gossip
// at once) could name the local member at another address, and memberlist
// would keep that entry for itself instead of its own. Packets are dropped
// and streams closed until then; the protocol resends both.
type guardedTransport struct {
	*memberlist.NetTransport
	log     *slog.Logger
	timeout time.Duration
	streams chan net.Conn
	packets chan *memberlist.Packet
	opened  chan struct{}
	early   atomic.Uint64 // packets dropped before open
	done    chan struct{}
	once    sync.Once
	openOne sync.Once
}

var _ memberlist.NodeAwareTransport = (*guardedTransport)(nil)

// newGuardedTransport binds a NetTransport on host:port, retrying a few times
// when port is 0 because TCP and UDP must get the same free port.
func newGuardedTransport(host string, port int, logger *slog.Logger, timeout time.Duration) (*guardedTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: newStdLogger(logger, nil)}
	var nt *memberlist.NetTransport
	var err error
	for try := 0; try < 10; try++ {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || port != 0 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	g := &guardedTransport{
		NetTransport: nt,
		log:          logger,
		timeout:      timeout,
		streams:      make(chan net.Conn),
		packets:      make(chan *memberlist.Packet),
		opened:       make(chan struct{}),
		done:         make(chan struct{}),
	}
	go g.forward()
	go g.forwardPackets()
	return g, nil
}

// open lets inbound packets and streams through to memberlist.
func (g *guardedTransport) open() { g.openOne.Do(func() { close(g.opened) }) }

func (g *guardedTransport) isOpen() bool {
	select {
	case <-g.opened:
		return true
	default:
		return false
	}
}

// forwardPackets hands inbound packets to memberlist once open, dropping
// those that come before. It always takes the NetTransport's packets, whose
// listener blocks (and whose Shutdown waits) until someone does.
func (g *guardedTransport) forwardPackets() {
	for {
		select {
		case p := <-g.NetTransport.PacketCh():
			if !g.isOpen() {
				g.early.Add(1)
				continue
			}
			select {
			case g.packets <- p:
			case <-g.done:
				return
			}
		case <-g.done:
			return
		}
	}
}

// PacketCh returns the inbound packets received since open.
func (g *guardedTransport) PacketCh() <-chan *memberlist.Packet { return g.packets }

// forward inspects inbound streams concurrently, as memberlist handles each
// in its own goroutine too.
func (g *guardedTransport) forward() {
	for {
		select {
		case conn := <-g.NetTransport.StreamCh():
			go g.admit(conn)
		case <-g.done:
			return
		}
	}
}

func (g *guardedTransport) admit(conn net.Conn) {
	if !g.isOpen() {
		g.log.Debug("membership: gossip stream before start, closed", "from", conn.RemoteAddr().String())
		_ = conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(g.timeout))
	cr := &captureReader{r: conn}
	if err := checkStream(cr, true); err != nil {
		g.reject(conn, err)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	select {
	case g.streams <- &replayConn{Conn: conn, r: io.MultiReader(bytes.NewReader(cr.buf), conn)}:
	case <-g.done:
		_ = conn.Close()
	}
}

func (g *guardedTransport) reject(conn net.Conn, err error) {
	level := slog.LevelWarn
	if errors.Is(err, errEmptyStream) {
		level = slog.LevelDebug
	}
	g.log.Log(context.Background(), level, "membership: rejected gossip stream", "from", conn.RemoteAddr().String(), "err", err)
	_ = conn.Close()
}

// StreamCh returns the inbound streams that passed inspection.
func (g *guardedTransport) StreamCh() <-chan net.Conn { return g.streams }

// DialAddressTimeout dials a; the peer's reply is inspected on first read.
func (g *guardedTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := g.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &lazyGuardConn{Conn: conn}, nil
}

// DialTimeout dials addr; the peer's reply is inspected on first read.
func (g *guardedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return g.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// Shutdown shuts the NetTransport down, then stops forwarding. The order
// matters: the NetTransport's accept loop blocks handing over a connection
// until forward takes it, and its Shutdown waits for that loop.
func (g *guardedTransport) Shutdown() error {
	err := g.NetTransport.Shutdown()
	g.once.Do(func() { close(g.done) })
	return err
}

// checkStream reads the start of a stream from r and rejects what could
// crash memberlist. Inbound streams may start with a label header.
func checkStream(r io.Reader, inbound bool) error {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return errEmptyStream
		}
		return fmt.Errorf("membership: read gossip stream: %w", err)
	}
	if inbound && b[0] == wireLabel {
		var size [1]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return fmt.Errorf("membership: read gossip stream label: %w", err)
		}
		if _, err := io.CopyN(io.Discard, r, int64(size[0])); err != nil {
			return fmt.Errorf("membership: read gossip stream label: %w", err)
		}
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return fmt.Errorf("membership: read gossip stream type: %w", err)
		}
	}
	switch b[0] {
	case wireUser:
		return errors.New("membership: gossip stream carries a user message, which this cluster does not use")
	case wireCompress:
		return errors.New("membership: gossip stream is compressed, which this cluster does not use")
	case wirePushPull:
		var h pushPullHeader
		if err := codec.NewDecoder(r, &codec.MsgpackHandle{}).Decode(&h); err != nil {
			return fmt.Errorf("membership: decode push/pull header: %w", err)
		}
		if h.Nodes < 0 || h.Nodes > maxPushPullNodes {
			return fmt.Errorf("membership: push/pull header announces %d nodes (limit %d)", h.Nodes, maxPushPullNodes)
		}
		if h.UserStateLen != 0 { // our delegate never sends user state
			return fmt.Errorf("membership: push/pull header announces %d bytes of user state", h.UserStateLen)
		}
	}
	return nil
}

// captureReader records everything read through it, for replay.
type captureReader struct {
	r   io.Reader
	buf []byte
}

func (c *captureReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	return n, err
}

// replayConn is a net.Conn whose reads come from r.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// lazyGuardConn inspects the first bytes a dialled peer sends back.
type lazyGuardConn struct {
	net.Conn
	once sync.Once
	r    io.Reader
	err  error
}

func (c *lazyGuardConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		cr := &captureReader{r: c.Conn}
		if err := checkStream(cr, false); err != nil && !errors.Is(err, errEmptyStream) {
			c.err = err
			return
		}
		c.r = io.MultiReader(bytes.NewReader(cr.buf), c.Conn)
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Read(p)
}
