//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
)

// TestGossipKeyRotationKeepsMembers runs the file system compose project
// (3 coordinators, 4 storage nodes, gossip encrypted with tls-init's key)
// with clients appending throughout, and rotates the gossip key as
// docs/security.md says, with coord gossip keyring run inside the
// coordinator containers (each step through another coordinator): install
// NEW, use NEW, remove OLD. After each step all 7 members answered and
// hold exactly the expected keys. Then, for longer than the failure
// detector takes to drop a member that cannot be decrypted, the cluster
// stays stable and every node live and alive in gossip; every
// coordinator's gossip still reaches every node, no member logged another
// one gone, and every member's keyring file holds NEW alone. A storage
// node and a coordinator are then restarted (their --gossip-key-file
// still holds OLD): each logs that its keyring file won, the node comes
// back alive in gossip and the coordinator's own gossip reaches all 4
// nodes again, with NEW alone. No member ever logs a gossip key mismatch,
// and every acknowledged append is in every member's journal exactly
// once, at its seq.
func TestGossipKeyRotationKeepsMembers(t *testing.T) {
	fc := startFSCluster(t)
	all := append(slices.Clone(fc.members), fc.nodes...)
	l := startLoad(fc.cluster, 2)
	l.waitCount(100, time.Minute)

	oldKey, err := fc.tlsVolumeFile("gossip.key")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(oldKey))
	// Every node is live once startFSCluster returns; its gossip join
	// may still be spreading.
	err = poll(30*time.Second, 500*time.Millisecond, func(context.Context) error {
		r, err := fc.tryKeyringCLI(fc.members[0], "list")
		if err == nil {
			err = checkKeyring(r, all, old)
		}
		return err
	})
	if err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	rotated := time.Now()
	out, err := docker("exec", fc.ids[fc.members[0]], "/coord", "gossip", "keygen")
	if err != nil {
		t.Fatal(err)
	}
	nw := strings.TrimSpace(out)
	fc.logf("rotating the gossip key of %d members: OLD %.8s..., NEW %.8s...", len(all), old, nw)

	steps := []struct {
		op, key, through string
		want             []string // every member's keys after it, primary first
	}{
		{"install", nw, fc.members[1], []string{old, nw}},
		{"use", nw, fc.members[2], []string{nw, old}},
		{"remove", old, fc.members[0], []string{nw}},
	}
	for _, s := range steps {
		r := fc.keyringCLI(s.through, s.op, s.key)
		if err := checkKeyring(r, all, s.want...); err != nil {
			t.Fatalf("keyring %s through %s: %v", s.op, s.through, err)
		}
		fc.logf("keyring %s through %s: %d of %d members ok, each holds %d keys", s.op, r.AnsweredBy, r.Total-r.Failed, r.Total, len(s.want))
		l.waitMore(50, time.Minute)
	}

	// With memberlist's LAN settings (a probe every second, suspicion
	// of at least 4 s, shortened by the other members' confirmations) a
	// member the others cannot decrypt is declared dead within seconds:
	// watch for longer.
	const hold = 15 * time.Second
	err = holdFor(hold, 250*time.Millisecond, func(ctx context.Context) error {
		return fc.allInGossip(ctx, fc.nodes)
	})
	if err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	fc.logf("for %s after the rotation: %d members stable, %d nodes live and alive in gossip", hold, len(fc.members), len(fc.nodes))
	// Each coordinator's gossip holds every node (its keyring fan-out
	// reaches the nodes alive there), and no member saw another leave
	// (coordinators included, which no API lists by gossip).
	for _, m := range fc.members {
		if err := checkKeyring(fc.keyringCLI(m, "list"), all, nw); err != nil {
			t.Errorf("keyring list through %s: %v", m, err)
		}
	}
	for _, m := range all {
		if out := containerLogsSince(fc.ids[m], rotated); strings.Contains(out, "membership: member gone") {
			t.Errorf("%s saw a member go during the rotation:\n%s", m, grepLines(out, "membership: member gone"))
		}
	}
	for _, m := range all {
		keys, err := fc.keyringFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys, []string{nw}) {
			t.Errorf("%s's keyring file holds %.8q, want NEW alone", m, keys)
		}
	}

	// A node restarted: it leaves the gossip, and rejoins with its
	// keyring file's NEW (its --gossip-key-file holds OLD).
	node := fc.nodes[1]
	if err := fc.stop(node); err != nil {
		t.Fatal(err)
	}
	err = poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		n, err := fc.nodeStatus(ctx, node)
		if err == nil && n.Gossip == "alive" {
			err = fmt.Errorf("%s still alive in gossip", node)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.project.start(node); err != nil {
		t.Fatal(err)
	}
	if err := fc.refreshNodes(node); err != nil {
		t.Fatal(err)
	}
	fc.waitHealthy(node)
	if err := poll(60*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		return fc.allInGossip(ctx, fc.nodes)
	}); err != nil {
		t.Fatalf("%s restarted: %v", node, err)
	}
	fc.logf("%s restarted and alive in gossip again", node)

	// A coordinator restarted: its gossip starts empty, so its keyring
	// fan-out reaches the storage nodes only once it rejoined with NEW.
	coord := fc.others(fc.leader())[0]
	if err := fc.stop(coord); err != nil {
		t.Fatal(err)
	}
	fc.restart(coord)
	fc.waitRejoined(coord)
	err = poll(60*time.Second, 500*time.Millisecond, func(context.Context) error {
		r, err := fc.tryKeyringCLI(coord, "list")
		if err != nil {
			return err
		}
		if r.AnsweredBy != coord {
			return fmt.Errorf("answered by %s, want %s", r.AnsweredBy, coord)
		}
		return checkKeyring(r, all, nw)
	})
	if err != nil {
		t.Fatalf("%s restarted: %v", coord, err)
	}
	fc.logf("%s restarted: its gossip reaches all %d members, NEW alone", coord, len(all))
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	if err := fc.allInGossip(actx, fc.nodes); err != nil {
		t.Fatal(err)
	}
	// Both restarted members read their keyring file (NEW), not the
	// --gossip-key-file (OLD) they were started with.
	for _, m := range []string{node, coord} {
		if out := containerLogsSince(fc.ids[m], rotated); !strings.Contains(out, "the file wins") {
			t.Errorf("%s did not log that its keyring file won over the gossip key at its restart", m)
		}
	}

	for _, m := range all {
		if out := containerLogs(fc.ids[m], 100000); strings.Contains(out, "gossip key mismatch") {
			t.Errorf("%s logged a gossip key mismatch", m)
		}
	}
	l.waitMore(100, time.Minute)
	l.stopAndVerify()
}

