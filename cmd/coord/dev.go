package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/logging"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/portprobe"
	"github.com/spf13/cobra"
)

// devReadyTimeout bounds how long coord dev waits for a leader.
const devReadyTimeout = 30 * time.Second

// devPorts are the listen ports of one dev member, all on 127.0.0.1.
type devPorts struct{ Raft, GRPC, Gossip, HTTP int }

// portPicker returns the ports of member i (0-based). Members are asked for
// in order.
type portPicker func(i int) (devPorts, error)

// defaultPorts are the ports of coordserver.DefaultConfig.
func defaultPorts() devPorts {
	d := coordserver.DefaultConfig()
	port := func(addr string) int {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			panic(err)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			panic(err)
		}
		return n
	}
	return devPorts{Raft: port(d.RaftAddr), GRPC: port(d.GRPCAddr), Gossip: port(d.GossipAddr), HTTP: port(d.HTTPAddr)}
}

// probingPicker gives member 0 the default ports, so every CLI command
// works without flags, and each later member the next free port above each
// default (TCP, and UDP too for gossip).
func probingPicker() portPicker {
	base := defaultPorts()
	used := map[int]bool{base.Raft: true, base.GRPC: true, base.Gossip: true, base.HTTP: true}
	next := func(from int, udp bool) (int, error) {
		for p := from + 1; p <= 65535 && p <= from+1000; p++ {
			if !used[p] && portprobe.Free(p, udp) {
				used[p] = true
				return p, nil
			}
		}
		return 0, fmt.Errorf("no free port above %d", from)
	}
	return func(i int) (devPorts, error) {
		if i == 0 {
			return base, nil
		}
		var p devPorts
		var err error
		if p.Raft, err = next(base.Raft, false); err != nil {
			return p, err
		}
		if p.GRPC, err = next(base.GRPC, false); err != nil {
			return p, err
		}
		if p.Gossip, err = next(base.Gossip, true); err != nil {
			return p, err
		}
		p.HTTP, err = next(base.HTTP, false)
		return p, err
	}
}

func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// devOptions configure a dev cluster.
type devOptions struct {
	Members int
	// DataDir holds one directory per member; empty: a new temporary
	// directory, removed by cleanup unless Keep.
	DataDir string
	Keep    bool
	Ports   portPicker
	Logger  *slog.Logger
	// EnablePprof mounts /debug/pprof/ on every member's HTTP address.
	EnablePprof bool
	// Nodes storage nodes join the coordinators (0: none).
	Nodes int
	// HeartbeatInterval is the nodes' heartbeat period (0: the default).
	HeartbeatInterval time.Duration
	// LeaseSoftLimit and LeaseHardLimit override the coordinators' lease
	// limits (0: the defaults), so a recovery can be watched in seconds.
	LeaseSoftLimit, LeaseHardLimit time.Duration
	// DeadNodeInterval overrides the coordinators' dead-node interval.
	DeadNodeInterval time.Duration
	// LogStore is the coordinators' Raft log store (empty: auto).
	LogStore string
	// WALPrefill zeroes raft-wal segments ahead of use (coord serve
	// --raft-wal-prefill); the flag defaults to on, tests leave it off.
	WALPrefill bool
	// JournalLinger is every coordinator's journal linger (coord serve
	// --journal-linger); the flag defaults to the coordinator default,
	// the zero value never waits.
	JournalLinger time.Duration
	// SessionIdleTimeout is every coordinator's session idle timeout
	// (coord serve --session-idle-timeout); the flag defaults to the
	// coordinator default, the zero value expires none by time.
	SessionIdleTimeout time.Duration
	// JournalMaxRetainedBytes is every coordinator's retention quota
	// (coord serve --journal-max-retained-bytes); the flag defaults to the
	// coordinator default, the zero value sets none.
	JournalMaxRetainedBytes uint64
	// SerialLeaderWrite turns off the leader's parallel write (coord serve
	// --raft-parallel-leader-write=false).
	SerialLeaderWrite bool
}

