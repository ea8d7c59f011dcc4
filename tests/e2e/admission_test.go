//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TestWrongGossipKeyOrCertNotAdmitted starts storage nodes as containers
// of their own on the compose network of the 3 coordinators, each with a
// certificate the test issues:
//
//	node5  node certificate of the cluster CA, the cluster's gossip key (the control)
//	node6  node certificate of the cluster CA, another gossip key
//	node7  node certificate of another CA (its --tls-ca trusts both)
//	node8  client certificate of the cluster CA (wrong role)
//
// node5 must register and be live in gossip, which shows the way the
// others are started works. For a bounded time, polling the leader's node
// list throughout: node7 and node8 are never registered (node7's calls
// are refused, its log says why; node8 refuses to start and says why),
// and node6 is never admitted to gossip nor registered (no gossip state,
// no coordinator's gossip holds it: the keyring fan-out of every
// coordinator reaches node5 only, both sides log the key mismatch, and
// node6's log says the coordinators do not admit it: with the gossip
// encrypted a node registers only once their gossip sees it). Then the
// coordinators' own check of the role: NodeLink.Register from the host
// with a client certificate, and with a node certificate speaking for
// another node, is refused on every member (PermissionDenied) and
// registers nothing.
func TestWrongGossipKeyOrCertNotAdmitted(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	ca, err := cl.clusterCA()
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := cl.tlsVolumeFile("gossip.key")
	if err != nil {
		t.Fatal(err)
	}
	otherKey := []byte(membership.EncodeKey(membership.GenerateKey()) + "\n")
	foreign, foreignFiles, err := pki.NewCA("another CA", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const (
		control     = "node5"
		wrongKey    = "node6"
		foreignCert = "node7"
		wrongRole   = "node8"
	)
	specs := []struct {
		id         string
		ca         *pki.CA
		role       pki.Role
		caPEM, key []byte
	}{
		{control, ca, pki.RoleNode, caPEM, key},
		{wrongKey, ca, pki.RoleNode, caPEM, otherKey},
		{foreignCert, foreign, pki.RoleNode, append(slices.Clip(caPEM), foreignFiles.CertPEM...), key},
		{wrongRole, ca, pki.RoleClient, caPEM, key},
	}
	cids := map[string]string{}
	for _, s := range specs {
		dir := t.TempDir()
		if _, err := issueInto(s.ca, dir, s.id, s.role); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.pem"), s.caPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "gossip.key"), s.key, 0o644); err != nil {
			t.Fatal(err)
		}
		cid, err := cl.runNode(s.id, dir)
		if err != nil {
			t.Fatal(err)
		}
		cids[s.id] = cid
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range specs {
				t.Logf("log of %s:\n%s", s.id, containerLogs(cids[s.id], 40))
			}
		}
	})
	cl.logf("started %s (control), %s (another gossip key), %s (certificate of another CA), %s (client certificate)", control, wrongKey, foreignCert, wrongRole)

	// Watch the leader's node list until the control has been live in
	// gossip for a while and the others have each shown, in their logs,
	// what stops them.
	const (
		watch      = 90 * time.Second
		controlFor = 10 * time.Second // the control live and in gossip at least this long
		refusals   = 5                // node7's registration refused at least this often
	)
	ctx, cancel := context.WithTimeout(context.Background(), watch)
	defer cancel()
	c, _, err := cl.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var (
		controlSince          time.Time
		refused, exited, said bool
		last                  string
	)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for round := 0; ; round++ {
		if ctx.Err() != nil || round > int(watch/(250*time.Millisecond)) {
			t.Fatalf("not settled within %s: control live in gossip since %v, %s refused %v, %s exited %v, %s logged the key mismatch and its refusal %v; last node list: %s",
				watch, controlSince, foreignCert, refused, wrongRole, exited, wrongKey, said, last)
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := c.Nodes(actx)
		acancel()
		if err == nil {
			last = describeNodes(r)
			seen := map[string]client.Node{}
			for _, n := range r.Nodes {
				seen[n.ID] = n
			}
			for _, id := range []string{foreignCert, wrongRole} {
				if n, ok := seen[id]; ok {
					t.Fatalf("%s is registered: %+v", id, n)
				}
			}
			if n, ok := seen[wrongKey]; ok {
				t.Fatalf("%s, with another gossip key, is registered: %+v", wrongKey, n)
			}
			if n, ok := seen[control]; ok && n.Live && n.Gossip == "alive" {
				if controlSince.IsZero() {
					controlSince = time.Now()
					cl.logf("%s (control) registered, live and alive in gossip", control)
				}
			} else {
				controlSince = time.Time{}
			}
		}
		if round%8 == 0 { // the logs every 2 s
			refused = strings.Count(containerLogs(cids[foreignCert], 200), "register failed") >= refusals
			state, _ := docker("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", cids[wrongRole])
			exited = state == "exited 2"
			logs := containerLogs(cids[wrongKey], 200)
			said = strings.Contains(logs, "gossip key mismatch") && strings.Contains(logs, "not admitted yet")
		}
		if !controlSince.IsZero() && time.Since(controlSince) >= controlFor && refused && exited && said {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	cl.logf("after %s: %s; %s refused at least %d times, %s exited 2, %s logged the gossip key mismatch and was not admitted",
		time.Since(cl.start).Round(time.Second), last, foreignCert, refusals, wrongRole, wrongKey)

	// Why, in their logs.
	for id, want := range map[string]string{
		foreignCert: "needs a client certificate of the cluster CA",
		wrongRole:   `needs one of role node named "node8"`,
	} {
		if out := containerLogs(cids[id], 200); !strings.Contains(out, want) {
			t.Errorf("%s's log does not say %q:\n%s", id, want, out)
		}
	}
	mismatch := false
	for _, m := range cl.members {
		mismatch = mismatch || strings.Contains(containerLogs(cl.ids[m], 2000), "gossip key mismatch")
	}
	if !mismatch {
		t.Errorf("no coordinator logged the gossip key mismatch of %s", wrongKey)
	}

	// Every coordinator's gossip holds the control and not node6: the
	// keyring fan-out reaches the storage nodes alive in the answering
	// member's gossip.
	for _, m := range cl.members {
		err := poll(30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
			r, err := cl.keyringThrough(ctx, m, client.KeyringList)
			if err != nil {
				return err
			}
			var nodes []string
			for _, mem := range r.Members {
				if mem.Role == "node" {
					nodes = append(nodes, mem.ID)
				}
			}
			if r.ResponderID != m || !slices.Equal(nodes, []string{control}) {
				return fmt.Errorf("answered by %s, storage nodes in its gossip %v, want [%s]", r.ResponderID, nodes, control)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}

	// The coordinators' own role check, which a node binary never reaches
	// with a certificate of the wrong role (it refuses to start).
	dir := t.TempDir()
	if _, err := issueInto(ca, dir, "node9", pki.RoleNode); err != nil {
		t.Fatal(err)
	}
	node9, err := client.LoadTLS(filepath.Join(dir, "node9.pem"), filepath.Join(dir, "node9-key.pem"), cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	callers := []struct {
		name string
		conf *tls.Config
	}{
		{"client certificate admin", cl.tlsConf},
		{"node certificate node9", node9},
	}
	for _, m := range cl.members {
		for _, who := range callers {
			conn, err := grpc.NewClient(cl.addr(m), grpc.WithTransportCredentials(credentials.NewTLS(who.conf)))
			if err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = clusterpb.NewNodeLinkClient(conn).Register(rctx, &clusterpb.NodeRegisterRequest{
				Node:     &fsmpb.NodeRecord{Id: wrongRole, GrpcAddr: wrongRole + ":7400", StorageIds: []string{"DS-e2e"}},
				Storages: []*pb.StorageReport{{StorageId: "DS-e2e", Capacity: 1 << 30, Free: 1 << 30}},
			})
			rcancel()
			conn.Close()
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("NodeLink.Register of %s as %s on %s: %v, want PermissionDenied", wrongRole, who.name, m, err)
			} else {
				cl.logf("NodeLink.Register of %s as %s on %s: refused: %v", wrongRole, who.name, m, status.Convert(err).Message())
			}
		}
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	err = cl.withClient(fctx, func(c *client.Client) error {
		r, err := c.Nodes(fctx)
		if err != nil {
			return err
		}
		for _, n := range r.Nodes {
			if n.ID == wrongRole || n.ID == foreignCert || n.ID == "node9" {
				return fmt.Errorf("%s is registered: %s", n.ID, describeNodes(r))
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// describeNodes is a node list in one line.
func describeNodes(r client.NodeList) string {
	var b strings.Builder
	for i, n := range r.Nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (live %v, gossip %q)", n.ID, n.Live, n.Gossip)
	}
	if len(r.Nodes) == 0 {
		return "no nodes"
	}
	return b.String()
}

// keyringThrough runs a gossip keyring operation answered by one member:
// a client whose only endpoint is its published port.
func (cl *cluster) keyringThrough(ctx context.Context, member string, op client.KeyringOp) (client.KeyringResult, error) {
	cfg, _ := cl.config()
	cfg.Endpoints = []string{cl.addr(member)}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return client.KeyringResult{}, err
	}
	defer c.Close()
	return c.Cluster().GossipKeyring(ctx, op, "")
}

// runNode starts one more storage node, id, as a container of its own on
// the project's network (host name and alias id), with the files of dir in
// its /tls: ID.pem, ID-key.pem, ca.pem and gossip.key. It joins the
// coordinators' endpoints and gossip as the compose files' nodes do and
// publishes no port. project.down removes it (compose does not know it).
func (p *project) runNode(id, dir string) (string, error) {
	name := p.name + "-" + id
	args := []string{"create", "--name", name, "--hostname", id,
		"--network", p.network, "--network-alias", id,
		"--entrypoint", "/node", image,
		"serve", "--id", id, "--data-dir", "/data",
		"--grpc-addr", "0.0.0.0:7400", "--http-addr", "0.0.0.0:7500", "--gossip-addr", "0.0.0.0:7600",
		"--advertise-grpc", id + ":7400", "--advertise-http", id + ":7500", "--advertise-gossip", id + ":7600",
		"--coord-endpoints", "coord1:7100,coord2:7100,coord3:7100",
		"--join", "coord1:7200,coord2:7200,coord3:7200",
		"--heartbeat-interval", "500ms",
		"--tls-cert", "/tls/" + id + ".pem", "--tls-key", "/tls/" + id + "-key.pem", "--tls-ca", "/tls/ca.pem",
		"--gossip-key-file", "/tls/gossip.key", "--gossip-keyring-file", "/data/gossip.keyring",
	}
	cid, err := docker(args...)
	if err != nil {
		return "", err
	}
	p.extraMu.Lock()
	p.extra = append(p.extra, cid)
	p.extraMu.Unlock()
	if _, err := docker("cp", dir+string(filepath.Separator)+".", cid+":/tls/"); err != nil {
		return cid, err
	}
	_, err = docker("start", cid)
	return cid, err
}

// containerLogs is the last lines of a container's output, stdout and
// stderr interleaved (the servers log to stderr).
func containerLogs(id string, tail int) string {
	return dockerLogs(id, "--tail", fmt.Sprint(tail))
}

// containerLogsSince is a container's output since t.
func containerLogsSince(id string, t time.Time) string {
	return dockerLogs(id, "--since", t.UTC().Format(time.RFC3339Nano))
}

func dockerLogs(id string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", append(append([]string{"logs"}, args...), id)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("docker logs %s: %v: %s", id, err, out)
	}
	return string(out)
}
