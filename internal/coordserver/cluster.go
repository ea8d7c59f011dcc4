package coordserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/poll"
)

// ClusterOptions say what StartCluster runs.
type ClusterOptions struct {
	// Coordinators is the number of coordinators, 1..5. They form a
	// cluster on their own: bootstrap-expect, joined through the first
	// one's gossip address.
	Coordinators int
	// Nodes storage nodes join the coordinators (0: none).
	Nodes int
	// NodesGossip has the storage nodes join the coordinators' gossip as
	// well, so the coordinators' failure detector sees them (coord dev,
	// node serve --join). Without it a coordinator learns of a dead node
	// only when its heartbeats stop.
	NodesGossip bool
	// Dir holds one data directory per coordinator and node.
	Dir string
	// ClusterID is the cluster id (empty: the default, "logbook").
	ClusterID string
	// CoordinatorPrefix and NodePrefix name the members: prefix and a
	// number from 1 (empty: "coord" and "node").
	CoordinatorPrefix, NodePrefix string
	// Ports gives every listener its address.
	Ports Ports
	// Logger logs for every member, each with its id (nil: discard).
	Logger *slog.Logger
	// Coordinator, when set, adjusts coordinator i's config (0-based)
	// after the cluster's own settings; Node the same for storage node i.
	Coordinator func(i int, c *Config)
	Node        func(i int, c *nodeserver.Config)
	// Secure runs every member with TLS and encrypted gossip: the cluster
	// makes a throwaway CA, a certificate per member, a client certificate
	// for ClusterUser and a gossip key under Dir/tls (Cluster.TLS); each
	// member keeps its gossip keyring in its data directory.
	Secure bool
	// ACL (with Secure) runs every coordinator with ACL enforcement
	// (Security.ACL); nobody is bootstrapped yet.
	ACL bool
}

// Cluster runs coordinators and storage nodes in this process, with the
// same wiring as coord serve and node serve (New, nodeserver.New): coord
// dev and every in-process cluster test use it. Members can be stopped
// abruptly and started again on the same data directory and addresses,
// and the Raft network between coordinators can be cut (faultnet.go).
//
// It lives in this package, not beside it, so that this package's own
// tests, which read the servers' internals, can run on it too.
type Cluster struct {
	opts ClusterOptions
	net  *faultNet
	tls  *ClusterTLS // nil: plaintext

	mu       sync.Mutex
	cfgs     []Config
	servers  []*Server // nil while stopped
	nodeCfgs []nodeserver.Config
	nodes    []*nodeserver.Server // nil while stopped
}

