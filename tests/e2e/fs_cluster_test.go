//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc"
)

const (
	composeFS = "docker-compose-fs.yml"
	nodePort  = 7400
	pool      = client.DefaultBlockPool
)

// fsCluster is the compose project of docker-compose-fs.yml seen from the
// host: the coordinators (cluster) plus storage nodes, the published gRPC
// address of each node, and the fswriter binary.
type fsCluster struct {
	*cluster
	nodes  []string
	writer string // the fswriter binary

	nmu       sync.Mutex
	nodeAddrs map[string]string // node service -> published 127.0.0.1:port of 7400
	nodeGen   int
	conns     map[string]*grpc.ClientConn // published address -> connection
	cached    *client.Client
	cachedGen [2]int
}

// startFSCluster builds fswriter, brings up 3 coordinators and 4 nodes
// with env added to compose's environment, and waits until the cluster is
// stable and every node is live with a full block report, out of safe mode.
func startFSCluster(t *testing.T, env ...string) *fsCluster {
	t.Helper()
	writer := filepath.Join(t.TempDir(), "fswriter")
	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer bcancel()
	build := exec.CommandContext(bctx, "go", "build", "-o", writer, "./tests/e2e/fswriter")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build fswriter: %v\n%s", err, out)
	}
	coords := []string{"coord1", "coord2", "coord3"}
	nodes := []string{"node1", "node2", "node3", "node4"}
	p, err := newProject(composeFS, append(slices.Clone(coords), nodes...))
	if err != nil {
		t.Fatal(err)
	}
	p.env = env
	fc := &fsCluster{nodes: nodes, writer: writer, nodeAddrs: map[string]string{}, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(fc.closeConns) // registered before the project's down: runs after it
	fc.cluster = upCluster(t, p, coords)
	if err := fc.refreshNodes(nodes...); err != nil {
		t.Fatal(err)
	}
	fc.waitHealthy(nodes...)
	fc.waitNodesLive(nodes...)
	fc.logf("%d storage nodes live, published gRPC %v", len(nodes), fc.nodeAddrMap())
	return fc
}

func (fc *fsCluster) closeConns() {
	fc.nmu.Lock()
	defer fc.nmu.Unlock()
	if fc.cached != nil {
		fc.cached.Close()
	}
	for _, c := range fc.conns {
		c.Close()
	}
}

// refreshNodes re-reads the published gRPC port of nodes.
func (fc *fsCluster) refreshNodes(nodes ...string) error {
	for _, n := range nodes {
		var a string
		err := poll(30*time.Second, 200*time.Millisecond, func(context.Context) (err error) {
			a, err = fc.port(n, nodePort)
			return err
		})
		if err != nil {
			return err
		}
		fc.nmu.Lock()
		if old := fc.nodeAddrs[n]; old != a {
			fc.nodeAddrs[n] = a
			fc.nodeGen++
			// Docker hands host ports out again: a connection cached for
			// either address may be one to another container, backing off.
			fc.dropConns(old, a)
		}
		fc.nmu.Unlock()
	}
	return nil
}

func (fc *fsCluster) nodeAddrMap() map[string]string {
	fc.nmu.Lock()
	defer fc.nmu.Unlock()
	return maps.Clone(fc.nodeAddrs)
}

// fsConfig is the SDK config for the current addresses: the coordinators'
// as cluster.config, and every node's advertised nodeN:7400 mapped to its
// published port, so the SDK's pipelines and reads reach the nodes.
func (fc *fsCluster) fsConfig() (client.Config, [2]int) {
	cfg, gen := fc.config()
	fc.nmu.Lock()
	defer fc.nmu.Unlock()
	for n, a := range fc.nodeAddrs {
		cfg.AddressMap[fmt.Sprintf("%s:%d", n, nodePort)] = a
	}
	return cfg, [2]int{gen, fc.nodeGen}
}

