// Package client is the Go SDK for Logbook.
//
//	c, err := client.New(ctx, client.Config{Endpoints: []string{"127.0.0.1:7100"}})
//	seqs, err := c.Journal().Append(ctx, client.Event{Type: "put", Payload: b})
//
// The client discovers the leader from any endpoint, caches it and sends
// writes straight to it. Writes carry a session (client id + request seq), so
// retries through a leader change are applied exactly once. Every call takes
// a context; its deadline bounds all retries.
//
// Comments cite docs/design.md as "design §…": its journal rules (§J) and its
// rules for replicas and recovery (§R).
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// DefaultEndpoint is a coordinator's gRPC address when it is started with
// no --grpc-addr (coord serve, and the first member of coord dev).
const DefaultEndpoint = "127.0.0.1:7100"

// Config configures a Client.
type Config struct {
	// Endpoints are coordinator gRPC addresses (host:port); any one is
	// enough to discover the rest.
	Endpoints []string
	// ClusterID, when set, is sent with every call; a coordinator of
	// another cluster refuses it.
	ClusterID string
	// ClientID names this client: its writers' lease holder name, and the
	// base of its exactly-once sessions (see Client.ClientID); default:
	// random. At most 128 bytes; sessions are opened with its first 107.
	ClientID string
	// AttemptTimeout bounds one attempt of a call (default 5 s); the
	// caller's ctx bounds the whole call with its retries.
	AttemptTimeout time.Duration
	// MaxBackoff caps the wait between retries (default 1 s).
	MaxBackoff time.Duration
	// TLS enables transport security.
	TLS *tls.Config
	// Token is a bearer token (lbt_..., coord acl token create) sent with
	// every call as "authorization: Bearer ..."; it needs TLS. A token
	// takes precedence over the client certificate as the caller's
	// identity. LoadToken reads one from a file.
	Token string
	// MaxMessageBytes bounds messages in both directions (default 8 MiB).
	// Read and Tail ask for replies under it (coordinators send at most
	// 4 MiB, but always one event: keep it above the cluster's event
	// cap); an Append that would pass it fails before it is sent.
	MaxMessageBytes int
	// SpreadOverMembers sends the calls that otherwise go to the leader
	// (appends, linearizable reads, admin writes) to the Endpoints given
	// here, in turn, never to a member learned later: the member forwards
	// them to the leader (appends in batches) or confirms the read index
	// with it. Clients given different endpoints spread their load over
	// the members, at the cost of a member-to-member hop for the calls
	// that reach a follower; a client given one endpoint stays with that
	// member (and has no other to fail over to). Default: straight to
	// the leader.
	SpreadOverMembers bool
	// AddressMap translates member addresses as the cluster advertises
	// them (for example coord1:7100 inside a compose network) into
	// addresses this client can reach (127.0.0.1:17100). Unmapped
	// addresses are used as they are.
	AddressMap map[string]string
	// ReplaceNode is when a file writer whose pipeline lost a node adds a
	// new one (HDFS dfs.client.block.write.replace-datanode-on-failure
	// policy; default ReplaceNodeDefault).
	ReplaceNode ReplaceNodePolicy
	// ReplaceNodeRequired fails the write when the policy asks for a new
	// node and none can be added (HDFS best-effort=false). By default the
	// writer goes on with the nodes it has, since small clusters often
	// have no spare node; the coordinator re-replicates the block once it
	// is complete.
	ReplaceNodeRequired bool
	// NodeRestartTimeout is how long a file writer waits for a pipeline
	// node that said it is restarting (an out-of-band NODE_RESTARTING ack,
	// `coord nodes shutdown --restart`) to come back, retrying every few
	// seconds at most, before it drops the node like a failed one (HDFS
	// dfs.client.datanode-restart.timeout). Default 30 s; negative: never
	// wait.
	NodeRestartTimeout time.Duration
}

// ReplaceNodePolicy says when a writer replaces a failed pipeline node
// (design §R5.3 step 5). With r the file's replication and n < r the nodes
// left:
type ReplaceNodePolicy int

const (
	// ReplaceNodeDefault adds a node iff r ≥ 3 and (n ≤ r/2, or the
	// stream was synced or appended to).
	ReplaceNodeDefault ReplaceNodePolicy = iota
	// ReplaceNodeAlways adds a node whenever n < r.
	ReplaceNodeAlways
	// ReplaceNodeNever goes on with the nodes left.
	ReplaceNodeNever
)

// Client is safe for concurrent use.
type Client struct {
	cfg Config

	mu        sync.Mutex
	conns     map[string]*grpc.ClientConn
	leader    string   // cached leader gRPC address
	endpoints []string // seeds plus discovered members
	next      int
	nextSeedN int // SpreadOverMembers rotation over cfg.Endpoints
	// down: endpoints whose connection failed, and when (endpoints.go).
	down   map[string]time.Time
	closed bool

	session  *session
	appender *appender
	limits   atomic.Pointer[Limits] // the leader's size caps, once asked (journal_limits.go)
}

