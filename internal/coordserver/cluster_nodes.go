package coordserver

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
)

// AddNode starts one more storage node, joined to the coordinators (their
// gRPC endpoints and their gossip), with mod, when set, adjusting its
// config after ClusterOptions.Node. It returns the node; its index is
// Nodes()-1.
func (c *Cluster) AddNode(mod func(*nodeserver.Config)) (*nodeserver.Server, error) {
	c.mu.Lock()
	i := len(c.nodeCfgs)
	c.mu.Unlock()
	cfg := nodeserver.DefaultConfig()
	cfg.ID = c.opts.NodePrefix + strconv.Itoa(i+1)
	cfg.DataDir = filepath.Join(c.opts.Dir, cfg.ID)
	if c.opts.Ports.Node == nil {
		return nil, fmt.Errorf("coordserver: cluster: no ports for storage nodes")
	}
	a, err := c.opts.Ports.Node(i)
	if err != nil {
		return nil, fmt.Errorf("coordserver: ports of %s: %w", cfg.ID, err)
	}
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.GossipAddr = a.GRPC, a.HTTP, a.Gossip
	cfg.CoordEndpoints = c.Endpoints()
	// Encrypted gossip (TLS clusters) admits only nodes that join it.
	if c.opts.NodesGossip || c.tls != nil {
		for _, cc := range c.cfgs {
			cfg.Join = append(cfg.Join, cc.GossipAddr)
		}
	}
	cfg.Logger = c.opts.Logger.With("node", cfg.ID)
	if c.tls != nil {
		if cfg.Security.TLS, err = c.tls.Source(cfg.ID, pki.RoleNode); err != nil {
			return nil, err
		}
		cfg.Security.GossipKey = c.tls.GossipKey
		cfg.Security.GossipKeyringFile = filepath.Join(cfg.DataDir, "gossip.keyring")
	}
	if c.opts.Node != nil {
		c.opts.Node(i, &cfg)
	}
	if mod != nil {
		mod(&cfg)
	}
	c.mu.Lock()
	c.nodeCfgs = append(c.nodeCfgs, cfg)
	c.nodes = append(c.nodes, nil)
	c.mu.Unlock()
	return c.StartNode(i)
}

// Nodes is the number of storage nodes, running or stopped.
func (c *Cluster) Nodes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodeCfgs)
}

// Node is storage node i, nil while it is stopped.
func (c *Cluster) Node(i int) *nodeserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// NodeConfig is storage node i's config.
func (c *Cluster) NodeConfig(i int) nodeserver.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeCfgs[i]
}

// StartNode starts storage node i (stopped) on its data directory and
// addresses; a node whose gRPC or HTTP address was ":0" keeps the ports
// it had.
func (c *Cluster) StartNode(i int) (*nodeserver.Server, error) {
	c.mu.Lock()
	cfg := c.nodeCfgs[i]
	running := c.nodes[i] != nil
	c.mu.Unlock()
	if running {
		return nil, fmt.Errorf("coordserver: %s is running", cfg.ID)
	}
	n, err := nodeserver.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.ID, err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return n, nil
}

// StopNode stops storage node i (Close); a stopped one is left alone.
func (c *Cluster) StopNode(i int) error {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	return n.Close()
}

func (c *Cluster) runningNodes() []*nodeserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*nodeserver.Server
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}