// client is a shared SDK client for the current addresses (replaced when
// one changes). Callers must not close it.
func (fc *fsCluster) client(ctx context.Context) (*client.Client, error) {
	cfg, gen := fc.fsConfig()
	fc.nmu.Lock()
	defer fc.nmu.Unlock()
	if fc.cached != nil && fc.cachedGen == gen {
		return fc.cached, nil
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if fc.cached != nil {
		fc.cached.Close()
	}
	fc.cached, fc.cachedGen = c, gen
	return c, nil
}

// conn is a cached connection to a published address.
func (fc *fsCluster) conn(addr string) (*grpc.ClientConn, error) {
	fc.nmu.Lock()
	defer fc.nmu.Unlock()
	if c, ok := fc.conns[addr]; ok {
		return c, nil
	}
	// Reconnect: a restarted container is dialled again within a second,
	// not after grpc-go's default backoff of up to two minutes.
	c, err := grpc.NewClient(addr, fc.creds(), grpcflow.Reconnect())
	if err != nil {
		return nil, err
	}
	fc.conns[addr] = c
	return c, nil
}

// dropConns closes the cached connections to addrs (fc.nmu held).
func (fc *fsCluster) dropConns(addrs ...string) {
	for _, a := range addrs {
		if c, ok := fc.conns[a]; ok {
			c.Close()
			delete(fc.conns, a)
		}
	}
}

// dataNode is the DataNode client of a node at its published address.
func (fc *fsCluster) dataNode(node string) (pb.DataNodeClient, error) {
	fc.nmu.Lock()
	addr := fc.nodeAddrs[node]
	fc.nmu.Unlock()
	if addr == "" {
		return nil, fmt.Errorf("node %s: no published address", node)
	}
	c, err := fc.conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewDataNodeClient(c), nil
}

// rawStat is the Namespace Stat reply (with the block's recovery state,
// which the SDK's FileInfo leaves out), from the first coordinator that
// answers (followers forward it to the leader).
func (fc *fsCluster) rawStat(ctx context.Context, path string) (*pb.StatResponse, error) {
	var last error
	for _, s := range fc.members {
		c, err := fc.conn(fc.addr(s))
		if err != nil {
			last = err
			continue
		}
		r, err := pb.NewNamespaceClient(c).Stat(ctx, &pb.StatRequest{Path: path})
		if err == nil {
			return r, nil
		}
		last = fmt.Errorf("%s: %w", s, err)
	}
	return nil, last
}

// waitNodesLive waits until the leader lists every one of nodes live with
// a full block report this term, out of safe mode.
func (fc *fsCluster) waitNodesLive(nodes ...string) {
	fc.t.Helper()
	err := poll(90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		c, err := fc.client(ctx)
		if err != nil {
			return err
		}
		r, err := c.Nodes(ctx)
		if err != nil {
			return err
		}
		if r.SafeMode {
			return errors.New("the leader is in safe mode")
		}
		for _, want := range nodes {
			ok := false
			for _, n := range r.Nodes {
				if n.ID == want {
					ok = n.Live && n.FullReport
				}
			}
			if !ok {
				return fmt.Errorf("node %s not live with a full report: %v", want, r.Nodes)
			}
		}
		return nil
	})
	if err != nil {
		fc.t.Fatal(err)
	}
}

// restartNode starts a killed or stopped node, re-reads its port and
// waits until it is healthy and live again.
func (fc *fsCluster) restartNode(node string) {
	fc.t.Helper()
	if err := fc.project.start(node); err != nil {
		fc.t.Fatal(err)
	}
	if err := fc.refreshNodes(node); err != nil {
		fc.t.Fatal(err)
	}
	fc.waitHealthy(node)
	fc.waitNodesLive(node)
	fc.logf("%s restarted, gRPC now at %s", node, fc.nodeAddrMap()[node])
}

// running reports whether the service's container runs.
func (fc *fsCluster) running(service string) (bool, error) {
	out, err := docker("inspect", "--format", "{{.State.Running}}", fc.ids[service])
	return out == "true", err
}

// ensureUp restarts every coordinator and node a failed earlier subtest
// left down (except skip) and waits until all are back.
func (fc *fsCluster) ensureUp(skip ...string) {
	fc.t.Helper()
	var coords, nodes []string
	for _, s := range fc.services {
		if slices.Contains(skip, s) {
			continue
		}
		up, err := fc.running(s)
		if err != nil {
			fc.t.Fatal(err)
		}
		if up {
			continue
		}
		if slices.Contains(fc.nodes, s) {
			nodes = append(nodes, s)
		} else {
			coords = append(coords, s)
		}
	}
	if len(coords) > 0 {
		fc.logf("restarting coordinators %v left down", coords)
		fc.restart(coords...)
		fc.waitRejoined(coords...)
	}
	for _, n := range nodes {
		fc.logf("restarting node %s left down", n)
		fc.restartNode(n)
	}
}

// writerData is fswriter's byte stream for seed (fswriter.Data: keep the
// two identical).
func writerData(seed int64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], uint64(seed))
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// writerProc is a running fswriter.
type writerProc struct {
	cmd      *exec.Cmd
	path     string
	seed     int64
	acked    int // what Sync acknowledged
	written  int // every byte given to Write
	clientID string
	stderr   *lockedBuffer
	exited   chan struct{}
	killed   bool
}

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

