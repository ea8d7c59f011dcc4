package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/logbookhq/logbook/internal/logging"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/spf13/cobra"
)

// devReadyTimeout bounds how long coord dev waits for a leader.
const devReadyTimeout = 30 * time.Second

// devOptions configure a dev cluster.
type devOptions struct {
	Members int
	// DataDir holds one directory per member; empty: a new temporary
	// directory, removed by cleanup unless Keep.
	DataDir string
	Keep    bool
	// Ports gives the members their addresses (zero: coordserver.DevPorts).
	Ports  coordserver.Ports
	Logger *slog.Logger
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
	// Secure runs every member with TLS from a throwaway CA in the data
	// directory (coordserver.ClusterOptions.Secure).
	Secure bool
}

// devCluster is a running in-process cluster (coordserver.Cluster) and
// its data directory.
type devCluster struct {
	c    *coordserver.Cluster
	dir  string
	temp bool
	keep bool
	// tokenFile holds the admin token of a secure cluster (tls/admin.token).
	tokenFile string
}

// devLockedMemory is each dev node's cache budget (node serve
// --max-locked-memory); above RLIMIT_MEMLOCK (ulimit -l) a non-root user's
// caching fails with mlock-refused, which the node logs.
const devLockedMemory = 64 << 20

// startDev starts opts.Members coordinators and opts.Nodes storage nodes
// with the same wiring as coord serve and node serve. They form a cluster
// on their own; call run to keep them running and waitReady to wait for a
// leader.
func startDev(opts devOptions) (_ *devCluster, err error) {
	if opts.Members < 1 || opts.Members > 5 {
		return nil, fmt.Errorf("members %d: want 1..5", opts.Members)
	}
	if opts.Ports.Coordinator == nil {
		opts.Ports = coordserver.DevPorts()
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
	d.c, err = coordserver.StartCluster(coordserver.ClusterOptions{
		Coordinators: opts.Members,
		Nodes:        opts.Nodes,
		NodesGossip:  true,
		Dir:          d.dir,
		Ports:        opts.Ports,
		Logger:       opts.Logger,
		Secure:       opts.Secure,
		ACL:          opts.Secure,
		Coordinator:  func(_ int, cfg *coordserver.Config) { devCoordinator(opts, cfg) },
		Node: func(_ int, cfg *nodeserver.Config) {
			if opts.HeartbeatInterval > 0 {
				cfg.HeartbeatInterval = opts.HeartbeatInterval
			}
			cfg.MaxLockedMemory = devLockedMemory // so coord cache has somewhere to cache
		},
	})
	if err != nil {
		d.cleanup()
		if strings.Contains(err.Error(), "address already in use") {
			err = fmt.Errorf("%w (is another coord dev or coord serve running?)", err)
		}
		return nil, err
	}
	return d, nil
}

// devCoordinator applies the dev options to one coordinator's config.
func devCoordinator(opts devOptions, cfg *coordserver.Config) {
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
}

// run keeps every member running until ctx ends, then stops them all
// (coordserver.Cluster.Run).
func (d *devCluster) run(ctx context.Context, onExit func(id string, err error)) error {
	return d.c.Run(ctx, onExit)
}

// cleanup removes a temporary data dir unless it is to be kept.
func (d *devCluster) cleanup() error {
	if d.temp && !d.keep {
		return os.RemoveAll(d.dir)
	}
	return nil
}

// endpoints are the coordinators' gRPC addresses, the first one first.
func (d *devCluster) endpoints() []string { return d.c.Endpoints() }

// waitReady polls the cluster status until there is a leader and every
// member is registered and healthy, or ctx ends.
func (d *devCluster) waitReady(ctx context.Context) (client.ClusterStatus, error) {
	cfg := client.Config{Endpoints: d.endpoints(), AttemptTimeout: time.Second}
	if t := d.c.TLS(); t != nil {
		var err error
		if cfg.TLS, err = t.ClientTLS(); err != nil {
			return client.ClusterStatus{}, err
		}
	}
	c, err := client.New(ctx, cfg)
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
		case devReady(st, d.c.Coordinators()):
			if d.c.TLS() == nil {
				return st, nil
			}
			if err = d.bootstrapACL(ctx, c); err == nil {
				return st, nil
			}
			last = err
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

// bootstrapACL makes the secure cluster's first admin token, once, and
// keeps it in tls/admin.token; a cluster started again on its data is
// bootstrapped already and keeps the file.
func (d *devCluster) bootstrapACL(ctx context.Context, c *client.Client) error {
	d.tokenFile = filepath.Join(d.c.TLS().Dir, "admin.token")
	if _, err := os.Stat(d.tokenFile); err == nil {
		return nil
	}
	t, err := c.Acl().Bootstrap(ctx, "", "coord dev --secure")
	var e *client.Error
	if errors.As(err, &e) && e.Reason == pb.ReasonAclBootstrapped {
		d.tokenFile = "" // bootstrapped by someone else: the certificate still is admin
		return nil
	}
	if err != nil {
		return err
	}
	return durable.WriteFileMode(d.tokenFile, []byte(t.Secret+"\n"), 0o600)
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
	if d.c.Coordinators() == 1 {
		noun = "coordinator"
	}
	first := d.c.Config(0)
	fmt.Fprintf(w, "Logbook dev cluster is up: %d %s and %d storage nodes, cluster id %q.\n", d.c.Coordinators(), noun, d.c.Nodes(), first.ClusterID)
	switch {
	case d.temp && !d.keep:
		fmt.Fprintf(w, "Data: %s (removed on exit)\n\n", d.dir)
	default:
		fmt.Fprintf(w, "Data: %s (kept on exit)\n\n", d.dir)
	}
	t := newTable(w)
	fmt.Fprintln(t, "  ID\tGRPC\tRAFT\tGOSSIP\tHTTP")
	for i := range d.c.Coordinators() {
		c := d.c.Config(i)
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\n", c.ID, c.GRPCAddr, c.RaftAddr, c.GossipAddr, c.HTTPAddr)
	}
	for i := range d.c.Nodes() {
		if n := d.c.Node(i); n != nil {
			fmt.Fprintf(t, "  %s\t%s\t-\t%s\t%s\n", n.ID(), n.GRPCAddr(), n.AdvertisedGossip(), n.HTTPAddr())
		}
	}
	t.Flush()
	fmt.Fprintf(w, "\nLeader: %s\n\n", st.LeaderID)
	flags := ""
	if ep := first.GRPCAddr; ep != coordserver.DefaultConfig().GRPCAddr {
		flags = " --endpoints " + ep
	}
	scheme := "http"
	if t := d.c.TLS(); t != nil {
		scheme = "https"
		f, _ := t.Files(coordserver.ClusterUser, pki.RoleClient)
		fmt.Fprintf(w, "Every connection is TLS; the CA and certificates are in %s. As user %q:\n", t.Dir, coordserver.ClusterUser)
		fmt.Fprintf(w, "  export %s=%s %s=%s %s=%s\n\n", envflag.Name("tls-cert"), f.Cert, envflag.Name("tls-key"), f.Key, envflag.Name("tls-ca"), f.CA)
		fmt.Fprintf(w, "ACLs are enforced; %q is bound to the admin role (coord acl whoami).\n", coordserver.ClusterUser)
		if d.tokenFile != "" {
			fmt.Fprintf(w, "Its token, for clients without a certificate: %s=%s (with %s)\n\n", envflag.Name("token-file"), d.tokenFile, envflag.Name("tls-ca"))
		}
	}
	fmt.Fprintln(w, "Try:")
	examples := []string{"status", "journal append --type demo --payload hello", "journal read --from 1"}
	if d.c.Nodes() > 0 {
		examples = append(examples, "nodes", "fs put README.md /demo/readme", "fs stat /demo/readme", "cache add /demo/readme --replication 2")
	}
	for _, ex := range examples {
		fmt.Fprintf(w, "  coord %s%s\n", ex, flags)
	}
	if scheme == "https" {
		fmt.Fprintf(w, "  curl --cacert $%s --cert $%s --key $%s https://%s/metrics\n", envflag.Name("tls-ca"), envflag.Name("tls-cert"), envflag.Name("tls-key"), first.HTTPAddr)
	} else {
		fmt.Fprintf(w, "  curl http://%s/metrics\n", first.HTTPAddr)
	}
	fmt.Fprintf(w, "\nWeb console (any member): %s://%s/ (docs/console.md)\n", scheme, first.HTTPAddr)
	fmt.Fprintln(w, "\nEvery member runs in this process. To watch one fail (kill -9, kill -STOP), run")
	fmt.Fprintln(w, "each in its own instead: bash deploy/local/cluster.sh (docs/operations.md).")
	fmt.Fprintln(w, "\nCtrl-C stops the cluster.")
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
its writers wait and resume. Ctrl-C stops them all.

With --secure every connection is mutual TLS, gossip is encrypted and ACLs
are enforced: a throwaway CA, a certificate per member, one for the user
"admin" and a gossip key are made in the data directory (tls/), the ACLs
are bootstrapped with an admin token kept in tls/admin.token, and the
banner prints the variables that point the CLI at them.`,
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
			// On Ctrl-C the members stop together and Raft reports every
			// connection closed under it: not worth a warning then.
			quieting := logging.NewQuieting(logger, "raft", "raft-net", "gossip")
			opts.Logger = quieting.Logger
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
				quieting.Quiet()
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
	fs.BoolVar(&opts.Secure, "secure", false, "run every connection with mutual TLS from a throwaway CA, and gossip encrypted, from files made in the data directory")
	fs.DurationVar(&opts.DeadNodeInterval, "dead-node-interval", 0, "a storage node silent this long is dead and its blocks are re-replicated (default 10m; below 30s the stale interval becomes a third of it)")
	return cmd
}
