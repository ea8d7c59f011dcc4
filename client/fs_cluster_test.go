package client

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/nodeserver"
)

// fsCluster is 3 coordinators and 3 storage nodes in this process.
type fsCluster struct {
	endpoints []string
	nodes     []*nodeserver.Server
	byID      map[string]*nodeserver.Server
}

// freeAddr returns a loopback address free over TCP (and UDP with udp).
func freeAddr(t *testing.T, udp bool) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !udp {
			return addr
		}
		if u, err := net.ListenPacket("udp", addr); err == nil {
			u.Close()
			return addr
		}
	}
}

// startFSCluster starts the cluster, waits until a write gets a
// 3-node pipeline, and stops everything when the test ends.
func startFSCluster(t *testing.T) *fsCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts 3 coordinators and 3 storage nodes")
	}
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	fc := &fsCluster{byID: map[string]*nodeserver.Server{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, n := range fc.nodes {
			n.Close()
		}
	})
	var seed string
	for i := 0; i < 3; i++ {
		cfg := coordserver.DefaultConfig()
		cfg.ID = "coord" + strconv.Itoa(i+1)
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.RaftAddr, cfg.GRPCAddr, cfg.HTTPAddr = freeAddr(t, false), freeAddr(t, false), freeAddr(t, false)
		cfg.GossipAddr = freeAddr(t, true)
		if i == 0 {
			seed = cfg.GossipAddr
		}
		cfg.BootstrapExpect = 3
		cfg.Join = []string{seed}
		cfg.Logger = quiet
		srv, err := coordserver.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		fc.endpoints = append(fc.endpoints, cfg.GRPCAddr)
		wg.Add(1)
		go func() { defer wg.Done(); srv.Run(ctx) }()
	}
	for i := 0; i < 3; i++ {
		cfg := nodeserver.DefaultConfig()
		cfg.ID = "node" + strconv.Itoa(i+1)
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.GRPCAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", freeAddr(t, false)
		cfg.CoordEndpoints = fc.endpoints
		cfg.HeartbeatInterval = 200 * time.Millisecond
		cfg.AckTimeout = 10 * time.Second
		cfg.Logger = quiet
		n, err := nodeserver.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		fc.nodes = append(fc.nodes, n)
		fc.byID[cfg.ID] = n
	}
	fc.waitPipeline(t)
	return fc
}

// client returns a client of the cluster, closed when the test ends.
func (fc *fsCluster) client(t *testing.T) *Client {
	t.Helper()
	c, err := New(context.Background(), Config{Endpoints: fc.endpoints, AttemptTimeout: 2 * time.Second, MaxBackoff: 200 * time.Millisecond})
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
