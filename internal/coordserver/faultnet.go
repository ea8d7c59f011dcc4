package coordserver

import (
	"errors"
	"net"
	"sync"
	"time"
)

// faultNet cuts the Raft network between the members of a Cluster: dials
// across a cut fail and live connections across it are closed, in both
// directions. Every member of a Cluster dials through it (Config.RaftDial);
// with no cut it is a plain TCP dialer.
type faultNet struct {
	mu    sync.Mutex
	ids   map[string]string // raft address -> member id
	cut   map[[2]string]bool
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	from, to string
	n        *faultNet
}

func (c *trackedConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

func newFaultNet() *faultNet {
	return &faultNet{ids: map[string]string{}, cut: map[[2]string]bool{}, conns: map[*trackedConn]struct{}{}}
}

func (n *faultNet) register(id, raftAddr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids[raftAddr] = id
}

var errPartitioned = errors.New("faultnet: partitioned")

func (n *faultNet) dialer(from string) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		n.mu.Lock()
		to := n.ids[addr]
		blocked := n.cut[[2]string{from, to}]
		n.mu.Unlock()
		if blocked {
			return nil, errPartitioned
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, from: from, to: to, n: n}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[[2]string{from, to}] {
			c.Close()
			return nil, errPartitioned
		}
		n.conns[tc] = struct{}{}
		return tc, nil
	}
}

// Isolate cuts member id off from every other member's Raft traffic.
func (c *Cluster) Isolate(id string) { c.net.isolate(id) }

// Heal removes every cut.
func (c *Cluster) Heal() { c.net.heal() }

// isolate cuts id off from every other member.
func (n *faultNet) isolate(id string) {
	n.mu.Lock()
	var doomed []*trackedConn
	for _, other := range n.ids {
		if other != id {
			n.cut[[2]string{id, other}] = true
			n.cut[[2]string{other, id}] = true
		}
	}
	for c := range n.conns {
		if n.cut[[2]string{c.from, c.to}] {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

func (n *faultNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = map[[2]string]bool{}
}

// reachableMajority reports whether id can reach a majority of members
// (itself included).
func (n *faultNet) reachableMajority(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	ok := 0
	for _, other := range n.ids {
		if other == id || !n.cut[[2]string{id, other}] {
			ok++
		}
	}
	return ok*2 > len(n.ids)
}
