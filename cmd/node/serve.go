package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/logging"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/tlsflag"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveFlags holds the values of node serve's flags. Config fields that
// flags set directly are bound in place; the rest are converted by config.
type serveFlags struct {
	cfg      nodeserver.Config
	volumes  []string
	logLevel string
	logJSON  bool
	tls      *tlsflag.Flags
	gossip   *gossipkeys.Flags
}

// addServeFlags registers node serve's flags on fs with the defaults of
// nodeserver.DefaultConfig and binds each to its LOGBOOK_* variable.
func addServeFlags(fs *pflag.FlagSet) *serveFlags {
	d := nodeserver.DefaultConfig()
	f := &serveFlags{cfg: d}
	c := &f.cfg
	fs.StringVar(&c.ID, "id", "", "node id, unique in the cluster (required)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory of the node's one DISK volume (or use --volume)")
	fs.StringSliceVar(&f.volumes, "volume", nil, "a volume PATH[:DISK|SSD|ARCHIVE|RAM_DISK]; repeat or comma-separate for several (alternative to --data-dir)")
	fs.Int64Var(&c.ReservedBytes, "reserved-bytes", d.ReservedBytes, "bytes kept free on every volume for other users of the file system")
	fs.IntVar(&c.VolumeFailuresTolerated, "volume-failures-tolerated", d.VolumeFailuresTolerated, "volumes that may fail before the node stops serving")
	fs.Int64Var(&c.MaxLockedMemory, "max-locked-memory", d.MaxLockedMemory, "bytes of replicas that may be cached in locked memory (0: no caching)")
	fs.StringVar(&c.BlockPool, "block-pool", d.BlockPool, "block pool added at start (pools found on disk are served too)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", d.GRPCAddr, "gRPC (DataNode service) listen address")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address (/metrics, /healthz)")
	fs.BoolVar(&c.EnablePprof, "enable-pprof", false, "serve Go profiling at /debug/pprof/ on --http-addr")
	fs.StringVar(&c.GossipAddr, "gossip-addr", d.GossipAddr, "gossip listen address (TCP and UDP), used with --join")
	fs.StringVar(&c.AdvertiseGRPC, "advertise-grpc", "", "gRPC address clients and other nodes dial (default: --grpc-addr)")
	fs.StringVar(&c.AdvertiseHTTP, "advertise-http", "", "HTTP address published to the cluster (default: --http-addr)")
	fs.StringVar(&c.AdvertiseGossip, "advertise-gossip", "", "gossip address published to the cluster (default: --gossip-addr)")
	fs.StringSliceVar(&c.CoordEndpoints, "coord-endpoints", nil, "coordinator gRPC addresses host:port, comma-separated (any member; empty: standalone, no coordinator link)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "interval of the heartbeats to the coordinator")
	fs.DurationVar(&c.RestartReplicaExpiry, "restart-replica-expiry", d.RestartReplicaExpiry, "after a shutdown for restart (ShutdownNode, coord nodes shutdown --restart), replicas being written reload RBW for their writers if the node is back within this")
	fs.StringSliceVar(&c.Join, "join", nil, "the coordinators' gossip addresses host:port, comma-separated: the node joins their gossip (faster failure detection)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&f.logJSON, "log-json", false, "log JSON lines instead of text")
	// Test-only fault injection (the e2e suite), hidden from --help.
	fs.StringVar(&c.FailpointRecoveryPause, "failpoint-recovery-pause", "", "TEST ONLY: DURATION[@PATH-PREFIX]: as recovery primary, sleep after initReplicaRecovery, before updateReplicaUnderRecovery and the commit")
	if err := fs.MarkHidden("failpoint-recovery-pause"); err != nil {
		panic(err)
	}
	f.tls = tlsflag.Add(fs, true)
	f.gossip = gossipkeys.Add(fs)
	envflag.Bind(fs)
	return f
}

// config turns the parsed flags into a validated node config whose logger
// writes to logOut. Every error is a configuration error.
func (f *serveFlags) config(logOut io.Writer) (nodeserver.Config, error) {
	cfg := f.cfg
	var errs []error
	if cfg.ID == "" {
		errs = append(errs, fmt.Errorf("--id is required (or $%s)", envflag.Name("id")))
	}
	for _, v := range f.volumes {
		if strings.TrimSpace(v) == "" {
			continue
		}
		spec, err := nodeserver.ParseVolumeSpec(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--volume %q: %w", v, err))
			continue
		}
		cfg.Volumes = append(cfg.Volumes, spec)
	}
	if cfg.DataDir == "" && len(cfg.Volumes) == 0 {
		errs = append(errs, fmt.Errorf("--data-dir or --volume is required (or $%s / $%s)", envflag.Name("data-dir"), envflag.Name("volume")))
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
	if key, err := f.gossip.Seed(); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Security.GossipKey = key
		cfg.Security.GossipKeyringFile = f.gossip.KeyringFile
	}
	cfg.CoordEndpoints = trimList(cfg.CoordEndpoints)
	cfg.Join = trimList(cfg.Join)
	if len(errs) > 0 {
		return nodeserver.Config{}, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return nodeserver.Config{}, err
	}
	return cfg, nil
}

func newServeCmd(e env) *cobra.Command {
	var f *serveFlags
	cmd := &cobra.Command{
		Use:   "serve --id ID (--data-dir DIR | --volume PATH[:TYPE]...) [flags]",
		Short: "Run one storage node",
		Long: `Run one storage node until SIGINT, SIGTERM or a ShutdownNode call
(coord nodes shutdown NODE [--restart]); it then exits 0. After a shutdown
for restart, start it again within --restart-replica-expiry so that the
replicas it was writing come back RBW and their writers resume.

The node opens its volumes (each is claimed with a node-id file; a volume of
another node is refused), loads every block pool found on them, adds
--block-pool, and serves the DataNode gRPC service on --grpc-addr and
/metrics and /healthz on --http-addr. With --coord-endpoints it registers
with the coordinators, sends its block reports and a heartbeat every
--heartbeat-interval, and runs the commands they return (invalidations,
transfers, block recoveries). With --join (the coordinators' gossip
addresses) it also joins their gossip on --gossip-addr, under the cluster id
its registration returns, so the coordinators see it fail within seconds.`,
		Example: `  node serve --id node1 --data-dir /var/lib/logbook/node1
  node serve --id node2 --volume /mnt/disk1 --volume /mnt/ssd1:SSD --reserved-bytes 10737418240
  node serve --id node3 --data-dir /data --coord-endpoints c1:7100,c2:7100,c3:7100`,
		Args: cliargs.None,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(e.stderr)
			if err != nil {
				return usageErrorf("invalid configuration: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go tlsflag.Watch(ctx, cfg.Security.TLS, f.tls.ReloadInterval)
			srv, err := nodeserver.New(cfg)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if e.started != nil {
				e.started(srv.GRPCAddr(), srv.HTTPAddr())
			}
			if err := srv.Run(ctx); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("node %s stopped: %w", cfg.ID, err)}
			}
			return nil
		},
	}
	f = addServeFlags(cmd.Flags())
	cmd.Flags().SortFlags = false
	return cmd
}

// trimList drops blank entries and surrounding spaces.
func trimList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