// startWriter runs fswriter on path: synced bytes then Sync, then
// unsynced more; it returns once the writer said it is ready (and waits,
// renewing its lease, to be killed).
func (fc *fsCluster) startWriter(t *testing.T, path string, seed int64, synced, unsynced int) *writerProc {
	t.Helper()
	cfg, _ := fc.fsConfig()
	var pairs []string
	for k, v := range cfg.AddressMap {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	w := &writerProc{path: path, seed: seed, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	w.cmd = exec.Command(fc.writer, "-endpoints", strings.Join(cfg.Endpoints, ","), "-address-map", strings.Join(pairs, ","),
		"-path", path, "-seed", fmt.Sprint(seed), "-synced", fmt.Sprint(synced), "-unsynced", fmt.Sprint(unsynced), "-lifetime", "5m",
		"-tls-cert", fc.tlsFile("admin.pem"), "-tls-key", fc.tlsFile("admin-key.pem"), "-tls-ca", fc.tlsFile("ca.pem"))
	w.cmd.Stderr = w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan map[string]any, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(events)
	}()
	t.Cleanup(func() { w.kill(t) })

	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for w.written == 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				err := w.cmd.Wait()
				w.killed = true
				t.Fatalf("fswriter %s exited before it was ready: %v\n%s", path, err, w.stderr)
			}
			switch ev["event"] {
			case "synced":
				w.acked = int(ev["acked"].(float64))
				w.clientID, _ = ev["client_id"].(string)
			case "ready":
				w.written = int(ev["written"].(float64))
			}
		case <-deadline.C:
			t.Fatalf("fswriter %s not ready within 90s:\n%s", path, w.stderr)
		}
	}
	if w.acked != synced || w.written != synced+unsynced {
		t.Fatalf("fswriter %s: acked %d, written %d; want %d and %d", path, w.acked, w.written, synced, synced+unsynced)
	}
	return w
}

// kill SIGKILLs the writer (a dead writer on the host) and reaps it.
func (w *writerProc) kill(t *testing.T) {
	if w.killed {
		return
	}
	w.killed = true
	if err := w.cmd.Process.Kill(); err != nil {
		t.Logf("kill fswriter %s: %v", w.path, err)
	}
	_ = w.cmd.Wait()
}

// data is every byte the writer wrote.
func (w *writerProc) data() []byte { return writerData(w.seed, w.written) }

// recoveryLog is a block's recovery as the journal's audit events tell it.
type recoveryLog struct {
	attempts  []*client.BlockRecovery
	committed *client.RecoveryCommit
}

func (r recoveryLog) String() string {
	var b strings.Builder
	for _, a := range r.attempts {
		fmt.Fprintf(&b, "attempt %d: id %d primary %s (%s); ", a.Attempt, a.ID, a.Primary, a.Reason)
	}
	if c := r.committed; c != nil {
		fmt.Fprintf(&b, "committed id %d length %d targets %v", c.RecoveryID, c.Length, c.Participants)
	} else {
		b.WriteString("not committed")
	}
	return b.String()
}

// recoveryOf is block id's recovery from the journal's recovery events.
func (fc *fsCluster) recoveryOf(ctx context.Context, id uint64) (recoveryLog, error) {
	var out recoveryLog
	c, err := fc.client(ctx)
	if err != nil {
		return out, err
	}
	hs, err := c.Journal().Recoveries(ctx)
	if err != nil {
		return out, err
	}
	for _, h := range hs {
		if h.BlockID != id {
			continue
		}
		for _, a := range h.Attempts {
			out.attempts = append(out.attempts, a.Attempt)
		}
		if h.Committed != nil {
			out.committed = h.Committed.Commit
		}
	}
	return out, nil
}

// replicaOn is node's replica of block id (nil when it has none).
func (fc *fsCluster) replicaOn(ctx context.Context, node string, id uint64) (*pb.Replica, error) {
	dn, err := fc.dataNode(node)
	if err != nil {
		return nil, err
	}
	r, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: pool})
	if err != nil {
		return nil, fmt.Errorf("%s: list replicas: %w", node, err)
	}
	for _, rep := range r.Replicas {
		if rep.BlockId == id {
			return rep, nil
		}
	}
	return nil, nil
}

// readReplica reads node's whole replica of block id at gs directly from
// the node with the block access token the coordinators handed out for it
// (the cluster runs with ACLs), verifying every chunk's checksum.
func (fc *fsCluster) readReplica(ctx context.Context, node string, id, gs uint64, token []byte) ([]byte, error) {
	dn, err := fc.dataNode(node)
	if err != nil {
		return nil, err
	}
	s, err := dn.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: pool, BlockId: id, Gs: gs, BlockToken: token})
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read block %d: %w", node, id, err)
		}
		if c.Offset != int64(len(out)) {
			return nil, fmt.Errorf("%s: block %d: chunk at offset %d after %d bytes", node, id, c.Offset, len(out))
		}
		if bad := blockio.Verify(c.Data, c.Checksums); bad >= 0 {
			return nil, fmt.Errorf("%s: block %d: chunk %d after offset %d does not verify", node, id, bad, c.Offset)
		}
		out = append(out, c.Data...)
	}
}
