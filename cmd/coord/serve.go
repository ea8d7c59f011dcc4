package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/logging"
	"github.com/logbookhq/logbook/internal/tlsflag"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveFlags holds the values of coord serve's flags. Fields of the config
// that flags set directly are bound in place; the rest are converted by
// config.
type serveFlags struct {
	fs        *pflag.FlagSet
	cfg       coordserver.Config
	join      []string
	peers     string
	logLevel  string
	logJSON   bool
	gcPercent int
	tls       *tlsflag.Flags
	gossip    *gossipkeys.Flags
	aclToken  string
}

// addServeFlags registers coord serve's flags on fs, with the defaults of
// coordserver.DefaultConfig, and binds each to its LOGBOOK_* variable.
func addServeFlags(fs *pflag.FlagSet) *serveFlags {
	d := coordserver.DefaultConfig()
	f := &serveFlags{fs: fs, cfg: d}
	c := &f.cfg
	fs.StringVar(&c.ID, "id", "", "member id, unique in the cluster (required)")
	fs.StringVar(&c.ClusterID, "cluster-id", d.ClusterID, "cluster id; members and clients of another cluster are refused")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for the Raft log, snapshots and identity files (required)")
	fs.StringVar(&c.RaftAddr, "raft-addr", d.RaftAddr, "Raft listen address")
	fs.StringVar(&c.LogStore, "raft-log-store", d.LogStore, "Raft log and stable store: wal (hashicorp/raft-wal, one fsync per batch), boltdb (raft-boltdb/v2, two), or auto: the one the data dir holds, wal in a new one")
	fs.BoolVar(&c.WALPrefill, "raft-wal-prefill", d.WALPrefill, "write each raft-wal segment full of zeros ahead of use instead of fallocating it: each append's fsync is then a data flush without a file-system journal commit (one spare 64 MiB segment on disk)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", d.GRPCAddr, "gRPC API listen address")
	fs.StringVar(&c.GossipAddr, "gossip-addr", d.GossipAddr, "gossip listen address (TCP and UDP)")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address (web console at /, /metrics, /healthz, /readyz)")
	fs.BoolVar(&c.EnablePprof, "enable-pprof", false, "serve Go profiling at /debug/pprof/ on --http-addr")
	fs.StringVar(&c.AdvertiseRaft, "advertise-raft", "", "Raft address other members dial (default: --raft-addr)")
	fs.StringVar(&c.AdvertiseGRPC, "advertise-grpc", "", "gRPC address members and clients dial (default: --grpc-addr)")
	fs.StringVar(&c.AdvertiseGossip, "advertise-gossip", "", "gossip address other members dial (default: --gossip-addr)")
	fs.StringVar(&c.AdvertiseHTTP, "advertise-http", "", "HTTP address published to members (default: --http-addr)")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", d.BootstrapExpect, "form a new cluster once this many coordinators see each other over gossip; 0 joins an existing cluster")
	fs.StringSliceVar(&f.join, "join", nil, "gossip seeds, host:port,...")
	fs.StringVar(&f.peers, "peers", "", "static initial voters id=host:port,... (raft addresses; alternative to --bootstrap-expect)")
	fs.DurationVar(&c.Raft.HeartbeatTimeout, "raft-heartbeat-timeout", d.Raft.HeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&c.Raft.ElectionTimeout, "raft-election-timeout", d.Raft.ElectionTimeout, "Raft election timeout")
	fs.DurationVar(&c.FS.LeaseSoftLimit, "lease-soft-limit", d.FS.LeaseSoftLimit, "a file's lease may be taken over by another writer after this long without renewal")
	fs.DurationVar(&c.FS.LeaseHardLimit, "lease-hard-limit", d.FS.LeaseHardLimit, "the leader releases or recovers a lease after this long without renewal")
	fs.DurationVar(&c.FS.RecoveryTimeout, "recovery-timeout", d.FS.RecoveryTimeout, "a block recovery attempt's deadline; then it is re-driven with the next primary")
	fs.DurationVar(&c.FS.NodeStaleInterval, "stale-node-interval", d.FS.NodeStaleInterval, "a storage node without a heartbeat for this long is not live")
	fs.DurationVar(&c.FS.NodeDeadInterval, "dead-node-interval", d.FS.NodeDeadInterval, "a storage node without a heartbeat for this long is dead: its blocks are re-replicated")
	fs.DurationVar(&c.FS.ReplicationTimeout, "replication-timeout", d.FS.ReplicationTimeout, "a re-replication transfer not reported by its targets within this long is scheduled again")
	fs.IntVar(&c.FS.ReplicationStreams, "replication-streams", d.FS.ReplicationStreams, "re-replication transfers in flight per source node")
	fs.DurationVar(&c.FS.CacheTimeout, "cache-timeout", d.FS.CacheTimeout, "a cache or uncache command a node's cache report does not show within this long is judged again")
	fs.DurationVar(&c.Raft.LeaderLeaseTimeout, "raft-leader-lease-timeout", d.Raft.LeaderLeaseTimeout, "Raft leader lease timeout (at most the heartbeat timeout)")
	fs.DurationVar(&c.Raft.CommitTimeout, "raft-commit-timeout", d.Raft.CommitTimeout, "Raft commit timeout")
	fs.Uint64Var(&c.Raft.SnapshotThreshold, "raft-snapshot-threshold", d.Raft.SnapshotThreshold, "snapshot after this many new log entries")
	fs.DurationVar(&c.Raft.SnapshotInterval, "raft-snapshot-interval", d.Raft.SnapshotInterval, "how often to check whether to snapshot")
	fs.Uint64Var(&c.Raft.TrailingLogs, "raft-trailing-logs", d.Raft.TrailingLogs, "log entries kept after a snapshot, for slow followers")
	fs.BoolVar(&c.Raft.ParallelLeaderWrite, "raft-parallel-leader-write", d.Raft.ParallelLeaderWrite, "the leader writes new log entries to its disk while it replicates them, not before (the Raft dissertation, 10.2.1); it still commits only what it has written itself")
	fs.DurationVar(&c.NoLeaderHold, "no-leader-hold", d.NoLeaderHold, "how long a request waits for a leader before failing with Unavailable")
	fs.DurationVar(&c.Journal.Linger, "journal-linger", d.Journal.Linger, "after an entry commits, wait up to this long for its clients' next appends before proposing the next entry (never for an entry of one append; 0: never wait)")
	fs.Uint64Var(&c.Journal.EventsPerSegment, "journal-events-per-segment", d.Journal.EventsPerSegment, "roll a journal segment after this many events (a setting of the whole cluster: from log format 11 the first leader's value seeds it and coord journal config set changes it; a coordinator given another value warns in coord status)")
	fs.DurationVar(&c.Journal.SessionIdleTimeout, "session-idle-timeout", d.Journal.SessionIdleTimeout, "forget a client session unused for this long, by the sessions' clock (from log format 10 the time the leaders measured, before it their proposal times), with the request results it keeps for retries (whole seconds, at most 720h; 0: only the least recently used beyond 65,536 sessions; log format 9; a setting of the whole cluster, like --journal-events-per-segment)")
	fs.Uint64Var(&c.Journal.SegmentBytes, "journal-segment-bytes", d.Journal.SegmentBytes, "roll a journal segment after this many event bytes (type + payload; a setting of the whole cluster, like --journal-events-per-segment)")
	fs.IntVar(&c.Journal.MaxSegments, "journal-max-segments", d.Journal.MaxSegments, "keep at most this many segments: the oldest expired ones beyond it are trimmed automatically (0: no bound; before log format 11 the leader's own, from 11 a setting of the whole cluster, like --journal-events-per-segment)")
	fs.IntVar(&c.Journal.MaxEvents, "journal-max-events", d.Journal.MaxEvents, "keep at most this many retained events: the oldest expired segments beyond it are trimmed automatically (0: no bound; like --journal-max-segments)")
	fs.Uint64Var(&c.Journal.MaxRetainedBytes, "journal-max-retained-bytes", d.Journal.MaxRetainedBytes, "retention quota: while the sealed journal segments take at least this much (type and payload bytes plus 32 per event, about their memory on every member; the open segment comes on top), this coordinator as leader refuses new appends with ResourceExhausted JOURNAL_FULL, and its automatic trim drops expired segments until they take less; bounds what a lagging consumer can hold (0: no quota; this member's own, like etcd's --quota-backend-bytes: give every member the same)")
	fs.IntVar(&c.MaxEventBytes, "max-event-bytes", d.MaxEventBytes, "largest accepted journal event, in bytes (raises the request size limit if needed)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&f.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "garbage-collection target, as GOGC: the heap may grow to 1+N/100 times the live heap before a collection; a higher value trades memory for fewer collections; GOGC in the environment wins")
	f.tls = tlsflag.Add(fs, true)
	fs.BoolVar(&c.Security.ACL, "acl-enabled", false, "enforce the access control the cluster holds (coord acl): user calls need a token or client certificate whose user a bound role allows; needs --tls-cert; give it to every coordinator (docs/security.md)")
	fs.StringVar(&f.aclToken, "acl-bootstrap-token-file", "", "bootstrap the ACLs with the token in this file (coord acl token gen) if nobody has: user admin, bound to the admin role, as coord acl bootstrap would; give every coordinator the same file")
	fs.DurationVar(&c.Security.BlockTokenLifetime, "block-token-lifetime", d.Security.BlockTokenLifetime, "with --acl-enabled, how long a block access token the leader hands out with a block's locations lasts (storage nodes serve a client a block only with one)")
	fs.DurationVar(&c.Security.BlockKeyRoll, "block-key-roll", d.Security.BlockKeyRoll, "with --acl-enabled, how often the leader rolls the key that signs block access tokens (the keys live in the replicated state and reach the nodes with their heartbeats)")
	f.gossip = gossipkeys.Add(fs)
	envflag.Bind(fs)
	return f
}

// config turns the parsed flags into a validated coordinator config whose
// logger writes to logOut. Every error is a configuration error.
func (f *serveFlags) config(logOut io.Writer) (coordserver.Config, error) {
	cfg := f.cfg
	var errs []error
	if cfg.ID == "" {
		errs = append(errs, fmt.Errorf("--id is required (or $%s)", envflag.Name("id")))
	}
	if cfg.DataDir == "" {
		errs = append(errs, fmt.Errorf("--data-dir is required (or $%s)", envflag.Name("data-dir")))
	}
	cfg.Join = cleanList(f.join)
	given := f.fs.Changed
	cfg.Journal.Given = coordserver.JournalGiven{
		EventsPerSegment: given("journal-events-per-segment"), SegmentBytes: given("journal-segment-bytes"),
		MaxSegments: given("journal-max-segments"), MaxEvents: given("journal-max-events"), SessionIdleTimeout: given("session-idle-timeout"),
	}
	// A request must be able to carry at least one event of the largest size.
	cfg.MaxRequestBytes = max(cfg.MaxRequestBytes, cfg.MaxEventBytes)
	if f.peers != "" {
		peers, err := coordserver.ParsePeers(f.peers)
		if err != nil {
			errs = append(errs, fmt.Errorf("--peers: %w", err))
		}
		cfg.Peers = peers
	}
	logger, err := logging.New(logOut, f.logLevel, f.logJSON)
	if err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	cfg.Logger = logger
	if err == nil {
		src, err := f.tls.Source(logger.With("component", "tls"))
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Security.TLS = src
	}
	if f.aclToken != "" {
		tok, err := client.LoadToken(f.aclToken)
		if err != nil {
			errs = append(errs, fmt.Errorf("--acl-bootstrap-token-file: %w", err))
		}
		cfg.Security.ACLBootstrapToken = tok
	}
	if key, err := f.gossip.Seed(); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Security.GossipKey = key
		cfg.Security.GossipKeyringFile = f.gossip.KeyringFile
	}
	if len(errs) > 0 {
		return coordserver.Config{}, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return coordserver.Config{}, err
	}
	return cfg, nil
}

