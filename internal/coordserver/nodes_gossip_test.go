package coordserver

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver"
)

// TestNodeGossipLiveness: storage nodes started with --join gossip with the
// coordinators (under the cluster id their registration returns). A node
// that shuts down is reported gone by gossip and stops being live at once,
// long before the stale interval (set to a minute here), so new blocks are
// not placed on it; it is not dead (no re-replication) until heartbeats have
// been silent for the dead interval.
func TestNodeGossipLiveness(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.NodeStaleInterval = time.Minute
		c.FS.NodeDeadInterval = 10 * time.Minute
	})
	var join []string
	for _, c := range e.tc.cfgs {
		join = append(join, c.GossipAddr)
	}
	var nodes []*nodeserver.Server
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, e.tc.addNode(func(cfg *nodeserver.Config) {
			cfg.ID = fmt.Sprintf("gn%d", i)
			cfg.Join = join
		}))
	}
	status := func() map[string]*pb.StorageNodeStatus {
		r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
		if err != nil {
			return nil
		}
		out := map[string]*pb.StorageNodeStatus{}
		for _, n := range r.Nodes {
			out[n.Node.Id] = n
		}
		return out
	}
	eventually(t, 30*time.Second, "4 live nodes alive in gossip", func() bool {
		st := status()
		for _, n := range nodes {
			if s := st[n.ID()]; s == nil || !s.Live || s.Gossip != "alive" {
				return false
			}
		}
		return true
	})
	victim := nodes[0].ID()
	nodes[0].Close()
	start := time.Now()
	eventually(t, 20*time.Second, victim+" not live once gossip saw it go", func() bool {
		s := status()[victim]
		return s != nil && !s.Live && (s.Gossip == "left" || s.Gossip == "dead")
	})
	if s := status()[victim]; s.Dead {
		t.Fatalf("%s dead after %v: the dead interval is 10m", victim, time.Since(start))
	}
	for i := 0; i < 5; i++ {
		path := fmt.Sprintf("/gossip/%d", i)
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: path, Replication: 3, BlockSize: 1 << 20, ClientName: "w"}); err != nil {
			t.Fatal(err)
		}
		ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ab.Result.Block.ExpectedLocations, victim) {
			t.Fatalf("block placed on %s, which gossip reports gone: %v", victim, ab.Result.Block.ExpectedLocations)
		}
	}
}