// keyringJSON is coord gossip keyring --json.
type keyringJSON struct {
	Op         string `json:"op"`
	AnsweredBy string `json:"answered_by"`
	Total      int    `json:"total"`
	Failed     int    `json:"failed"`
	Members    []struct {
		ID    string   `json:"id"`
		Role  string   `json:"role"`
		OK    bool     `json:"ok"`
		Error string   `json:"error"`
		Keys  []string `json:"keys"`
	} `json:"members"`
}

// tryKeyringCLI runs coord gossip keyring OP [KEY] inside member's
// container against member itself, as user admin (the certificate
// tls-init made), and parses its JSON; a member's failure (exit 1) still
// has its answer.
func (cl *cluster) tryKeyringCLI(member, op string, key ...string) (keyringJSON, error) {
	args := append([]string{"exec", cl.ids[member], "/coord", "gossip", "keyring", op}, key...)
	args = append(args, "--json", "--endpoints", fmt.Sprintf("%s:%d", member, grpcPort),
		"--tls-cert", "/tls/admin.pem", "--tls-key", "/tls/admin-key.pem", "--tls-ca", "/tls/ca.pem")
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var r keyringJSON
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("coord gossip keyring %s on %s: %v (%v): %s", op, member, runErr, err, strings.TrimSpace(stderr.String()))
	}
	return r, nil
}

