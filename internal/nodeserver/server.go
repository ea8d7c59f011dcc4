package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/httpserve"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"github.com/logbookhq/logbook/membership"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// Dataset is what the node needs of its replica store: *replica.Dataset.
type Dataset interface {
	replica.Store
	VolumeInfo() []replica.VolumeInfo
	Stats() replica.Stats
	// The replica cache (HDFS FsDatasetCache), driven by the
	// coordinator's cache and uncache commands.
	Cache(ctx context.Context, bpid string, id uint64) error
	Uncache(bpid string, id uint64) error
	CacheReport(bpid string) ([]uint64, error)
	// WriteRestartMarker keeps an RBW replica RBW across a quick restart
	// (ShutdownForRestart).
	WriteRestartMarker(bpid string, id uint64, expiry time.Time) error
}

var _ Dataset = (*replica.Dataset)(nil)

// nodeIDFile sits at the root of every volume and names the node that owns
// it; a volume of another node is refused.
const nodeIDFile = "node-id"

// Server is one running storage node.
type Server struct {
	cfg Config
	log *slog.Logger

	store   Dataset
	grpcSrv *grpc.Server
	grpcLn  net.Listener
	http    *httpserve.Server
	health  *health.Server
	metrics *metrics
	peers   *peerConns
	link    *coordLink // nil without coordinator endpoints
	// gossip: the coordinators' gossip, joined after the first
	// registration (gossip.go); nil without Config.Join.
	gossipMu sync.Mutex
	gossip   *membership.Memberlist
	// keyring is the gossip keyring (nil: gossip in clear), opened by New
	// and kept across gossip restarts; GossipKeyring changes it.
	keyring *membership.Keyring

	// blockKeys are the coordinators' block keys as the link last heard
	// them (blocktokens.go); nil until then.
	blockKeys atomic.Pointer[blockKeySet]

	restart   *restartState // shutdown for restart (restart.go)
	closing   atomic.Bool
	fatalCh   chan error
	wg        sync.WaitGroup // listeners' goroutines
	streams   sync.WaitGroup // goroutines of write streams and transfers
	closeOnce sync.Once
	closeErr  error
}

// New opens the volumes, loads the dataset, adds the configured block pool
// and starts gRPC and http. Call Run (or Close) afterwards.
func New(cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nodeserver: config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node-id", cfg.ID)
	s := &Server{cfg: cfg, log: log, fatalCh: make(chan error, 2), restart: newRestartState()}
	defer func() {
		if err != nil {
			s.shutdown(false)
		}
	}()
	if err := s.claimVolumes(); err != nil {
		return nil, err
	}
	if src := cfg.Security.TLS; src != nil {
		log.Info("TLS on every connection", "identity", src.Identity().String(), "certificate-not-after", src.NotAfter())
	} else {
		log.Info("TLS is off: every port speaks plaintext and trusts whoever connects (docs/security.md)")
	}
	if len(cfg.Join) > 0 {
		if s.keyring, err = gossipkeys.Open(cfg.Security.GossipKeyringFile, cfg.Security.GossipKey, log); err != nil {
			return nil, fmt.Errorf("nodeserver: gossip: %w", err)
		}
	}
	s.metrics = newMetrics(s)
	ds, err := replica.Open(context.Background(), cfg.replicaConfig(log, s.reportBadBlock))
	if err != nil {
		return nil, fmt.Errorf("nodeserver: open dataset: %w", err)
	}
	s.store = ds
	if err := ds.AddBlockPool(context.Background(), cfg.BlockPool); err != nil {
		return nil, fmt.Errorf("nodeserver: add block pool %s: %w", cfg.BlockPool, err)
	}
	s.peers = newPeerConns(tlsgrpc.DialCreds(cfg.Security.TLS, pki.RoleNode))
	if err := s.startGRPC(); err != nil {
		return nil, err
	}
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	if len(cfg.CoordEndpoints) > 0 {
		if s.link, err = newCoordLink(s); err != nil {
			return nil, err
		}
		s.link.start()
	}
	log.Info("storage node started", "grpc-addr", s.AdvertisedGRPC(), "http-addr", advertised(s.HTTPAddr(), cfg.AdvertiseHTTP),
		"gossip-addr", advertised(cfg.GossipAddr, cfg.AdvertiseGossip), "volumes", len(cfg.volumes()), "pools", ds.BlockPools())
	return s, nil
}

// ID is the node id.
func (s *Server) ID() string { return s.cfg.ID }

// Config is the configuration the server was started with (a restart
// with the same Config reopens the same volumes on the same addresses).
func (s *Server) Config() Config { return s.cfg }

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// HTTPAddr is the bound http address.
func (s *Server) HTTPAddr() string { return s.http.Addr() }

// AdvertisedGRPC is the address other nodes and clients dial.
func (s *Server) AdvertisedGRPC() string { return advertised(s.GRPCAddr(), s.cfg.AdvertiseGRPC) }

// AdvertisedGossip is the gossip address this node will publish.
func (s *Server) AdvertisedGossip() string {
	return advertised(s.cfg.GossipAddr, s.cfg.AdvertiseGossip)
}

// Store exposes the dataset to tests and tools in this module.
func (s *Server) Store() Dataset { return s.store }

// Run blocks until ctx ends, a listener fails or a ShutdownNode call has
// stopped the node, then closes the server.
func (s *Server) Run(ctx context.Context) error {
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-s.fatalCh:
	case <-s.restart.requested:
	}
	if err := s.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// Close stops the node: in-flight calls get a few seconds, then every
