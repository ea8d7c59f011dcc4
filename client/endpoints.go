package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
)

const (
	// downMemo is how long an endpoint whose connection failed is passed
	// over (while its connection is not back): calls go to the others at
	// once, and a leader hint naming it is not followed.
	downMemo = 5 * time.Second
	// leaderPoll caps the wait between retries while no leader is known:
	// a member holds a request until it knows a leader, and one that still
	// names a dead one answers at once, so a short retry finds the new
	// leader within this of its election.
	leaderPoll = 50 * time.Millisecond
	// connectWait bounds how long an attempt waits for its connection to
	// be ready before it goes to another endpoint instead: a member gone
	// from the network (a killed container) neither answers nor refuses,
	// and a call on its connection would wait out the attempt timeout.
	connectWait = 250 * time.Millisecond
)

// stateOf is the connectivity of the connection to addr (unmapped), and
// whether there is one.
func (c *Client) stateOf(addr string) (connectivity.State, bool) {
	cc, ok := c.conns[c.mapAddr(addr)]
	if !ok {
		return 0, false
	}
	return cc.GetState(), true
}

// isDown reports whether addr failed within downMemo and its connection
// is not ready again. c.mu is held.
func (c *Client) isDown(addr string) bool {
	at, ok := c.down[addr]
	if !ok {
		return false
	}
	if time.Since(at) >= downMemo {
		delete(c.down, addr)
		return false
	}
	if st, ok := c.stateOf(addr); ok && st == connectivity.Ready {
		delete(c.down, addr)
		return false
	}
	return true
}

// connState is stateOf, locking c.mu.
func (c *Client) connState(addr string) (connectivity.State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateOf(addr)
}

// downAddr is isDown, locking c.mu.
func (c *Client) downAddr(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isDown(addr)
}

func (c *Client) endpointCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.endpoints)
}

// markDown notes that a call to addr failed on its connection.
func (c *Client) markDown(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down[addr] = time.Now()
	if c.leader == addr {
		c.leader = ""
	}
}

// awaitReady reports whether cc is ready, or becomes ready within
// connectWait; a connection that is failing is not waited for. With one
// endpoint only there is nowhere else to go: it reports true, and the
// call waits for the connection as it would.
func (c *Client) awaitReady(ctx context.Context, cc *grpc.ClientConn) bool {
	st := cc.GetState()
	if st == connectivity.Ready || c.endpointCount() < 2 {
		return true
	}
	cc.Connect()
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	for {
		switch st = cc.GetState(); st {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !cc.WaitForStateChange(ctx, st) {
			return false
		}
	}
}

// connFailed reports whether err, from a call on cc, is the connection's
// failure (refused, reset, unreachable) rather than the member's answer:
// Unavailable without a Logbook reason, on a connection that is not ready.
func connFailed(err error, cc *grpc.ClientConn) bool {
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || e.Reason != "" {
		return false
	}
	return cc.GetState() != connectivity.Ready
}

// pick returns the first of n candidates (cand(i) for i from start on,
// wrapping) that is not down and whose connection, if it has one, is not
// failing or still connecting; else the first not down; else the one at
// start. c.mu is held.
func (c *Client) pick(n, start int, cand func(i int) string) string {
	notDown := ""
	for k := range n {
		e := cand((start + k) % n)
		if c.isDown(e) {
			continue
		}
		if st, ok := c.stateOf(e); !ok || (st != connectivity.TransientFailure && st != connectivity.Connecting) {
			return e
		}
		if notDown == "" {
			notDown = e
		}
	}
	if notDown != "" {
		return notDown
	}
	return cand(start % n)
}

// nextEndpoint rotates through seeds and discovered members, passing over
// those down or not connected.
func (c *Client) nextEndpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pick(len(c.endpoints), c.next, func(i int) string { return c.endpoints[i] })
	c.next++
	return e
}

// nextSeed rotates through the configured endpoints only, passing over
// those down or not connected.
func (c *Client) nextSeed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pick(len(c.cfg.Endpoints), c.nextSeedN, func(i int) string { return c.cfg.Endpoints[i] })
	c.nextSeedN++
	return e
}

// EndpointsError is the failure of every endpoint a client tried: none
// answered. errors.Is and errors.As see each endpoint's error.
type EndpointsError struct {
	Endpoints []string
	Errs      []error
}

func (e *EndpointsError) Error() string {
	var b strings.Builder
	b.WriteString("logbook: no endpoint answered: ")
	for i, ep := range e.Endpoints {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", ep, shortCause(e.Errs[i]))
	}
	return b.String()
}

func (e *EndpointsError) Unwrap() []error { return e.Errs }

// shortCause is err's message without gRPC's transport wrapping: "dial
// tcp 127.0.0.1:7100: connect: connection refused".
func shortCause(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "Error while dialing: "); ok {
		return strings.TrimSuffix(after, `"`)
	}
	return msg
}