// New returns a client and checks that an endpoint answers (the leader is
// discovered lazily, on first use, if none is known yet).
func New(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoints", ErrInvalidArgument)
	}
	if cfg.ClientID == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		cfg.ClientID = "sdk-" + hex.EncodeToString(b[:])
	}
	if cfg.Token != "" {
		if cfg.TLS == nil {
			return nil, fmt.Errorf("%w: a token needs TLS (Config.TLS): it would travel in plaintext", ErrInvalidArgument)
		}
		if _, err := authz.ParseToken(cfg.Token); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
	}
	if cfg.NodeRestartTimeout == 0 {
		cfg.NodeRestartTimeout = 30 * time.Second
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Second
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 8 << 20
	}
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}, down: map[string]time.Time{}, endpoints: append([]string(nil), cfg.Endpoints...)}
	c.session = newSession(cfg.ClientID, c.openSession)
	c.appender = newAppender(c)
	if err := c.discover(ctx); err != nil && !errors.Is(err, ErrNoLeader) {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ClientID names this client: the lease holder name of its writers, and
// the base of its exactly-once sessions — the cluster opens them as
// ClientID() + "@<index>" (on a cluster before log format 7 the session is
// ClientID() itself, then ClientID() + ".2", ".3" ... after an
// ErrSessionExpired). The lease holder name stays.
func (c *Client) ClientID() string { return c.cfg.ClientID }

// closeSessionTimeout bounds the CloseSession that Close makes: a client
// closed while the cluster is unreachable must not hang in Close.
const closeSessionTimeout = time.Second

// Close ends the client's session on the cluster, if it opened one, and
// releases every connection. Call it once no request is in flight: the
// cluster then frees the session's kept results at once (log format 8;
// before it, or if the cluster cannot be reached within a second, the
// session stays until the cluster evicts it as least recently used).
func (c *Client) Close() error {
	if id, ok := c.session.openedID(); ok && !c.isClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), closeSessionTimeout)
		_ = c.closeSession(ctx, id)
		cancel()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for a, cc := range c.conns {
		errs = append(errs, cc.Close())
		delete(c.conns, a)
	}
	return errors.Join(errs...)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) mapAddr(addr string) string {
	if m, ok := c.cfg.AddressMap[addr]; ok {
		return m
	}
	return addr
}

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	addr = c.mapAddr(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		creds = credentials.NewTLS(c.cfg.TLS)
	}
	opts := append(grpcflow.DialOptions(), grpcflow.Reconnect(),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(c.cfg.MaxMessageBytes)),
	)
	if c.cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{"Bearer " + c.cfg.Token}))
	}
	if id := c.cfg.ClusterID; id != "" {
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, pb.MDClusterID, id), method, req, reply, cc, o...)
		}), grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, pb.MDClusterID, id), desc, cc, method, o...)
		}))
	}
	cc, err := grpc.NewClient(grpcflow.Target(addr), opts...)
	if err != nil {
		return nil, fmt.Errorf("logbook: endpoint %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

func (c *Client) cachedLeader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = addr
	if addr == "" {
		return
	}
	if !slices.Contains(c.endpoints, addr) {
		c.endpoints = append(c.endpoints, addr)
	}
}

// discover asks every known endpoint that is not down (all of them if all
// are) for the cluster status at once and takes the first answer that
// names a leader (a paused or dead member costs nothing while another
// answers). Once one answered without naming a live leader, the others
// get connectWait more; those still silent then are down. Members it
// learns of become endpoints. A leader hint naming an endpoint that is
// down is not followed: members name a dead leader until they notice it
// is gone. With no endpoint answering, the error names each endpoint
// tried and its failure.
func (c *Client) discover(ctx context.Context) error {
	c.mu.Lock()
	var eps []string // those not down; all of them if all are
	for _, ep := range c.endpoints {
		if !c.isDown(ep) {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		eps = append(eps, c.endpoints...)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		ep  string
		st  *pb.StatusResponse
		err error
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			st, err := c.statusAt(ctx, ep)
			answers <- answer{ep, st, err}
		}()
	}
	var last error
	failed := map[string]error{}
	pending := map[string]bool{}
	for _, ep := range eps {
		pending[ep] = true
	}
	var rest <-chan time.Time // once a member answered: how long the others get
	for len(pending) > 0 {
		var a answer
		select {
		case a = <-answers:
		case <-rest:
			// Those still silent may be gone from the network (neither
			// answering nor refusing): down unless connected.
			for ep := range pending {
				if st, ok := c.connState(ep); !ok || st != connectivity.Ready {
					c.markDown(ep)
				}
			}
			return last
		}
		delete(pending, a.ep)
		if a.err != nil {
			failed[a.ep] = a.err
			continue
		}
		if rest == nil {
			t := time.NewTimer(connectWait)
			defer t.Stop()
			rest = t.C
		}
		c.learn(a.st)
		if l := a.st.LeaderGrpcAddr; l != "" && !c.downAddr(l) {
			c.setLeader(l)
			return nil
		}
		last = &Error{Code: codes.Unavailable, Reason: pb.ReasonNoLeader, Message: "endpoint " + a.ep + " knows no leader"}
		if l := a.st.LeaderGrpcAddr; l != "" {
			last = &Error{Code: codes.Unavailable, Reason: pb.ReasonNoLeader, Message: "endpoint " + a.ep + " names leader " + l + ", which is unreachable"}
		}
	}
	if last != nil {
		return last
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) == 0 {
		return ErrNoLeader
	}
	all := &EndpointsError{}
	for _, ep := range eps { // in the order they were given
		all.Endpoints, all.Errs = append(all.Endpoints, ep), append(all.Errs, failed[ep])
	}
	return all
}

// learn adds the members named in a status answer to the endpoints.
func (c *Client) learn(st *pb.StatusResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range st.Members {
		if m.GrpcAddr == "" || slices.Contains(c.endpoints, m.GrpcAddr) {
			continue
		}
		c.endpoints = append(c.endpoints, m.GrpcAddr)
	}
}

func (c *Client) statusAt(ctx context.Context, addr string) (*pb.StatusResponse, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	// The member's own view is enough to find the leader and the members:
	// it asks no other member, so a dead one costs nothing here.
	st, err := pb.NewClusterClient(cc).Status(actx, &pb.StatusRequest{LocalView: true})
	if err = fromStatus(err); connFailed(err, cc) {
		c.markDown(addr)
	}
	return st, err
}

// Where target sends a call.
const (
	routeAny        = iota // an endpoint in rotation
	routeLeader            // the leader, or a configured endpoint with SpreadOverMembers
	routeOnlyLeader        // the leader whatever the config (the append stream)
)

// target picks the connection for a call by its route; with no leader
// known it falls back to an endpoint in rotation.
func (c *Client) target(ctx context.Context, route int) (string, *grpc.ClientConn, error) {
	addr := ""
	switch {
	case route == routeLeader && c.cfg.SpreadOverMembers:
		addr = c.nextSeed()
	case route != routeAny:
		addr = c.cachedLeader()
		if addr == "" {
			if err := c.discover(ctx); err == nil {
				addr = c.cachedLeader()
			}
		}
	}
	if addr == "" {
		addr = c.nextEndpoint()
	}
	cc, err := c.conn(addr)
	return addr, cc, err
}

// attemptContext bounds one attempt by AttemptTimeout. A caller whose own
// deadline comes first already bounds it: its context is used as it is,
// which spares a context and a timer per call (context.WithTimeout would
// give the same deadline).
func (c *Client) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= c.cfg.AttemptTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.AttemptTimeout)
}