// devCluster is a running in-process cluster.
type devCluster struct {
	dir     string
	temp    bool
	keep    bool
	cfgs    []coordserver.Config
	servers []*coordserver.Server
	mu      sync.Mutex // nodes[i] is replaced when a node restarts
	nodes   []*nodeserver.Server
}

// devNodeBase are the first storage node's ports (gRPC, http, gossip);
// later nodes take the next free ones.
var devNodeBase = [3]int{7400, 7500, 7600}

// devLockedMemory is each dev node's cache budget (node serve
// --max-locked-memory); above RLIMIT_MEMLOCK (ulimit -l) a non-root user's
// caching fails with mlock-refused, which the node logs.
const devLockedMemory = 64 << 20

// startNodes starts n storage nodes on loopback ports, each with its own
// volume under the cluster's data dir, joined to the coordinators.
func (d *devCluster) startNodes(opts devOptions) error {
	used := map[int]bool{}
	next := func(from int, udp bool) (int, error) {
		for p := from; p <= 65535 && p < from+1000; p++ {
			if !used[p] && portprobe.Free(p, udp) {
				used[p] = true
				return p, nil
			}
		}
		return 0, fmt.Errorf("no free port from %d", from)
	}
	for i := 0; i < opts.Nodes; i++ {
		cfg := nodeserver.DefaultConfig()
		cfg.ID = "node" + strconv.Itoa(i+1)
		cfg.DataDir = filepath.Join(d.dir, cfg.ID)
		var ports [3]int
		for k, base := range devNodeBase {
			p, err := next(base, k == 2)
			if err != nil {
				return fmt.Errorf("%s: %w", cfg.ID, err)
			}
			ports[k] = p
		}
		cfg.GRPCAddr, cfg.HTTPAddr, cfg.GossipAddr = localAddr(ports[0]), localAddr(ports[1]), localAddr(ports[2])
		cfg.CoordEndpoints = d.endpoints()
		for _, c := range d.cfgs {
			cfg.Join = append(cfg.Join, c.GossipAddr) // the coordinators' failure detector sees the node
		}
		if opts.HeartbeatInterval > 0 {
			cfg.HeartbeatInterval = opts.HeartbeatInterval
		}
		cfg.MaxLockedMemory = devLockedMemory // so coord cache has somewhere to cache
		cfg.Logger = opts.Logger.With("node", cfg.ID)
		n, err := nodeserver.New(cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.ID, err)
		}
		d.nodes = append(d.nodes, n)
	}
	return nil
}

// devConfig is member i's config: DefaultConfig with dev ids, loopback
// addresses and bootstrap-expect discovery through member 0's gossip port.
func devConfig(i, members int, p devPorts, dir, seed string, logger *slog.Logger) coordserver.Config {
	cfg := coordserver.DefaultConfig()
	cfg.ID = "coord" + strconv.Itoa(i+1)
	cfg.DataDir = filepath.Join(dir, cfg.ID)
	cfg.RaftAddr = localAddr(p.Raft)
	cfg.GRPCAddr = localAddr(p.GRPC)
	cfg.GossipAddr = localAddr(p.Gossip)
	cfg.HTTPAddr = localAddr(p.HTTP)
	cfg.BootstrapExpect = members
	cfg.Join = []string{seed}
	cfg.Logger = logger
	return cfg
}