// keyringCLI is tryKeyringCLI failing the test when there is no answer.
func (cl *cluster) keyringCLI(member, op string, key ...string) keyringJSON {
	cl.t.Helper()
	r, err := cl.tryKeyringCLI(member, op, key...)
	if err != nil {
		cl.t.Fatal(err)
	}
	return r
}

// checkKeyring checks that exactly members answered r, each ok and
// holding keys (primary first).
func checkKeyring(r keyringJSON, members []string, keys ...string) error {
	var ids, bad []string
	for _, m := range r.Members {
		ids = append(ids, m.ID)
		if !m.OK || !slices.Equal(m.Keys, keys) {
			bad = append(bad, fmt.Sprintf("%s (ok %v, %d keys %.8q, error %q)", m.ID, m.OK, len(m.Keys), m.Keys, m.Error))
		}
	}
	slices.Sort(ids)
	want := slices.Sorted(slices.Values(members))
	switch {
	case !slices.Equal(ids, want):
		return fmt.Errorf("answered by %s for members %v, want %v", r.AnsweredBy, ids, want)
	case r.Total != len(members) || r.Failed != 0:
		return fmt.Errorf("answered by %s: %d failed of %d", r.AnsweredBy, r.Failed, r.Total)
	case len(bad) > 0:
		return fmt.Errorf("answered by %s: want %d keys %.8q on each, got: %s", r.AnsweredBy, len(keys), keys, strings.Join(bad, "; "))
	}
	return nil
}

// keyringFile is the keys of a member's keyring file
// (--gossip-keyring-file /data/gossip.keyring), primary first.
func (p *project) keyringFile(service string) ([]string, error) {
	dst := filepath.Join(p.tlsDir, service+".keyring")
	if _, err := docker("cp", p.ids[service]+":/data/gossip.keyring", dst); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		return nil, err
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("%s's keyring file: %w", service, err)
	}
	return keys, nil
}

// nodeStatus is one storage node in the leader's node list.
func (fc *fsCluster) nodeStatus(ctx context.Context, id string) (client.Node, error) {
	c, err := fc.client(ctx)
	if err != nil {
		return client.Node{}, err
	}
	r, err := c.Nodes(ctx)
	if err != nil {
		return client.Node{}, err
	}
	for _, n := range r.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return client.Node{}, fmt.Errorf("node %s not registered", id)
}

// allInGossip checks that the cluster is stable with every coordinator
// and that the leader lists each of nodes live and alive in gossip.
func (fc *fsCluster) allInGossip(ctx context.Context, nodes []string) error {
	c, err := fc.client(ctx)
	if err != nil {
		return err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if err := stable(st, len(fc.members)); err != nil {
		return err
	}
	r, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, id := range nodes {
		i := slices.IndexFunc(r.Nodes, func(n client.Node) bool { return n.ID == id })
		if i < 0 || !r.Nodes[i].Live || r.Nodes[i].Gossip != "alive" {
			return fmt.Errorf("node %s not live and alive in gossip: %s", id, describeNodes(r))
		}
	}
	return nil
}

// holdFor checks cond every interval for d and returns its first error: a
// state that must last, not one waited for. A call that could not be made
// at all (the deadline of the call itself) counts as a failure too.
func holdFor(d, every time.Duration, cond func(ctx context.Context) error) error {
	end := time.Now().Add(d)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := cond(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("check %d, %s before the end of %s: %w", n+1, time.Until(end).Round(100*time.Millisecond), d, err)
		}
		if !time.Now().Before(end) {
			return nil
		}
		<-tick.C
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