// stream is cut; the dataset is closed cleanly (writers stopped, replicas
// left as they are on disk).
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(true) })
	return s.closeErr
}

func (s *Server) fatal(err error) {
	select {
	case s.fatalCh <- err:
	default:
	}
}

// shutdown releases everything that was started, in reverse order. A
// graceful shutdown lets in-flight calls finish for a moment first.
func (s *Server) shutdown(graceful bool) error {
	s.closing.Store(true)
	if s.link != nil {
		// Stops heartbeats and waits for the link's recoveries and transfers.
		s.link.stop()
	}
	s.stopGossip(graceful)
	if s.health != nil {
		s.health.Shutdown()
	}
	if s.grpcSrv != nil {
		if graceful {
			stopped := make(chan struct{})
			go func() { s.grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(3 * time.Second):
				s.grpcSrv.Stop()
			}
		} else {
			s.grpcSrv.Stop()
		}
	}
	if s.http != nil {
		s.http.Close()
	}
	if s.peers != nil {
		s.peers.close()
	}
	s.wg.Wait()
	var err error
	if s.store != nil {
		// Stops writers, so stream goroutines still writing return.
		err = s.store.Close()
	}
	s.streams.Wait()
	return err
}

// claimVolumes creates every volume directory and checks or writes its
// node-id file (fsynced before the dataset opens).
func (s *Server) claimVolumes() error {
	for _, v := range s.cfg.volumes() {
		if err := os.MkdirAll(v.Path, 0o750); err != nil {
			return fmt.Errorf("nodeserver: volume %s: %w", v.Path, err)
		}
		p := filepath.Join(v.Path, nodeIDFile)
		b, err := os.ReadFile(p)
		switch {
		case err == nil:
			if got := strings.TrimSpace(string(b)); got != s.cfg.ID {
				return fmt.Errorf("%w: %s holds %q, this node is %q", ErrForeignData, p, got, s.cfg.ID)
			}
		case errors.Is(err, os.ErrNotExist):
			if err := durable.WriteFile(p, []byte(s.cfg.ID+"\n")); err != nil {
				return fmt.Errorf("nodeserver: volume %s: %w", v.Path, err)
			}
			if err := durable.SyncDir(v.Path); err != nil {
				return fmt.Errorf("nodeserver: volume %s: %w", v.Path, err)
			}
		default:
			return fmt.Errorf("nodeserver: volume %s: %w", v.Path, err)
		}
	}
	return nil
}

// ServiceName is the gRPC health service name of the data service.
const ServiceName = "logbook.v1.DataNode"

func (s *Server) startGRPC() error {
	ln, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("nodeserver: grpc listener: %w", err)
	}
	s.grpcLn = ln
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecvMsgBytes),
		experimental.BufferPool(bufferPool),
		grpc.MaxConcurrentStreams(4096),
		// Stop returns only once every handler has: their stream goroutines
		// are then all accounted for.
		grpc.WaitForHandlers(true),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.metrics.rpc.UnaryInterceptor, s.authorizeUnary),
		grpc.ChainStreamInterceptor(s.metrics.rpc.StreamInterceptor, s.authorizeStream),
	}
	opts = append(opts, grpc.Creds(tlsgrpc.ServerCreds(s.cfg.Security.TLS)))
	s.grpcSrv = grpc.NewServer(opts...)
	pb.RegisterDataNodeServer(s.grpcSrv, &dataService{s: s})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	reflection.Register(s.grpcSrv)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpcSrv.Serve(ln); err != nil && !s.closing.Load() {
			s.fatal(fmt.Errorf("nodeserver: grpc serve: %w", err))
		}
	}()
	return nil
}

func (s *Server) startHTTP() error {
	hc := httpserve.Config{
		Addr:         s.cfg.HTTPAddr,
		Logger:       s.log,
		Metrics:      s.metrics.handler(),
		Healthy:      s.healthy,
		Pprof:        s.cfg.EnablePprof,
		OnServeError: s.fatal,
	}
	hc.Secure(s.cfg.Security.TLS)
	h, err := httpserve.Start(hc)
	if err != nil {
		return fmt.Errorf("nodeserver: http: %w", err)
	}
	s.http = h
	return nil
}

// healthy: the node serves while it is open and no more volumes failed
// than tolerated.
func (s *Server) healthy() error {
	if s.closing.Load() {
		return errors.New("shutting down")
	}
	failed := 0
	for _, v := range s.store.VolumeInfo() {
		if v.Failed {
			failed++
		}
	}
	if failed > s.cfg.VolumeFailuresTolerated {
		return fmt.Errorf("%d volumes failed, %d tolerated", failed, s.cfg.VolumeFailuresTolerated)
	}
	return nil
}

// reportBadBlock receives corrupt replicas from the scanners and reads.
func (s *Server) reportBadBlock(b replica.BadBlock) {
	s.metrics.badBlocks.Inc()
	s.log.Warn("bad block", "pool", b.Pool, "block-id", b.Block.ID, "gs", b.Block.GS, "storage-id", b.StorageID, "reason", b.Reason)
	if s.link != nil && b.Pool == s.link.pool {
		s.link.badBlock(b)
	}
	if s.cfg.OnBadBlock != nil {
		s.cfg.OnBadBlock(b)
	}
}

// goStream runs fn as a goroutine that Close waits for.
func (s *Server) goStream(fn func()) {
	s.streams.Add(1)
	go func() {
		defer s.streams.Done()
		fn()
	}()
}
