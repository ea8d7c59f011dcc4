package coordserver

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

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/console"
	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"github.com/logbookhq/logbook/internal/httpserve"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/raftnode"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"github.com/logbookhq/logbook/journal"
	"github.com/logbookhq/logbook/membership"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// ErrRemoved is returned by Run when this member was removed from the
// cluster; its data directory cannot rejoin.
var ErrRemoved = errors.New("coordserver: this member was removed from the cluster configuration; wipe its data dir to add it again")

// ErrForeignData: the data dir belongs to another cluster or member.
var ErrForeignData = errors.New("coordserver: data dir belongs to another cluster or member")

// Server is one running coordinator.
type Server struct {
	cfg Config
	log *slog.Logger

	fsm *fsm.FSM
	// admission: nodes held back by encrypted gossip (node_admission.go).
	admission admissionLog
	node      *raftnode.Node // Raft, its stores and transport
	raft      *raft.Raft     // node.Raft()
	members   *membership.Memberlist
	grpcSrv   *grpc.Server
	grpcLn    net.Listener
	http      *httpserve.Server
	console   *console.Console // the web console on the HTTP port
	health    *health.Server
	// audit journals refused user calls (rate-limited) and admin
	// operations (acl_edge.go).
	audit   auditRecorder
	metrics *metrics
	peers   *peerConns
	probes  *probeMemo // members Status found unreachable
	nodeCC  *peerConns // storage nodes' DataNode service (gossip keyring)
	// keyringMu serialises the GossipKeyring calls this member answers.
	keyringMu sync.Mutex
	leaderB   *journal.Batcher // applies to the local Raft; leader only
	forwardB  *journal.Batcher // forwards to the leader in batches
	fwd       *forwarder       // the forward batcher's way to the leader

	self           fsmpb.Member
	inflightEvents atomic.Int64                     // leader: events handed to Raft, not yet applied
	configWarn     atomic.Pointer[string]           // configCheckLoop: this member's config warning, "" or nil when none
	started        time.Time                        // when New began
	replay         atomic.Pointer[pb.StartupReplay] // this member's startup replay (startup.go); nil: it started empty
	leaderIndex    atomic.Uint64                    // follower: the highest read index a leader gave it since it started (0: none yet)
	journalUpkeeps atomic.Uint64                    // journalLoop rounds that reached the trim check as a ready leader (tests wait on it)
	tailStreams    atomic.Int64                     // journal Tail streams being served (logbook_journal_tail_streams)
	readyTerm      atomic.Uint64                    // term in which this leader's first entry applied
	clock          leaderClock                      // the session clock this member stamps as leader
	closing        atomic.Bool
	fatalCh        chan error
	ctx            context.Context
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	closeOnce      sync.Once
	closeErr       error
	bootstrapd     atomic.Bool
	// formed is set on the one member that called BootstrapCluster.
	formed atomic.Bool
	// blocks is the block manager: the leader's soft state of the file
	// system and its monitors (internal/blocks).
	blocks *blocks.Manager
}