// StartCluster starts opts.Coordinators coordinators, then opts.Nodes
// storage nodes. It returns once every member has started, without
// waiting for a leader (WaitLeader, WaitReady). On error everything
// started is stopped.
func StartCluster(opts ClusterOptions) (_ *Cluster, err error) {
	switch {
	case opts.Coordinators < 1 || opts.Coordinators > 5:
		return nil, fmt.Errorf("coordserver: cluster of %d coordinators: want 1..5", opts.Coordinators)
	case opts.Nodes < 0:
		return nil, fmt.Errorf("coordserver: cluster of %d storage nodes", opts.Nodes)
	case opts.Dir == "":
		return nil, errors.New("coordserver: cluster: no data directory")
	case opts.Ports.Coordinator == nil || (opts.Nodes > 0 && opts.Ports.Node == nil):
		return nil, errors.New("coordserver: cluster: no ports")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CoordinatorPrefix == "" {
		opts.CoordinatorPrefix = "coord"
	}
	if opts.NodePrefix == "" {
		opts.NodePrefix = "node"
	}
	c := &Cluster{opts: opts, net: newFaultNet()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if opts.Secure {
		if c.tls, err = newClusterTLS(filepath.Join(opts.Dir, "tls")); err != nil {
			return nil, err
		}
	}
	for i := range opts.Coordinators {
		a, err := opts.Ports.Coordinator(i)
		if err != nil {
			return nil, fmt.Errorf("coordserver: ports of coordinator %d: %w", i+1, err)
		}
		cfg := DefaultConfig()
		if opts.ClusterID != "" {
			cfg.ClusterID = opts.ClusterID
		}
		cfg.ID = opts.CoordinatorPrefix + strconv.Itoa(i+1)
		cfg.DataDir = filepath.Join(opts.Dir, cfg.ID)
		cfg.RaftAddr, cfg.GRPCAddr, cfg.GossipAddr, cfg.HTTPAddr = a.Raft, a.GRPC, a.Gossip, a.HTTP
		cfg.BootstrapExpect = opts.Coordinators
		cfg.Logger = opts.Logger.With("member", cfg.ID)
		// Every member joins through the first one's gossip address (the
		// first one's join of itself finds no one; the others reach it).
		cfg.Join = []string{cfg.GossipAddr}
		if i > 0 {
			cfg.Join = []string{c.cfgs[0].GossipAddr}
		}
		if c.tls != nil {
			if cfg.Security.TLS, err = c.tls.Source(cfg.ID, pki.RoleCoordinator); err != nil {
				return nil, err
			}
			cfg.Security.GossipKey = c.tls.GossipKey
			cfg.Security.ACL = opts.ACL
			cfg.Security.GossipKeyringFile = filepath.Join(cfg.DataDir, "gossip.keyring")
		}
		if opts.Coordinator != nil {
			opts.Coordinator(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		c.net.register(cfg.ID, cfg.RaftAddr)
	}
	c.servers = make([]*Server, len(c.cfgs))
	for i := range c.cfgs {
		if err := c.StartCoordinator(i); err != nil {
			return nil, err
		}
	}
	for range opts.Nodes {
		if _, err := c.AddNode(nil); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Coordinators is the number of coordinators, running or stopped.
func (c *Cluster) Coordinators() int { return len(c.cfgs) }

// Coordinator is coordinator i, nil while it is stopped.
func (c *Cluster) Coordinator(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// Config is coordinator i's config (what it starts with next).
func (c *Cluster) Config(i int) Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfgs[i]
}

// Endpoints are the coordinators' gRPC addresses, the first one first.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.cfgs))
	for i, cfg := range c.cfgs {
		out[i] = cfg.GRPCAddr
	}
	return out
}

// StartCoordinator starts coordinator i (stopped) on its data directory.
func (c *Cluster) StartCoordinator(i int) error {
	c.mu.Lock()
	cfg := c.cfgs[i]
	running := c.servers[i] != nil
	c.mu.Unlock()
	if running {
		return fmt.Errorf("coordserver: %s is running", cfg.ID)
	}
	if cfg.RaftDial == nil {
		cfg.RaftDial = c.net.dialer(cfg.ID)
	}
	s, err := New(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.ID, err)
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
	return nil
}

// KillCoordinator stops coordinator i abruptly: no leadership transfer, no
// goodbye (Server.Kill). A stopped one is left alone.
func (c *Cluster) KillCoordinator(i int) error {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Kill()
}

// LeaderIndex is the index of the one running coordinator that is the
// ready leader and can reach a majority, or -1 while there is none (or,
// for a moment after a partition, more than one).
func (c *Cluster) LeaderIndex() int {
	leader := -1
	for i := range c.cfgs {
		s := c.Coordinator(i)
		if s != nil && c.net.reachableMajority(s.cfg.ID) && s.LeaderReady() {
			if leader >= 0 {
				return -1
			}
			leader = i
		}
	}
	return leader
}

// WaitLeader waits until LeaderIndex names a leader, and returns it.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	leader := -1
	err := poll.Until(ctx, func() bool {
		leader = c.LeaderIndex()
		return leader >= 0
	})
	if err != nil {
		return -1, fmt.Errorf("coordserver: no ready leader: %w", err)
	}
	return leader, nil
}

// WaitReady waits until there is a ready leader, every running
// coordinator is ready (Server.Ready) and registered in the leader's
// replicated member registry, and every running storage node is live in
// the leader's view; it returns the leader.
func (c *Cluster) WaitReady(ctx context.Context) (int, error) {
	leader := -1
	last := errors.New("no ready leader yet")
	err := poll.Until(ctx, func() bool {
		if leader = c.LeaderIndex(); leader < 0 {
			last = errors.New("no ready leader yet")
			return false
		}
		l := c.Coordinator(leader)
		for i := range c.cfgs {
			s := c.Coordinator(i)
			if s == nil {
				continue
			}
			if err := s.Ready(); err != nil {
				last = fmt.Errorf("%s: %w", s.ID(), err)
				return false
			}
			var ok bool
			l.fsm.View(func(st *fsm.State) { _, ok = st.Member(s.ID()) })
			if !ok {
				last = fmt.Errorf("%s is not registered yet", s.ID())
				return false
			}
		}
		live := map[string]bool{}
		for _, ns := range l.blocks.Nodes().Nodes {
			live[ns.Record.Id] = ns.Live
		}
		for _, n := range c.runningNodes() {
			if !live[n.ID()] {
				last = fmt.Errorf("storage node %s is not live yet", n.ID())
				return false
			}
		}
		return true
	})
	if err != nil {
		return -1, fmt.Errorf("coordserver: cluster not ready: %w (%v)", err, last)
	}
	return leader, nil
}

// Run keeps the cluster running until ctx ends, then stops every member.
// A member that stops on its own (a fatal error, removed from the
// cluster) is reported to onExit while the others keep running; a storage
// node shut down for a restart (coord nodes shutdown --restart) is
// started again at once, as a supervisor would.
func (c *Cluster) Run(ctx context.Context, onExit func(id string, err error)) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(c.cfgs)+len(c.nodeCfgs))
	report := func(id string, err error) {
		errs <- fmt.Errorf("%s: %w", id, err)
		if onExit != nil {
			onExit(id, err)
		}
	}
	for i := range c.cfgs {
		s := c.Coordinator(i)
		if s == nil {
			continue
		}
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				report(s.ID(), err)
			}
		})
	}
	for i := range c.nodeCfgs {
		n := c.Node(i)
		if n == nil {
			continue
		}
		wg.Go(func() {
			for {
				err := n.Run(ctx)
				if err == nil && ctx.Err() == nil && n.RestartRequested() {
					c.mu.Lock()
					c.nodes[i] = nil
					c.mu.Unlock()
					if n, err = c.StartNode(i); err == nil {
						continue
					}
				}
				if err != nil {
					report(c.nodeCfgs[i].ID, err)
				}
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	c.Close()
	return errors.Join(all...)
}

// Close stops every running member at once, storage nodes and
// coordinators concurrently.
func (c *Cluster) Close() error {
	c.mu.Lock()
	nodes, servers := c.nodes, c.servers
	c.nodes, c.servers = make([]*nodeserver.Server, len(nodes)), make([]*Server, len(servers))
	c.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	keep := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for _, n := range nodes {
		if n != nil {
			wg.Go(func() { keep(n.Close()) })
		}
	}
	for _, s := range servers {
		if s != nil {
			wg.Go(func() { keep(s.Kill()) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
