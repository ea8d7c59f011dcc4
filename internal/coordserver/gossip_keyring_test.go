package coordserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// keyringEnv is a three-coordinator cluster whose coordinators and
// storage nodes gossip encrypted, each with a keyring file, all seeded
// with key.
type keyringEnv struct {
	*fsEnv
	key   []byte
	dir   string
	nodes []*nodeserver.Server
	cc    pb.ClusterClient
}

func newKeyringEnv(t *testing.T, nodes int, opts ...clusterOpt) *keyringEnv {
	t.Helper()
	key, dir := membership.GenerateKey(), t.TempDir()
	e := &keyringEnv{key: key, dir: dir}
	e.fsEnv = newFSEnv(t, append([]clusterOpt{func(_ int, c *Config) {
		c.Security.GossipKey = key
		c.Security.GossipKeyringFile = filepath.Join(dir, c.ID+".keyring")
	}}, opts...)...)
	for i := 1; i <= nodes; i++ {
		e.nodes = append(e.nodes, e.addGossipNode(fmt.Sprintf("kn%d", i), key))
	}
	conn, err := grpc.NewClient(e.tc.cfgs[0].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.cc = pb.NewClusterClient(conn)
	return e
}

// addGossipNode starts a storage node gossiping with key.
func (e *keyringEnv) addGossipNode(id string, key []byte) *nodeserver.Server {
	return e.tc.addNode(func(cfg *nodeserver.Config) {
		cfg.ID = id
		cfg.Join = nil
		for _, c := range e.tc.cfgs {
			cfg.Join = append(cfg.Join, c.GossipAddr)
		}
		cfg.Security.GossipKey = key
		cfg.Security.GossipKeyringFile = filepath.Join(e.dir, id+".keyring")
	})
}

// gossipNames is what coordinator i sees alive in its gossip.
func (e *keyringEnv) gossipNames(i int) []string {
	var out []string
	for _, m := range e.tc.server(i).members.Members() {
		if m.State == membership.StateAlive {
			out = append(out, m.Name)
		}
	}
	return out
}

// waitGossip waits until every running coordinator sees exactly ids.
func (e *keyringEnv) waitGossip(what string, ids ...string) {
	e.t.Helper()
	slices.Sort(ids)
	eventually(e.t, 30*time.Second, what, func() bool {
		for i := range e.tc.servers {
			if e.tc.server(i) != nil && !slices.Equal(e.gossipNames(i), ids) {
				return false
			}
		}
		return true
	})
}

func (e *keyringEnv) allIDs() []string {
	ids := []string{}
	for _, c := range e.tc.cfgs {
		ids = append(ids, c.ID)
	}
	for _, n := range e.nodes {
		ids = append(ids, n.ID())
	}
	return ids
}

func (e *keyringEnv) keyring(op pb.GossipKeyringOp, key []byte) *pb.GossipKeyringResponse {
	e.t.Helper()
	k := ""
	if key != nil {
		k = membership.EncodeKey(key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := e.cc.GossipKeyring(ctx, &pb.GossipKeyringRequest{Op: op, Key: k})
	if err != nil {
		e.t.Fatalf("GossipKeyring %v: %v", op, err)
	}
	return resp
}

// wantKeys checks that every member succeeded and holds exactly keys.
func wantKeys(t *testing.T, what string, resp *pb.GossipKeyringResponse, total int, keys ...[]byte) {
	t.Helper()
	if resp.Failed != 0 || int(resp.Total) != total || len(resp.Members) != total {
		t.Fatalf("%s: %d of %d failed, %d members: %v", what, resp.Failed, resp.Total, len(resp.Members), resp.Members)
	}
	var want []string
	for _, k := range keys {
		want = append(want, membership.EncodeKey(k))
	}
	for _, m := range resp.Members {
		if !m.Ok || !slices.Equal(m.Keys, want) {
			t.Fatalf("%s: %s (%s) ok=%v error=%q keys %v, want %v", what, m.Id, m.Role, m.Ok, m.Error, m.Keys, want)
		}
	}
	if len(resp.Keys) != len(keys) {
		t.Fatalf("%s: key counts %v", what, resp.Keys)
	}
	for i, k := range resp.Keys {
		if k.Members != int32(total) {
			t.Fatalf("%s: key %d held by %d/%d", what, i, k.Members, total)
		}
	}
}

// drainEvents empties coordinator i's gossip events.
func (e *keyringEnv) drainEvents(i int) []membership.Event {
	var out []membership.Event
	ch := e.tc.server(i).members.Events()
	for len(ch) > 0 {
		out = append(out, <-ch)
	}
	return out
}

// TestGossipKeyringRotation rotates the gossip key of three coordinators
// and two storage nodes with install, use and remove while they gossip:
// no member is declared dead or leaves on the way, every member reports
// every step, and a coordinator and a node restarted afterwards come back
// with the rotated keyring from their files although their configuration
// still names the old key.
func TestGossipKeyringRotation(t *testing.T) {
	t.Parallel()
	e := newKeyringEnv(t, 2)
	all := e.allIDs()
	e.waitGossip("coordinators and nodes in the encrypted gossip", all...)
	total := len(all)
	wantKeys(t, "list", e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, nil), total, e.key)
	for i := range e.tc.servers {
		e.drainEvents(i)
	}
	dropped := make([]uint64, len(e.tc.servers))
	for i := range e.tc.servers {
		dropped[i] = e.tc.server(i).members.DroppedEvents()
	}

	newKey := membership.GenerateKey()
	wantKeys(t, "install", e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, newKey), total, e.key, newKey)
	wantKeys(t, "use", e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE, newKey), total, newKey, e.key)
	// Gossip runs under the new primary: a metadata change of every
	// coordinator reaches every other one.
	for i := range e.tc.servers {
		if err := e.tc.server(i).members.UpdateMeta(func(m *membership.Meta) { m.Bootstrapped = true }); err != nil {
			t.Fatal(err)
		}
	}
	wantKeys(t, "remove", e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE, e.key), total, newKey)
	probe := "127.0.0.1:1"
	for i := range e.tc.servers {
		if err := e.tc.server(i).members.UpdateMeta(func(m *membership.Meta) { m.HTTPAddr = probe }); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "metadata gossiped under the new key alone", func() bool {
		for i := range e.tc.servers {
			for _, m := range e.tc.server(i).members.Members() {
				if m.Meta.Role == membership.RoleCoordinator && m.Meta.HTTPAddr != probe {
					return false
				}
			}
		}
		return true
	})
	for i := range e.tc.servers {
		for _, ev := range e.drainEvents(i) {
			if ev.Type != membership.EventUpdate {
				t.Fatalf("%s saw %v %s (%v) during the rotation", e.tc.cfgs[i].ID, ev.Type, ev.Member.Name, ev.Member.State)
			}
		}
		if d := e.tc.server(i).members.DroppedEvents(); d != dropped[i] {
			t.Fatalf("%s dropped %d events during the rotation", e.tc.cfgs[i].ID, d-dropped[i])
		}
		if got := e.gossipNames(i); !slices.Equal(got, all) {
			t.Fatalf("%s sees %v after the rotation", e.tc.cfgs[i].ID, got)
		}
	}

	// Restarts keep the rotated keyring: the files win over the old
	// --gossip-key still configured.
	e.tc.kill(2)
	e.tc.start(2)
	e.nodes[0] = e.tc.restartNode(e.nodes[0])
	e.waitGossip("the restarted coordinator and node back in the gossip", all...)
	if kr := e.tc.server(2).members.Keyring(); !bytes.Equal(kr.Primary(), newKey) || len(kr.Keys()) != 1 {
		t.Fatalf("restarted coordinator's keyring primary %x, %d keys", kr.Primary(), len(kr.Keys()))
	}
	wantKeys(t, "list after restarts", e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, nil), total, newKey)
}

