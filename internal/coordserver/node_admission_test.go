package coordserver

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc/codes"
)

// TestEncryptedGossipAdmitsNodes: with the gossip encrypted, a node is
// registered only once the coordinators' gossip sees it. A node holding
// a valid node certificate but another gossip key is held back on every
// try and never enters the replicated state; one with the cluster's key
// is admitted.
func TestEncryptedGossipAdmitsNodes(t *testing.T) {
	t.Parallel()
	key, dir := membership.GenerateKey(), t.TempDir()
	c := startEncryptedCluster(t, key, dir, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	registered := func(id string) bool {
		for i := range c.Coordinators() {
			if s := c.Coordinator(i); s != nil && slices.ContainsFunc(s.blocks.Nodes().Nodes, func(n blocks.NodeStatus) bool { return n.Record.Id == id }) {
				return true
			}
		}
		return false
	}
	eventually(t, 30*time.Second, "n1, joined with the cluster's key, to register", func() bool { return registered("n1") })

	// A direct Register with a valid node certificate, from no gossip
	// member: told to join, not registered.
	link := clusterpb.NewNodeLinkClient(dialAs(t, c, c.Endpoints()[0], "n7", pki.RoleNode, pki.RoleCoordinator))
	resp, err := link.Register(ctx, &clusterpb.NodeRegisterRequest{Node: &fsmpb.NodeRecord{Id: "n7", GrpcAddr: "127.0.0.1:1", InstanceId: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.AwaitingGossip || resp.Node != nil || resp.ClusterId != "secure" {
		t.Fatalf("register from outside the gossip: %v", resp)
	}
	_, err = link.Heartbeat(ctx, &clusterpb.NodeHeartbeatRequest{NodeId: "n7"})
	refusedWith(t, "heartbeat of a node held back", err, codes.FailedPrecondition)

	// A real node with a valid certificate and another gossip key.
	if _, err := c.AddNode(func(cfg *nodeserver.Config) {
		cfg.Security.GossipKey = membership.GenerateKey()
		cfg.Security.GossipKeyringFile = filepath.Join(dir, cfg.ID+".wrong.keyring")
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n2, with another gossip key, to be held back three times", func() bool {
		for i := range c.Coordinators() {
			if s := c.Coordinator(i); s != nil && s.admission.attempts("n2") >= 3 {
				return true
			}
		}
		return false
	})
	for i := range c.Coordinators() {
		s := c.Coordinator(i)
		if slices.ContainsFunc(s.members.Members(), func(m membership.Member) bool { return m.Name == "n2" || m.Name == "n7" }) {
			t.Fatalf("%s's gossip holds a member without the cluster's key: %v", s.cfg.ID, s.members.Members())
		}
	}
	if registered("n2") || registered("n7") {
		t.Fatal("a node without the cluster's gossip key was registered")
	}
	if !registered("n1") {
		t.Fatal("n1 is no longer registered")
	}
}

// startEncryptedCluster starts three coordinators and one storage node
// with TLS, every member gossiping encrypted with key (a keyring file
// each in dir), and waits for it to be ready.
func startEncryptedCluster(t *testing.T, key []byte, dir string, nodesGossip bool) *Cluster {
	t.Helper()
	c, err := StartCluster(ClusterOptions{
		Coordinators: 3, Nodes: 1, NodesGossip: nodesGossip, Dir: dir, ClusterID: "secure", CoordinatorPrefix: "c", NodePrefix: "n",
		Ports: testPorts(t), Logger: testLogger(t), Secure: true,
		Coordinator: func(_ int, c *Config) {
			testTimings(c)
			c.Security.GossipKey = key
			c.Security.GossipKeyringFile = filepath.Join(dir, c.ID+".keyring")
		},
		Node: func(_ int, c *nodeserver.Config) {
			c.HeartbeatInterval = 100 * time.Millisecond
			c.Logger = testLogger(t)
			c.Security.GossipKey = key
			c.Security.GossipKeyringFile = filepath.Join(dir, c.ID+".keyring")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