// startDev starts opts.Members coordinators with the same wiring as coord
// serve (coordserver.New). They form a cluster on their own; call run to
// keep them running and waitReady to wait for a leader.
func startDev(opts devOptions) (_ *devCluster, err error) {
	if opts.Members < 1 || opts.Members > 5 {
		return nil, fmt.Errorf("members %d: want 1..5", opts.Members)
	}
	if opts.Ports == nil {
		opts.Ports = probingPicker()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &devCluster{dir: opts.DataDir, keep: opts.Keep}
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "logbook-dev-"); err != nil {
			return nil, err
		}
		d.temp = true
	}
	defer func() {
		if err != nil {
			d.closeAll()
			d.cleanup()
		}
	}()
	var seed string
	for i := 0; i < opts.Members; i++ {
		p, err := opts.Ports(i)
		if err != nil {
			return nil, fmt.Errorf("ports for member %d: %w", i+1, err)
		}
		if i == 0 {
			seed = localAddr(p.Gossip)
		}
		cfg := devConfig(i, opts.Members, p, d.dir, seed, opts.Logger)
		cfg.EnablePprof = opts.EnablePprof
		if opts.LogStore != "" {
			cfg.LogStore = opts.LogStore
		}
		cfg.WALPrefill = opts.WALPrefill
		cfg.Journal.Linger = opts.JournalLinger
		cfg.Journal.SessionIdleTimeout = opts.SessionIdleTimeout
		cfg.Journal.MaxRetainedBytes = opts.JournalMaxRetainedBytes
		cfg.Raft.ParallelLeaderWrite = !opts.SerialLeaderWrite
		if opts.LeaseSoftLimit > 0 {
			cfg.FS.LeaseSoftLimit = opts.LeaseSoftLimit
		}
		if opts.LeaseHardLimit > 0 {
			cfg.FS.LeaseHardLimit = opts.LeaseHardLimit
		}
		if opts.DeadNodeInterval > 0 {
			cfg.FS.NodeDeadInterval = opts.DeadNodeInterval
			stale := cfg.FS.NodeStaleInterval
			if stale == 0 {
				stale = blocks.DefaultConfig().NodeStaleInterval
			}
			if stale > opts.DeadNodeInterval {
				cfg.FS.NodeStaleInterval = opts.DeadNodeInterval / 3
			}
		}
		srv, err := coordserver.New(cfg)
		if err != nil {
			if i == 0 && strings.Contains(err.Error(), "address already in use") {
				err = fmt.Errorf("%w (is another coord dev or coord serve running?)", err)
			}
			return nil, fmt.Errorf("%s: %w", cfg.ID, err)
		}
		d.cfgs = append(d.cfgs, cfg)
		d.servers = append(d.servers, srv)
	}
	if err := d.startNodes(opts); err != nil {
		return nil, err
	}
	return d, nil
}

// run keeps every member running until ctx ends, then stops them all
// concurrently. A member that stops on its own (a fatal error, removed from
// the cluster) is reported to onExit while the others keep running.
func (d *devCluster) run(ctx context.Context, onExit func(id string, err error)) error {
	errs := make([]error, len(d.servers))
	var wg sync.WaitGroup
	for i, s := range d.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s.ID(), err)
				if onExit != nil {
					onExit(s.ID(), err)
				}
			}
		}()
	}
	nodeErrs := make([]error, len(d.nodes))
	for i, n := range d.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := n.Run(ctx)
				if err == nil && ctx.Err() == nil && n.RestartRequested() {
					// coord nodes shutdown --restart: start it again at once,
					// as a supervisor would, so its writers resume.
					if n, err = d.restartNode(i); err == nil {
						continue
					}
				}
				if err != nil {
					nodeErrs[i] = fmt.Errorf("%s: %w", n.ID(), err)
					if onExit != nil {
						onExit(n.ID(), err)
					}
				}
				return
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, nodeErrs...)...)
}

// restartNode starts node i again with its config (same addresses and
// volume) after a shutdown for restart.
func (d *devCluster) restartNode(i int) (*nodeserver.Server, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := nodeserver.New(d.nodes[i].Config())
	if err != nil {
		return d.nodes[i], fmt.Errorf("restart: %w", err)
	}
	d.nodes[i] = n
	return n, nil
}

// closeAll closes the started members concurrently (used when startup
// fails half-way).
func (d *devCluster) closeAll() {
	var wg sync.WaitGroup
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Close() }()
	}
	for _, s := range d.servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
}

// cleanup removes a temporary data dir unless it is to be kept.
func (d *devCluster) cleanup() error {
	if d.temp && !d.keep {
		return os.RemoveAll(d.dir)
	}
	return nil
}

// endpoints are the members' gRPC addresses, member 0 first.
func (d *devCluster) endpoints() []string {
	out := make([]string, len(d.cfgs))
	for i, c := range d.cfgs {
		out[i] = c.GRPCAddr
	}
	return out
}