// New opens the data dir, starts Raft, gossip, gRPC and http, and begins
// cluster formation. Call Run (or Close) afterwards.
func New(cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coordserver: config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node-id", cfg.ID)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: log, fatalCh: make(chan error, 4), ctx: ctx, cancel: cancel, started: time.Now(),
		self: fsmpb.Member{
			Id:       cfg.ID,
			RaftAddr: advertised(cfg.RaftAddr, cfg.AdvertiseRaft),
			GrpcAddr: advertised(cfg.GRPCAddr, cfg.AdvertiseGRPC),
			HttpAddr: advertised(cfg.HTTPAddr, cfg.AdvertiseHTTP),
			// What this build reads: the leader raises the log format
			// only when every voter can read the new one.
			MaxLogFormat: maxLogFormat(cfg),
		},
	}
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	if err := s.checkDataDir(); err != nil {
		return nil, err
	}
	if src := cfg.Security.TLS; src != nil {
		log.Info("TLS on every connection", "identity", src.Identity().String(), "certificate-not-after", src.NotAfter())
	} else {
		log.Info("TLS is off: every port speaks plaintext and trusts whoever connects (docs/security.md)")
	}
	if cfg.Security.ACL {
		log.Info("ACL enforcement on: user calls need a token or certificate the cluster's roles allow")
	}
	s.audit.s = s
	s.metrics = newMetrics(s)
	s.fsm = fsm.New(func(err error) {
		log.Error("state machine halted: stopping this coordinator", "err", err)
		s.fatal(err)
	})
	if err := s.openRaft(); err != nil {
		return nil, err
	}
	s.blocks = blocks.New(cfg.FS, log.With("component", "blocks"), s.fsm, blockPorts{s}, blockPorts{s})
	s.metrics.reg.MustRegister(s.blocks.Collectors()...)
	s.peers = newPeerConns(cfg.ClusterID, tlsgrpc.DialCreds(cfg.Security.TLS, pki.RoleCoordinator), cfg.MaxRequestBytes)
	s.nodeCC = newPeerConns(cfg.ClusterID, tlsgrpc.DialCreds(cfg.Security.TLS, pki.RoleNode), 0)
	s.probes = newProbeMemo()
	bc := journal.DefaultBatcherConfig()
	bc.MaxBatchBytes = cfg.MaxRequestBytes
	bc.Linger = cfg.Journal.Linger
	s.leaderB = journal.NewBatcher(bc, s.pickLeaderSink)
	fc := bc
	fc.InFlight = forwardInFlight // in order over one ForwardStream
	s.fwd = newForwarder(s)
	s.forwardB = journal.NewBatcher(fc, s.pickForwardSink)
	if err := s.startGossip(); err != nil {
		return nil, err
	}
	if err := s.startGRPC(); err != nil {
		return nil, err
	}
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	s.goLoop(s.leaderLoop)
	s.goLoop(s.registerLoop)
	s.goLoop(s.watchLoop)
	s.goLoop(s.leaderIndexLoop)
	s.goLoop(s.journalLoop)
	s.goLoop(s.configCheckLoop)
	if cfg.Security.ACLBootstrapToken != "" {
		s.goLoop(func() { s.leaderEvery(time.Second, fsm.AclFormat, s.seedACL) })
	}
	if cfg.Security.ACL {
		s.goLoop(func() { s.leaderEvery(time.Second, fsm.AclFormat, s.rollBlockKeys) })
	}
	s.goLoop(func() { s.blocks.Run(s.ctx, s.members) })
	if err := s.bootstrap(); err != nil {
		return nil, err
	}
	log.Info("coordinator started", "cluster-id", cfg.ClusterID, "raft-addr", s.self.RaftAddr, "grpc-addr", s.self.GrpcAddr, "http-addr", s.self.HttpAddr)
	return s, nil
}

// ID is the member id.
func (s *Server) ID() string { return s.cfg.ID }

// Self returns this member's advertised addresses.
func (s *Server) Self() *fsmpb.Member { return &s.self }

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// HTTPAddr is the bound http address.
func (s *Server) HTTPAddr() string { return s.http.Addr() }

// Raft exposes the Raft handle to tests and tools in this module.
func (s *Server) Raft() *raft.Raft { return s.raft }

// FSM exposes the state machine to tests and tools in this module.
func (s *Server) FSM() *fsm.FSM { return s.fsm }

// LeaderReady reports whether this member leads and has applied its first
// entry of the term (it serves linearizable reads).
func (s *Server) LeaderReady() bool { return s.leaderReady() }

// Ready is nil while this member is ready (what /readyz reports).
func (s *Server) Ready() error { return s.ready() }