func newServeCmd(e env) *cobra.Command {
	var f *serveFlags
	cmd := &cobra.Command{
		Use:   "serve --id ID --data-dir DIR [flags]",
		Short: "Run one coordinator",
		Long: `Run one coordinator until SIGINT or SIGTERM; a leader hands leadership to
another voter before it stops.

Form a new cluster with --bootstrap-expect N and --join (gossip seeds), or
with a static --peers list. A member whose data dir already holds Raft state
rejoins its cluster with whatever it had.`,
		Example: `  coord serve --id coord1 --data-dir /var/lib/logbook --bootstrap-expect 3 \
    --join 10.0.0.1:7200,10.0.0.2:7200,10.0.0.3:7200`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(e.stderr)
			if err != nil {
				return usageErrorf("invalid configuration: %w", err)
			}
			if err := setGCPercent(f.gcPercent); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			go tlsflag.Watch(ctx, cfg.Security.TLS, f.tls.ReloadInterval)
			srv, err := coordserver.New(cfg)
			if err != nil {
				return err
			}
			if err := srv.Run(ctx); err != nil {
				return fmt.Errorf("coordinator %s stopped: %w", cfg.ID, err)
			}
			return nil
		}),
	}
	f = addServeFlags(cmd.Flags())
	cmd.Flags().SortFlags = false
	return cmd
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// gets the default behaviour (the process dies at once).
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