// TestGossipKeyringRefusals: bad requests are refused and change nothing;
// USE of a key some member lacks changes nothing and names that member.
func TestGossipKeyringRefusals(t *testing.T) {
	t.Parallel()
	e := newKeyringEnv(t, 1)
	all := e.allIDs()
	e.waitGossip("coordinators and the node in the gossip", all...)
	ctx := context.Background()
	for name, req := range map[string]*pb.GossipKeyringRequest{
		"unknown op":        {Op: pb.GossipKeyringOp(42), Key: membership.EncodeKey(e.key)},
		"unspecified op":    {},
		"not base64":        {Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, Key: "not base64!"},
		"wrong length":      {Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, Key: membership.EncodeKey(make([]byte, 20))},
		"empty key for use": {Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE},
		"list with a key":   {Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, Key: membership.EncodeKey(e.key)},
	} {
		if _, err := e.cc.GossipKeyring(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := e.cc.GossipKeyring(ctx, &pb.GossipKeyringRequest{Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE, Key: membership.EncodeKey(e.key)}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("remove of the primary: %v, want FailedPrecondition", err)
	}

	// A key installed on one coordinator only: USE changes nothing.
	other := membership.GenerateKey()
	if err := e.tc.server(1).members.InstallKey(other); err != nil {
		t.Fatal(err)
	}
	resp := e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE, other)
	if int(resp.Failed) != len(all) {
		t.Fatalf("use of a key most members lack: %d of %d failed", resp.Failed, resp.Total)
	}
	for _, m := range resp.Members {
		if m.Id != e.tc.cfgs[1].ID && !bytes.Contains([]byte(m.Error), []byte("not installed")) {
			t.Fatalf("%s: error %q, want not installed", m.Id, m.Error)
		}
	}
	if err := e.tc.server(1).members.RemoveKey(other); err != nil {
		t.Fatal(err)
	}

	// Fill the keyrings to the bound; one more install is refused.
	for range membership.MaxKeys - 1 {
		wantOK(t, e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, membership.GenerateKey()))
	}
	if _, err := e.cc.GossipKeyring(ctx, &pb.GossipKeyringRequest{Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, Key: membership.EncodeKey(other)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("install beyond %d keys: %v, want InvalidArgument", membership.MaxKeys, err)
	}
	list := e.keyring(pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, nil)
	for _, m := range list.Members {
		if len(m.Keys) != membership.MaxKeys || m.Keys[0] != membership.EncodeKey(e.key) {
			t.Fatalf("%s keys after the refusals: %d, primary %s", m.Id, len(m.Keys), m.Keys[0])
		}
	}
}

func wantOK(t *testing.T, resp *pb.GossipKeyringResponse) {
	t.Helper()
	if resp.Failed != 0 {
		t.Fatalf("%d of %d failed: %v", resp.Failed, resp.Total, resp.Members)
	}
}

// TestGossipWrongKeyNotAdmitted: a storage node with another gossip key
// never appears among the coordinators' gossip members; one with the
// cluster's key does.
func TestGossipWrongKeyNotAdmitted(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	e := newKeyringEnv(t, 0, func(i int, c *Config) {
		if i == 0 {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	})
	wrong := e.addGossipNode("wrong", membership.GenerateKey())
	eventually(t, 30*time.Second, "c1 to warn that a gossip key did not match", func() bool {
		return strings.Contains(logs.String(), "gossip key mismatch")
	})
	right := e.addGossipNode("right", e.key)
	coords := []string{}
	for _, c := range e.tc.cfgs {
		coords = append(coords, c.ID)
	}
	e.waitGossip("the node with the cluster's key in the gossip", append(coords, right.ID())...)
	for i := range e.tc.servers {
		if slices.Contains(e.gossipNames(i), wrong.ID()) {
			t.Fatalf("%s admitted the node with the wrong key", e.tc.cfgs[i].ID)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecureGossipKeyring: with TLS on, the fan-out reaches coordinators
// and storage nodes over mutual TLS, and only a coordinator's certificate
// may change a node's keyring.
func TestSecureGossipKeyring(t *testing.T) {
	t.Parallel()
	key := membership.GenerateKey()
	c := startEncryptedCluster(t, key, t.TempDir(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventually(t, 30*time.Second, "the node in the coordinators' gossip", func() bool {
		for i := range c.Coordinators() {
			if !slices.ContainsFunc(c.Coordinator(i).members.Members(), func(m membership.Member) bool { return m.Name == "n1" }) {
				return false
			}
		}
		return true
	})
	admin := pb.NewClusterClient(dialAs(t, c, c.Endpoints()[0], "admin", pki.RoleClient, pki.RoleCoordinator))
	resp, err := admin.GossipKeyring(ctx, &pb.GossipKeyringRequest{Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "list over TLS", resp, 4, key)

	naddr := c.Node(0).GRPCAddr()
	req := &pb.MemberGossipKeyringRequest{Op: pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, Key: membership.GenerateKey()}
	_, err = pb.NewDataNodeClient(dialAs(t, c, naddr, "admin", pki.RoleClient, pki.RoleNode)).GossipKeyring(ctx, req)
	refusedWith(t, "node keyring change with a client certificate", err, codes.PermissionDenied)
	_, err = pb.NewDataNodeClient(dialAs(t, c, naddr, "n2", pki.RoleNode, pki.RoleNode)).GossipKeyring(ctx, req)
	refusedWith(t, "node keyring change with a node certificate", err, codes.PermissionDenied)
	_, err = clusterpb.NewPeerClient(dialAs(t, c, c.Endpoints()[0], "admin", pki.RoleClient, pki.RoleCoordinator)).GossipKeyring(ctx, req)
	refusedWith(t, "coordinator keyring change over Peer with a client certificate", err, codes.PermissionDenied)
	if keys := c.Coordinator(0).members.Keyring().Keys(); len(keys) != 1 {
		t.Fatalf("refused calls changed the keyring: %d keys", len(keys))
	}
}