// Kill stops the member at once, without handing leadership over: what a
// crash looks like to the other members (the log store is closed, so
// whatever was acknowledged is on disk).
func (s *Server) Kill() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

func (s *Server) goLoop(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

func (s *Server) fatal(err error) {
	select {
	case s.fatalCh <- err:
	default:
	}
}

// Run blocks until ctx ends (graceful stop) or a fatal error (halted state
// machine, removed from the cluster), then closes the server.
func (s *Server) Run(ctx context.Context) error {
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-s.fatalCh:
	}
	if err := s.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// Close stops the coordinator gracefully: a leader first hands leadership
// to the most up-to-date voter so the cluster does not wait for an election
// timeout.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		if s.raft != nil && s.raft.State() == raft.Leader && s.node.Voters() > 1 {
			if err := s.raft.LeadershipTransfer().Error(); err != nil {
				s.log.Warn("leadership transfer before shutdown failed", "err", err)
			} else {
				s.log.Info("leadership transferred before shutdown")
			}
		}
		s.closeErr = s.shutdown()
	})
	return s.closeErr
}

// await waits for a Raft future unless the server stops first.
func (s *Server) await(f raft.Future) error { return raftnode.Await(s.ctx.Done(), f) }

// shutdown releases everything that was started, in reverse order.
func (s *Server) shutdown() error {
	s.closing.Store(true)
	s.cancel()
	var errs []error
	if s.health != nil {
		s.health.Shutdown()
	}
	if s.grpcSrv != nil {
		stopped := make(chan struct{})
		go func() { s.grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(3 * time.Second):
			s.grpcSrv.Stop()
		}
	}
	if s.console != nil {
		s.console.Close() // ends its live tails before the HTTP server waits for them
	}
	if s.http != nil {
		s.http.Close()
	}
	if s.forwardB != nil {
		s.forwardB.Close()
		s.fwd.close()
	}
	if s.leaderB != nil {
		s.leaderB.Close()
	}
	if s.node != nil {
		if err := s.node.Shutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	if s.members != nil {
		s.members.Leave(time.Second)
		s.members.Close()
	}
	if s.node != nil {
		if err := s.node.CloseStore(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.peers != nil {
		s.peers.close()
	}
	if s.nodeCC != nil {
		s.nodeCC.close()
	}
	return errors.Join(errs...)
}

// checkDataDir creates the data dir or verifies it belongs to this cluster
// and member. The identity files are written and fsynced before Raft opens.
func (s *Server) checkDataDir() error {
	if err := os.MkdirAll(filepath.Join(s.cfg.DataDir, "raft"), 0o750); err != nil {
		return fmt.Errorf("coordserver: data dir: %w", err)
	}
	for _, f := range []struct{ name, want string }{{"cluster-id", s.cfg.ClusterID}, {"member-id", s.cfg.ID}} {
		p := filepath.Join(s.cfg.DataDir, f.name)
		b, err := os.ReadFile(p)
		switch {
		case err == nil:
			if got := strings.TrimSpace(string(b)); got != f.want {
				return fmt.Errorf("%w: %s holds %q, this member is configured with %q", ErrForeignData, p, got, f.want)
			}
		case errors.Is(err, os.ErrNotExist):
			if err := durable.WriteFile(p, []byte(f.want+"\n")); err != nil {
				return fmt.Errorf("coordserver: %w", err)
			}
		default:
			return fmt.Errorf("coordserver: %w", err)
		}
	}
	return durable.SyncDir(s.cfg.DataDir)
}

func (s *Server) openRaft() error {
	n, err := raftnode.Open(raftnode.Config{
		ID:              s.cfg.ID,
		ClusterID:       s.cfg.ClusterID,
		Dir:             filepath.Join(s.cfg.DataDir, "raft"),
		BindAddr:        s.cfg.RaftAddr,
		Advertise:       s.cfg.AdvertiseRaft,
		TLS:             s.cfg.Security.raftTLS(),
		Dial:            s.cfg.RaftDial,
		LogStore:        s.cfg.LogStore,
		WALPrefill:      s.cfg.WALPrefill,
		WALSegmentBytes: s.cfg.walSegmentBytes,
		Timing:          s.cfg.Raft,
		Logger:          s.log,
		WrapLogs:        func(l raft.LogStore) raft.LogStore { return &timedLogStore{LogStore: l, m: s.metrics} },
	}, &timedFSM{FSM: s.fsm, m: s.metrics})
	if err != nil {
		return fmt.Errorf("coordserver: %w", err)
	}
	s.node, s.raft = n, n.Raft()
	if restarted, lastIndex := n.Restarted(); restarted {
		s.beginReplay(lastIndex)
		s.bootstrapd.Store(true)
		// Raft has read the configuration while opening; the log is scanned
		// only if that configuration lacks this member. A member whose own
		// log shows its removal is not a voter and cannot campaign, so Raft
		// running for this moment does no harm.
		if in, _, err := n.InConfiguration(); err != nil {
			return fmt.Errorf("coordserver: %w", err)
		} else if !in {
			removed, err := n.Removed()
			if err != nil {
				return fmt.Errorf("coordserver: %w", err)
			}
			if removed {
				return ErrRemoved
			}
		}
	}
	return nil
}

func (s *Server) startGossip() error {
	mc := membership.DefaultConfig()
	mc.BindAddr = s.cfg.GossipAddr
	mc.AdvertiseAddr = s.cfg.AdvertiseGossip
	mc.ClusterID = s.cfg.ClusterID
	mc.Join = s.cfg.Join
	mc.Logger = s.log
	kr, err := gossipkeys.Open(s.cfg.Security.GossipKeyringFile, s.cfg.Security.GossipKey, s.log)
	if err != nil {
		return fmt.Errorf("coordserver: gossip: %w", err)
	}
	mc.Keyring = kr
	mc.Meta = membership.Meta{
		Role:         membership.RoleCoordinator,
		ID:           s.cfg.ID,
		ClusterID:    s.cfg.ClusterID,
		RaftAddr:     s.self.RaftAddr,
		GRPCAddr:     s.self.GrpcAddr,
		HTTPAddr:     s.self.HttpAddr,
		Bootstrapped: s.bootstrapd.Load(),
	}
	m, err := membership.New(mc)
	if err != nil {
		return fmt.Errorf("coordserver: gossip: %w", err)
	}
	s.members = m
	return nil
}

// oversizeGrace is how far past the request cap a message still reaches
// the handlers: an append of an event of up to about 16 MiB (at the
// default 4 MiB request cap) is answered by validateAppend with
// InvalidArgument naming the cap it broke, not by gRPC's transport with
// "received message larger than max", which names neither the event nor
// the cap. Larger messages gRPC still refuses, so what one call makes this
// member hold stays bounded.
const oversizeGrace = 12 << 20

// recvLimit is the gRPC server's receive limit for a request cap of
// maxRequest bytes: the cap plus oversizeGrace, plus room for framing.
func recvLimit(maxRequest int) int { return maxRequest + oversizeGrace + 64<<10 }

// streamWorkers is the size of the gRPC server's handler goroutine pool.
const streamWorkers = 256

func (s *Server) startGRPC() error {
	ln, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("coordserver: grpc listener: %w", err)
	}
	s.grpcLn = ln
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(recvLimit(s.cfg.MaxRequestBytes)),
		grpc.MaxConcurrentStreams(4096),
		grpc.UnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.metrics.rpc.StreamInterceptor, s.streamInterceptor),
	}
	opts = append(opts, grpcflow.ServerOptions()...)
	// Handlers run on reused goroutines whose stacks have already grown:
	// with a fresh goroutine per call, growing the stack of each unary
	// append (copystack) took ~7% of a member's CPU at 100 clients
	// (docs/benchmarks.md). More concurrent calls than workers get fresh
	// goroutines, as without the pool.
	opts = append(opts, grpc.NumStreamWorkers(streamWorkers))
	opts = append(opts, grpc.Creds(tlsgrpc.ServerCreds(s.cfg.Security.TLS)))
	s.grpcSrv = grpc.NewServer(opts...)
	pb.RegisterJournalServer(s.grpcSrv, &journalService{s: s})
	pb.RegisterClusterServer(s.grpcSrv, &clusterService{s: s})
	clusterpb.RegisterPeerServer(s.grpcSrv, &peerService{s: s})
	pb.RegisterNamespaceServer(s.grpcSrv, &namespaceService{s: s})
	clusterpb.RegisterNodeLinkServer(s.grpcSrv, &nodeLinkService{s: s})
	pb.RegisterAclServer(s.grpcSrv, &aclService{s: s})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	reflection.Register(s.grpcSrv)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ReadyService, healthpb.HealthCheckResponse_NOT_SERVING)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpcSrv.Serve(ln); err != nil && !s.closing.Load() {
			s.fatal(fmt.Errorf("coordserver: grpc serve: %w", err))
		}
	}()
	return nil
}