// waitReady polls the cluster status until there is a leader and every
// member is registered and healthy, or ctx ends.
func (d *devCluster) waitReady(ctx context.Context) (client.ClusterStatus, error) {
	c, err := client.New(ctx, client.Config{Endpoints: d.endpoints(), AttemptTimeout: time.Second})
	if err != nil {
		return client.ClusterStatus{}, err
	}
	defer c.Close()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no status yet")
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(pctx)
		cancel()
		switch {
		case err != nil:
			last = err
		case devReady(st, len(d.servers)):
			return st, nil
		case st.LeaderID == "":
			last = errors.New("no leader elected yet")
		default:
			last = errors.New("not every member is registered and healthy yet")
		}
		select {
		case <-ctx.Done():
			return client.ClusterStatus{}, fmt.Errorf("%w (%v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func devReady(st client.ClusterStatus, n int) bool {
	if st.LeaderID == "" || len(st.Members) != n {
		return false
	}
	for _, m := range st.Members {
		if !m.Healthy || m.GRPCAddr == "" {
			return false
		}
	}
	return true
}

// printBanner tells the user where the cluster is and what to try.
func (d *devCluster) printBanner(w io.Writer, st client.ClusterStatus) {
	noun := "coordinators"
	if len(d.cfgs) == 1 {
		noun = "coordinator"
	}
	fmt.Fprintf(w, "Logbook dev cluster is up: %d %s and %d storage nodes, cluster id %q.\n", len(d.cfgs), noun, len(d.nodes), d.cfgs[0].ClusterID)
	switch {
	case d.temp && !d.keep:
		fmt.Fprintf(w, "Data: %s (removed on exit)\n\n", d.dir)
	default:
		fmt.Fprintf(w, "Data: %s (kept on exit)\n\n", d.dir)
	}
	t := newTable(w)
	fmt.Fprintln(t, "  ID\tGRPC\tRAFT\tGOSSIP\tHTTP")
	for _, c := range d.cfgs {
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\n", c.ID, c.GRPCAddr, c.RaftAddr, c.GossipAddr, c.HTTPAddr)
	}
	for _, n := range d.nodes {
		fmt.Fprintf(t, "  %s\t%s\t-\t%s\t%s\n", n.ID(), n.GRPCAddr(), n.AdvertisedGossip(), n.HTTPAddr())
	}
	t.Flush()
	fmt.Fprintf(w, "\nLeader: %s\n\nTry:\n", st.LeaderID)
	flags := ""
	if ep := d.cfgs[0].GRPCAddr; ep != coordserver.DefaultConfig().GRPCAddr {
		flags = " --endpoints " + ep
	}
	examples := []string{"status", "journal append --type demo --payload hello", "journal read --from 1"}
	if len(d.nodes) > 0 {
		examples = append(examples, "nodes", "fs put README.md /demo/readme", "fs stat /demo/readme", "cache add /demo/readme --replication 2")
	}
	for _, ex := range examples {
		fmt.Fprintf(w, "  coord %s%s\n", ex, flags)
	}
	fmt.Fprintf(w, "  curl http://%s/metrics\n\nCtrl-C stops the cluster.\n", d.cfgs[0].HTTPAddr)
}

func newDevCmd(e env) *cobra.Command {
	var (
		opts      devOptions
		logLevel  string
		logJSON   bool
		gcPercent int
		parallel  bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of coordinators and storage nodes in this process",
		Long: `Run a local cluster (3 coordinators and 3 storage nodes by default) in
this process on 127.0.0.1, for a first look and for demos. The first member
listens on the default ports (raft 7000, gRPC 7100, gossip 7200, http 7300) so
every client command works without flags; the others take the next free
ports. Storage nodes take gRPC 7400, http 7500, gossip 7600 and up, register
with the coordinators and heartbeat; a node shut down for a restart (coord
nodes shutdown NODE --restart) is started again at once, so you can watch
its writers wait and resume. Ctrl-C stops them all.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if opts.Members < 1 || opts.Members > 5 {
				return usageErrorf("--members %d: want 1..5", opts.Members)
			}
			if opts.Nodes < 0 || opts.Nodes > 8 {
				return usageErrorf("--nodes %d: want 0..8", opts.Nodes)
			}
			if err := setGCPercent(gcPercent); err != nil {
				return err
			}
			logger, err := logging.New(e.stderr, logLevel, logJSON)
			if err != nil {
				return usageErrorf("--log-level: %w", err)
			}
			opts.Logger = logger
			opts.SerialLeaderWrite = !parallel
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			d, err := startDev(opts)
			if err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() {
				done <- d.run(ctx, func(id string, err error) {
					fmt.Fprintf(e.stderr, "coord dev: %s stopped: %v\n", id, err)
				})
			}()
			wctx, cancel := context.WithTimeout(ctx, devReadyTimeout)
			st, waitErr := d.waitReady(wctx)
			cancel()
			if waitErr == nil {
				d.printBanner(cmd.OutOrStdout(), st)
				<-ctx.Done()
				fmt.Fprintln(e.stderr, "coord dev: stopping")
			} else {
				stop()
			}
			runErr := <-done
			if err := d.cleanup(); err != nil {
				fmt.Fprintf(e.stderr, "coord dev: removing %s: %v\n", d.dir, err)
			}
			if waitErr != nil && !errors.Is(waitErr, context.Canceled) {
				return fmt.Errorf("cluster not ready within %s: %w", devReadyTimeout, waitErr)
			}
			return runErr
		}),
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Members, "members", 3, "number of coordinators, 1..5")
	fs.StringVar(&opts.DataDir, "data-dir", "", "parent data directory, one subdirectory per member (default: a new temporary directory)")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the temporary data directory on exit (a --data-dir is always kept)")
	fs.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	fs.BoolVar(&logJSON, "log-json", false, "log JSON lines instead of text")
	fs.BoolVar(&opts.EnablePprof, "enable-pprof", false, "serve Go profiling at /debug/pprof/ on each member's HTTP address")
	fs.IntVar(&gcPercent, "gc-percent", defaultGCPercent, "garbage-collection target of the whole process, as GOGC (see coord serve --help); GOGC in the environment wins")
	fs.IntVar(&opts.Nodes, "nodes", 3, "number of storage nodes joined to the coordinators, 0..8")
	fs.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", 0, "storage node heartbeat period (default: the node default, 3s)")
	fs.DurationVar(&opts.LeaseSoftLimit, "lease-soft-limit", 0, "lease soft limit (default 60s); a few seconds lets you watch a lease recovery")
	fs.DurationVar(&opts.LeaseHardLimit, "lease-hard-limit", 0, "lease hard limit (default 1200s)")
	fs.StringVar(&opts.LogStore, "raft-log-store", "auto", "coordinators' Raft log store: wal, boltdb, or auto (the one a --data-dir holds, wal in a new one)")
	fs.DurationVar(&opts.JournalLinger, "journal-linger", coordserver.DefaultConfig().Journal.Linger, "how long the coordinators' next journal entry waits for the clients of the one that just committed (see coord serve --help)")
	fs.DurationVar(&opts.SessionIdleTimeout, "session-idle-timeout", coordserver.DefaultConfig().Journal.SessionIdleTimeout, "forget a client session unused for this long (see coord serve --help)")
	fs.Uint64Var(&opts.JournalMaxRetainedBytes, "journal-max-retained-bytes", coordserver.DefaultConfig().Journal.MaxRetainedBytes, "the coordinators' retention quota: past it new appends are refused until trim catches up (0: none; see coord serve --help)")
	fs.BoolVar(&opts.WALPrefill, "raft-wal-prefill", true, "write the coordinators' raft-wal segments full of zeros ahead of use (see coord serve --help)")
	fs.BoolVar(&parallel, "raft-parallel-leader-write", true, "the coordinators' leader writes new log entries while it replicates them (see coord serve --help)")
	fs.DurationVar(&opts.DeadNodeInterval, "dead-node-interval", 0, "a storage node silent this long is dead and its blocks are re-replicated (default 10m; below 30s the stale interval becomes a third of it)")
	return cmd
}