// do runs one call with retries: on a leader hint it switches at once, on
// a failed connection, or one not ready within connectWait, it marks the
// endpoint down and tries another at once, on other retryable errors it backs off (at most leaderPoll while
// no leader is known) and rediscovers. fn gets a per-attempt context.
func (c *Client) do(ctx context.Context, leader bool, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	backoff := 20 * time.Millisecond
	quick := 0 // attempts sent on at once, after a connection failed
	for {
		route := routeAny
		if leader {
			route = routeLeader
		}
		addr, cc, err := c.target(ctx, route)
		if err != nil {
			return err
		}
		if !c.awaitReady(ctx, cc) && ctx.Err() == nil {
			// Not connected within connectWait (or failing): another
			// member, at once; a follower forwards to the leader.
			c.markDown(addr)
			if quick++; quick <= c.endpointCount() {
				continue
			}
		}
		actx, cancel := c.attemptContext(ctx)
		err = fromStatus(fn(actx, cc))
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		if !retryable(err) {
			return err
		}
		if connFailed(err, cc) {
			// The member is not there (refused, reset): the next attempt
			// goes to another at once, the dead one passed over.
			c.markDown(addr)
			if quick++; quick <= c.endpointCount() {
				continue
			}
		}
		var e *Error
		errors.As(err, &e)
		if e.LeaderAddr != "" && e.LeaderAddr != addr && e.Reason == pb.ReasonNotLeader && !c.downAddr(e.LeaderAddr) {
			c.setLeader(e.LeaderAddr)
			continue // a fresh hint: retry at once
		}
		if c.cachedLeader() == addr {
			c.setLeader("")
		}
		wait := backoff
		if c.cachedLeader() == "" {
			wait = min(wait, leaderPoll)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		if backoff *= 2; backoff > c.cfg.MaxBackoff {
			backoff = c.cfg.MaxBackoff
		}
	}
}

// Status returns the cluster status as seen by any member.
func (c *Client) Status(ctx context.Context) (ClusterStatus, error) {
	var out *pb.StatusResponse
	err := c.do(ctx, false, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		out, err = pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{})
		return err
	})
	if err != nil {
		return ClusterStatus{}, err
	}
	return toClusterStatus(out), nil
}

// Cluster returns the cluster operations API.
func (c *Client) Cluster() *Cluster { return &Cluster{c: c} }

// Journal returns the journal API.
func (c *Client) Journal() *Journal { return &Journal{c: c} }