// ReadyService is the health service name that reports SERVING only while
// this member is ready (Server.ready).
const ReadyService = pb.ReadyService

func (s *Server) startHTTP() error {
	con, err := s.newConsole()
	if err != nil {
		return fmt.Errorf("coordserver: console: %w", err)
	}
	s.console = con
	hc := httpserve.Config{
		Console:      con,
		Addr:         s.cfg.HTTPAddr,
		Logger:       s.log,
		Metrics:      s.metrics.handler(),
		Healthy:      s.healthy,
		Ready:        s.ready,
		Pprof:        s.cfg.EnablePprof,
		OnServeError: s.fatal,
	}
	hc.Secure(s.cfg.Security.TLS)
	h, err := httpserve.Start(hc)
	if err != nil {
		return fmt.Errorf("coordserver: http: %w", err)
	}
	s.http = h
	return nil
}

func (s *Server) healthy() error {
	if err := s.fsm.Halted(); err != nil {
		return err
	}
	if s.raft.State() == raft.Shutdown {
		return errors.New("raft is shut down")
	}
	return nil
}

// ready: healthy, a leader is known, and this member's state has caught up
// with the commit index it learned from the leader and, on a follower, with
// the leader's read index (refreshLeaderIndex).
func (s *Server) ready() error {
	if err := s.healthy(); err != nil {
		return err
	}
	if s.raft.State() == raft.Leader {
		if !s.leaderReady() {
			return errors.New("leader has not applied its first entry of this term")
		}
		return nil
	}
	addr, id := s.raft.LeaderWithID()
	if addr == "" || id == "" {
		return errors.New("no leader known")
	}
	if lc := s.raft.LastContact(); lc.IsZero() {
		// Raft names the leader before its first append succeeds.
		return errors.New("no contact with the leader yet")
	} else if time.Since(lc) > 3*s.cfg.Raft.HeartbeatTimeout {
		return fmt.Errorf("no contact with the leader for %s", time.Since(lc).Round(time.Millisecond))
	}
	// Raft's heartbeats carry no commit index: a restarted follower knows
	// its leader, and has applied all it knows to be committed, before it
	// has heard what the leader has committed. So, as etcd's /readyz does
	// with a linearizable read, it also waits for the leader's read index
	// (refreshLeaderIndex) and for its state to reach it.
	li := s.leaderIndex.Load()
	if li == 0 {
		return errors.New("catching up: waiting for the leader's read index")
	}
	if applied, commit := s.fsm.AppliedIndex(), max(s.raft.CommitIndex(), li); applied < commit {
		return fmt.Errorf("catching up: applied %d of %d", applied, commit)
	}
	return nil
}
