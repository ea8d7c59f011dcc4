package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/testports"
)

// fsCluster is 3 coordinators and storage nodes in this process
// (coordserver.Cluster).
type fsCluster struct {
	c         *coordserver.Cluster
	endpoints []string
	nodes     []*nodeserver.Server
	byID      map[string]*nodeserver.Server
}

// startFSCluster starts the cluster, waits until a write gets a
// 3-node pipeline, and stops everything when the test ends.
func startFSCluster(t *testing.T) *fsCluster { t.Helper(); return startFSClusterN(t, 3) }

// startFSClusterN is startFSCluster with n storage nodes; opts adjust the
// coordinators' config.
func startFSClusterN(t *testing.T, nodes int, opts ...func(*coordserver.Config)) *fsCluster {
	t.Helper()
	return startClusterOn(t, nodes, ephemeralPorts(t), opts...)
}

// ephemeralPorts: free ports for the coordinators, ":0" for the nodes'
// gRPC and HTTP listeners (a node that restarts gets another port).
func ephemeralPorts(t *testing.T) coordserver.Ports {
	p := coordserver.PortsFrom(func(udp bool) string { return testports.Addr(t, udp) })
	p.Node = func(int) (coordserver.NodeAddrs, error) {
		return coordserver.NodeAddrs{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0", Gossip: testports.Addr(t, false)}, nil
	}
	return p
}

// startClusterOn starts 3 coordinators and n storage nodes on ports, and
// waits until a pipeline can use every node.
func startClusterOn(t *testing.T, nodes int, ports coordserver.Ports, opts ...func(*coordserver.Config)) *fsCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts 3 coordinators and storage nodes")
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c, err := coordserver.StartCluster(coordserver.ClusterOptions{
		Coordinators: 3, Nodes: nodes, Dir: t.TempDir(), Ports: ports, Logger: log,
		Coordinator: func(_ int, cfg *coordserver.Config) {
			cfg.WALPrefill = false
			for _, o := range opts {
				o(cfg)
			}
		},
		Node: func(_ int, cfg *nodeserver.Config) {
			cfg.HeartbeatInterval = 200 * time.Millisecond
			cfg.AckTimeout = 10 * time.Second
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fc := &fsCluster{c: c, endpoints: c.Endpoints(), byID: map[string]*nodeserver.Server{}}
	for i := range c.Nodes() {
		n := c.Node(i)
		fc.nodes = append(fc.nodes, n)
		fc.byID[n.ID()] = n
	}
	fc.waitPipeline(t)
	return fc
}

// startAgain starts node id again on its data directory and addresses,
// after closing it if it still runs.
func (fc *fsCluster) startAgain(t *testing.T, id string) *nodeserver.Server {
	t.Helper()
	i := slices.Index(fc.nodes, fc.byID[id])
	fc.c.StopNode(i)
	n, err := fc.c.StartNode(i)
	if err != nil {
		t.Fatalf("restart %s: %v", id, err)
	}
	fc.byID[id], fc.nodes[i] = n, n
	return n
}

// client returns a client of the cluster, closed when the test ends.
func (fc *fsCluster) client(t *testing.T) *Client {
	t.Helper()
	return fc.clientWith(t, ReplaceNodeDefault)
}

// clientWith is client with the writers' replace-node policy.
func (fc *fsCluster) clientWith(t *testing.T, policy ReplaceNodePolicy) *Client {
	t.Helper()
	c, err := New(context.Background(), Config{Endpoints: fc.endpoints, AttemptTimeout: 2 * time.Second, MaxBackoff: 200 * time.Millisecond, ReplaceNode: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitPipeline writes probe files until one gets all 3 nodes (every node
// registered and heartbeating), then removes the probes.
func (fc *fsCluster) waitPipeline(t *testing.T) {
	t.Helper()
	c := fc.client(t)
	fs := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for i := 0; ctx.Err() == nil; i++ {
		path := fmt.Sprintf("/probe/%d", i)
		nodes, err := probe(ctx, fs, path)
		if err == nil && nodes == 3 {
			if _, err := fs.Delete(ctx, "/probe", true); err != nil {
				t.Fatalf("delete probes: %v", err)
			}
			return
		}
		last = fmt.Errorf("%d pipeline nodes, err %v", nodes, err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // poll interval, not synchronisation
		}
	}
	t.Fatalf("no 3-node pipeline within 60s: %v", last)
}

func probe(ctx context.Context, fs *FS, path string) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := fs.Create(pctx, path, CreateOptions{Replication: 3})
	if err != nil {
		return 0, err
	}
	if _, err := w.WriteContext(pctx, []byte("x")); err != nil {
		w.Abort()
		return 0, err
	}
	nodes := len(w.blk.nodes)
	return nodes, w.Close(pctx)
}

// blockFile finds the FINALIZED data file of block id under dir.
func blockFile(t *testing.T, dir string, id uint64) string {
	t.Helper()
	var found string
	name := fmt.Sprintf("blk_%d", id)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name && strings.Contains(p, "finalized") {
			found = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestReaderReportsCorruptReplica: a byte of one replica rots on disk. The
// reader fails over to another replica and returns the right bytes; the
// corrupt replica is reported (by the reader and by the node's own read
// check), the leader has it deleted and copies the block back from a good
// replica, so the node ends up holding the right bytes again.
func TestReaderReportsCorruptReplica(t *testing.T) {
	t.Parallel()
	fc := startFSCluster(t)
	c := fc.client(t)
	fsys := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := make([]byte, 300_000)
	rand.New(rand.NewSource(5)).Read(data)
	w, err := fsys.Create(ctx, "/c/f", CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var info FileInfo
	pollUntil(t, 30*time.Second, "3 reported replicas", func() (bool, string) {
		info, err = fsys.Stat(ctx, "/c/f")
		return err == nil && len(info.Blocks) == 1 && len(info.Blocks[0].Reported) == 3, fmt.Sprintf("%+v, %v", info, err)
	})
	b := info.Blocks[0]
	victim := readOrder(b)[0] // the replica the reader tries first
	path := blockFile(t, fc.byID[victim].Config().DataDir, b.ID)
	if path == "" {
		t.Fatalf("no block file of %d on %s", b.ID, victim)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[1000] ^= 0x40
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := fsys.Open(ctx, "/c/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with one corrupt replica: %d bytes, equal %v, err %v", len(got), bytes.Equal(got, data), err)
	}

	pollUntil(t, 60*time.Second, victim+"'s replica replaced by a good copy", func() (bool, string) {
		p := blockFile(t, fc.byID[victim].Config().DataDir, b.ID)
		disk, _ := os.ReadFile(p)
		info, err = fsys.Stat(ctx, "/c/f")
		if err != nil {
			return false, err.Error()
		}
		return p != "" && bytes.Equal(disk, data) && len(finalizedOn(info.Blocks[0])) == 3,
			fmt.Sprintf("on disk equal %v, stat %+v", bytes.Equal(disk, data), info)
	})
}
