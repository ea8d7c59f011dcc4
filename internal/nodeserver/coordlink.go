package nodeserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// linkMaxRecoveries and linkMaxTransfers bound the recoveries and the
	// transfers running at once; a command past them is dropped (the
	// coordinator sends it again with a later heartbeat, which a task
	// ending then brings forward). A recovery is a few small RPCs; a
	// transfer streams a block.
	linkMaxRecoveries = 32
	linkMaxTransfers  = 4
	// linkMaxCacheQueued bounds the replicas waiting to be cached (one
	// worker caches them in turn: each is read and verified in full before
	// it is locked); the coordinator re-sends what did not fit.
	linkMaxCacheQueued = 4096
	// linkCacheTimeout bounds caching one replica.
	linkCacheTimeout = time.Minute
	// linkMaxRecvBytes bounds a coordinator's reply (a heartbeat's commands).
	linkMaxRecvBytes = 16 << 20
	// linkMaxBadQueued bounds the corrupt replicas waiting to be reported.
	linkMaxBadQueued = 1000
	// linkCallTimeout bounds a full block report on one endpoint; the
	// other NodeLink calls get linkAttemptTimeout (a coordinator that
	// vanished must not hold the link much longer than a heartbeat).
	linkCallTimeout = 10 * time.Second
	linkBackoffMin  = 50 * time.Millisecond
	linkBackoffMax  = 5 * time.Second
	// linkCommitRounds bounds the rounds over every endpoint a recovery
	// commit is tried for (with backoff between rounds); the time they may
	// take is bounded by commitDeadline.
	linkCommitRounds = 64
	// linkCommitMinWindow is the least time a commit is retried for, even
	// when the recovery's deadline is nearer (or passed: the coordinator
	// still accepts the id until it re-drives the recovery).
	linkCommitMinWindow = 5 * time.Second
	// linkReportBatch bounds the changes of one IncrementalReport.
	linkReportBatch = 1000
	// linkRecoveryTimeout bounds one recovery attempt: it ends before the
	// coordinator's attempt timeout (90 s) re-drives it with a new id.
	linkRecoveryTimeout = 80 * time.Second
	// linkTransferTimeout bounds one transfer command.
	linkTransferTimeout = 10 * time.Minute
)

// reasonNodeNotRegistered is the coordinator's refusal of a call from a
// node it does not know (coordserver.ReasonNodeNotRegistered).
const reasonNodeNotRegistered = "NODE_NOT_REGISTERED"

// coordLink is the node's side of NodeLink: registration, the block
// reports, heartbeats and the commands they return. One goroutine (run)
// talks to the coordinators in order; recoveries and transfers run as
// bounded tasks beside it.
type coordLink struct {
	s          *Server
	log        *slog.Logger
	pool       string
	interval   time.Duration
	conns      []*grpc.ClientConn
	addrs      []string
	instanceID string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // run and the tasks
	sub    *replica.Subscription

	needRegister atomic.Bool
	needFull     atomic.Bool
	// dropped: a command was dropped for capacity; the next task to end
	// asks for a heartbeat at once (hbNow) to get it again.
	dropped      atomic.Bool
	hbNow        chan struct{}
	heartbeatsOK atomic.Int64 // heartbeats the coordinator accepted
	wake         chan struct{}

	mu      sync.Mutex
	cur     int              // the endpoint tried first
	running map[string]bool  // keys of the running tasks
	bad     []*pb.BadReplica // corrupt replicas to report (bounded)
	// Replicas to cache, in order (ids in toCacheSet; an uncache takes an
	// id out of the set and the worker skips it); caching: the worker
	// runs.
	toCache    []*fsmpb.BlockRef
	toCacheSet map[uint64]bool
	caching    bool
}

func newCoordLink(s *Server) (*coordLink, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("nodeserver: instance id: %w", err)
	}
	l := &coordLink{
		s: s, log: s.log.With("component", "coord-link"), pool: s.cfg.BlockPool, interval: s.cfg.HeartbeatInterval,
		instanceID: hex.EncodeToString(raw[:]), wake: make(chan struct{}, 1), hbNow: make(chan struct{}, 1), running: map[string]bool{},
	}
	for _, a := range s.cfg.CoordEndpoints {
		c, err := grpc.NewClient(grpcflow.Target(a), append(DialOptions(tlsgrpc.DialCreds(s.cfg.Security.TLS, pki.RoleCoordinator)), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(linkMaxRecvBytes)))...)
		if err != nil {
			l.closeConns()
			return nil, fmt.Errorf("nodeserver: coordinator %s: %w", a, err)
		}
		l.conns, l.addrs = append(l.conns, c), append(l.addrs, a)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// start subscribes to the dataset's changes (before the first full
// report, so nothing falls between the two) and starts the link.
func (l *coordLink) start() {
	l.sub = l.s.store.Subscribe()
	l.needRegister.Store(true)
	l.wg.Add(1)
	go l.run()
}

// stop ends the link and waits for its tasks.
func (l *coordLink) stop() {
	l.cancel()
	l.wg.Wait()
	if l.sub != nil {
		l.sub.Close()
	}
	l.closeConns()
}

func (l *coordLink) closeConns() {
	for _, c := range l.conns {
		c.Close()
	}
}

func (l *coordLink) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *coordLink) run() {
	defer l.wg.Done()
	hb := time.NewTicker(l.interval)
	defer hb.Stop()
	backoff := linkBackoffMin
	retry := func(what string, err error) bool {
		// A cluster still electing or upgrading its log format answers
		// Unavailable or FailedPrecondition for a moment: say so quietly
		// until it lasts.
		lvl := slog.LevelWarn
		if c := status.Code(err); (c == codes.Unavailable || c == codes.FailedPrecondition) && backoff < time.Second {
			lvl = slog.LevelDebug
		}
		l.log.Log(context.Background(), lvl, "coordinator link: "+what+" failed", "error", err, "retry-in", backoff)
		ok := sleepCtx(l.ctx, backoff)
		backoff = min(2*backoff, linkBackoffMax)
		return ok
	}
	for l.ctx.Err() == nil {
		if l.needRegister.Load() {
			if err := l.register(); err != nil {
				if !retry("register", err) {
					return
				}
				continue
			}
			l.needRegister.Store(false)
			l.needFull.Store(true)
		}
		if l.needFull.Load() {
			l.needFull.Store(false)
			if err := l.fullReport(); err != nil {
				l.needFull.Store(true)
				l.checkRegistered(err)
				if !retry("full block report", err) {
					return
				}
				continue
			}
		}
		backoff = linkBackoffMin
		l.reportBad()
		select {
		case <-l.ctx.Done():
			return
		case <-hb.C:
			l.heartbeat()
		case <-l.hbNow:
			l.heartbeat()
		case <-l.sub.Ready():
			l.incremental()
		case <-l.wake:
		}
	}
}

// call runs fn against the coordinators: an endpoint that is unavailable
// (down, or not the leader and unable to forward) gives way to the next;
// after a round over all of them it backs off. rounds bounds the rounds.
func (l *coordLink) call(ctx context.Context, rounds int, fn func(context.Context, clusterpb.NodeLinkClient) error) error {
	return l.callWithin(ctx, rounds, linkAttemptTimeout(l.interval), fn)
}

// linkAttemptTimeout is twice the heartbeat interval, within [1 s, 10 s].
func linkAttemptTimeout(heartbeat time.Duration) time.Duration {
	return min(max(2*heartbeat, time.Second), linkCallTimeout)
}

// callWithin is call with each endpoint's attempt bounded by attempt.
func (l *coordLink) callWithin(ctx context.Context, rounds int, attempt time.Duration, fn func(context.Context, clusterpb.NodeLinkClient) error) error {
	backoff := linkBackoffMin
	var last error
	for round := 0; round < rounds; round++ {
		if round > 0 {
			if !sleepCtx(ctx, backoff) {
				return ended(ctx, last)
			}
			backoff = min(2*backoff, linkBackoffMax)
		}
		for range l.conns {
			l.mu.Lock()
			i := l.cur
			l.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, attempt)
			err := fn(cctx, clusterpb.NewNodeLinkClient(l.conns[i]))
			cancel()
			if err == nil {
				return nil
			}
			last = err
			if ctx.Err() != nil {
				return ended(ctx, last)
			}
			if !retryableLink(err) {
				return err
			}
			l.mu.Lock()
			if l.cur == i {
				l.cur = (i + 1) % len(l.conns)
			}
			l.mu.Unlock()
		}
	}
	return last
}

// ended is what callWithin returns when ctx ends after an attempt failed:
// the coordinators' last answer when the caller's retry window (a deadline)
// closed, which says more than "deadline exceeded"; ctx's error when the
// caller gave up (the link stops).
func ended(ctx context.Context, last error) error {
	if last != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return last
	}
	return ctx.Err()
}

func retryableLink(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

func statusReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// checkRegistered schedules a registration when the coordinator no longer
// knows this node.
func (l *coordLink) checkRegistered(err error) {
	if status.Code(err) == codes.FailedPrecondition && statusReason(err) == reasonNodeNotRegistered {
		l.needRegister.Store(true)
	}
}

func (l *coordLink) nodeRecord() *fsmpb.NodeRecord {
	s := l.s
	rec := &fsmpb.NodeRecord{
		Id: s.cfg.ID, GrpcAddr: s.AdvertisedGRPC(), HttpAddr: advertised(s.HTTPAddr(), s.cfg.AdvertiseHTTP),
		GossipAddr: s.AdvertisedGossip(), InstanceId: l.instanceID,
	}
	for _, v := range s.store.VolumeInfo() {
		rec.StorageIds = append(rec.StorageIds, v.StorageID)
	}
	return rec
}

func (l *coordLink) register() error {
	req := &clusterpb.NodeRegisterRequest{Node: l.nodeRecord(), Storages: storageReports(l.s.store.VolumeInfo())}
	var resp *clusterpb.NodeRegisterResponse
	err := l.call(l.ctx, 1, func(ctx context.Context, c clusterpb.NodeLinkClient) error {
		var err error
		resp, err = c.Register(ctx, req)
		return err
	})
	if err == nil && resp.GetAwaitingGossip() {
		// Encrypted gossip: the coordinators admit this node once their
		// gossip sees it (coordserver's gossipAdmits).
		if len(l.s.cfg.Join) == 0 {
			return status.Error(codes.FailedPrecondition, "not admitted: the coordinators encrypt their gossip and admit only nodes "+
				"that join it; start this node with --join (the coordinators' gossip addresses) and the cluster's gossip key")
		}
		l.s.startGossip(resp.GetClusterId())
		return status.Error(codes.FailedPrecondition, "not admitted yet: the coordinators do not see this node in their encrypted gossip "+
			"(has it the cluster's gossip key, and can it reach their gossip port?)")
	}
	if err == nil {
		l.log.Info("registered with the coordinator", "instance-id", l.instanceID, "storages", len(req.Node.StorageIds), "cluster-id", resp.GetClusterId())
		l.s.startGossip(resp.GetClusterId())
		l.s.setBlockKeys(resp.GetBlockKeys())
	}
	return err
}

// fullReport sends the pool's full block report. Pending changes are
// dropped first: the report covers them.
func (l *coordLink) fullReport() error {
	l.sub.Drain()
	reports, err := l.s.store.BlockReport(l.pool)
	if err != nil {
		return err
	}
	req := &clusterpb.NodeBlockReportRequest{NodeId: l.s.cfg.ID, Storages: blockReportToPB(reports)}
	var resp *clusterpb.NodeReportResponse
	err = l.callWithin(l.ctx, 1, linkCallTimeout, func(ctx context.Context, c clusterpb.NodeLinkClient) error {
		var err error
		resp, err = c.BlockReport(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	n := 0
	for _, r := range req.Storages {
		n += len(r.Replicas)
	}
	l.log.Info("full block report sent", "pool", l.pool, "replicas", n)
	l.execute(resp.GetCommands())
	return nil
}

func (l *coordLink) heartbeat() {
	req := &clusterpb.NodeHeartbeatRequest{NodeId: l.s.cfg.ID, Storages: storageReports(l.s.store.VolumeInfo()), Cache: l.cacheReport()}
	var resp *clusterpb.NodeHeartbeatResponse
	err := l.call(l.ctx, 1, func(ctx context.Context, c clusterpb.NodeLinkClient) error {
		var err error
		resp, err = c.Heartbeat(ctx, req)
		return err
	})
	if err != nil {
		if l.ctx.Err() == nil {
			l.log.Warn("heartbeat failed", "error", err)
		}
		l.checkRegistered(err)
		return
	}
	l.heartbeatsOK.Add(1)
	l.s.setBlockKeys(resp.GetBlockKeys())
	l.execute(resp.GetCommands())
}

// badBlock queues a corrupt replica for the coordinator (at most
// linkMaxBadQueued; the block scanner finds the others again).
func (l *coordLink) badBlock(b replica.BadBlock) {
	l.mu.Lock()
	if len(l.bad) < linkMaxBadQueued {
		l.bad = append(l.bad, &pb.BadReplica{BlockId: b.Block.ID, Gs: b.Block.GS, NodeId: l.s.cfg.ID, Reason: truncate(b.Reason, 512)})
	}
	l.mu.Unlock()
	l.kick()
}

// reportBad sends the queued corrupt replicas (the leader stops counting
// them and re-replicates the block); on failure they wait for the next
// round.
func (l *coordLink) reportBad() {
	l.mu.Lock()
	bad := l.bad
	l.bad = nil
	l.mu.Unlock()
	if len(bad) == 0 {
		return
	}
	req := &pb.ReportBadBlocksRequest{Reporter: l.s.cfg.ID, Replicas: bad}
	err := l.call(l.ctx, 1, func(ctx context.Context, c clusterpb.NodeLinkClient) error {
		_, err := c.ReportBadBlocks(ctx, req)
		return err
	})
	if err != nil {
		if l.ctx.Err() == nil {
			l.log.Warn("bad block report failed; will retry", "replicas", len(bad), "error", err)
		}
		l.mu.Lock()
		l.bad = append(bad, l.bad...)[:min(len(bad)+len(l.bad), linkMaxBadQueued)]
		l.mu.Unlock()
		return
	}
	l.log.Info("bad blocks reported", "replicas", len(bad))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// incremental sends the queued changes; after an overflow, or when the
// send fails, a full report replaces them.
func (l *coordLink) incremental() {
	changes, overflowed := l.sub.Drain()
	if overflowed {
		l.log.Info("change queue overflowed: sending a full block report")
		l.needFull.Store(true)
		return
	}
	var out []*clusterpb.IncrementalChange
	for _, c := range changes {
		if c.Pool != l.pool {
			continue
		}
		out = append(out, &clusterpb.IncrementalChange{Change: changeToPB(c.Kind), StorageId: c.StorageID, Replica: reportedToPB(c.Replica)})
	}
	for len(out) > 0 {
		batch := out[:min(len(out), linkReportBatch)]
		out = out[len(batch):]
		req := &clusterpb.NodeIncrementalReportRequest{NodeId: l.s.cfg.ID, Changes: batch}
		var resp *clusterpb.NodeReportResponse
		err := l.call(l.ctx, 1, func(ctx context.Context, c clusterpb.NodeLinkClient) error {
			var err error
			resp, err = c.IncrementalReport(ctx, req)
			return err
		})
		if err != nil {
			if l.ctx.Err() == nil {
				l.log.Warn("incremental report failed: a full report follows", "error", err)
			}
			l.checkRegistered(err)
			l.needFull.Store(true)
			return
		}
		l.execute(resp.GetCommands())
	}
}

// execute runs the coordinator's commands: reports and registration on the
// link's goroutine, invalidations at once, recoveries and transfers as
// bounded tasks.
func (l *coordLink) execute(cmds []*clusterpb.NodeCommand) {
	for _, cmd := range cmds {
		switch c := cmd.GetCommand().(type) {
		case *clusterpb.NodeCommand_SendFullReport:
			l.needFull.Store(true)
			l.kick()
		case *clusterpb.NodeCommand_ReRegister:
			l.needRegister.Store(true)
			l.kick()
		case *clusterpb.NodeCommand_Invalidate:
			l.invalidate(c.Invalidate)
		case *clusterpb.NodeCommand_Transfer:
			t := c.Transfer
			key := fmt.Sprintf("transfer/%d/%d/%s", t.GetBlock().GetId(), t.GetBlock().GetGs(), locationAddrs(t.GetTargets()))
			l.startTask(key, linkMaxTransfers, func(ctx context.Context) { l.transfer(ctx, t) })
		case *clusterpb.NodeCommand_Uncache:
			l.uncache(c.Uncache)
		case *clusterpb.NodeCommand_Cache:
			l.queueCache(c.Cache.GetBlocks())
		case *clusterpb.NodeCommand_RecoverBlock:
			r := c.RecoverBlock
			key := fmt.Sprintf("recover/%d/%d", r.GetBlockId(), r.GetRecoveryId())
			l.startTask(key, linkMaxRecoveries, func(ctx context.Context) { l.recoverBlock(ctx, r) })
		default:
			l.log.Warn("unknown coordinator command", "command", fmt.Sprintf("%T", cmd.GetCommand()))
		}
	}
}

// startTask runs fn unless a task with key runs already or limit tasks
// of its kind (the key's prefix up to '/') do; it reports whether fn was
// started.
func (l *coordLink) startTask(key string, limit int, fn func(context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key] {
		l.log.Debug("command already running: ignored", "task", key)
		return false
	}
	kind, _, _ := strings.Cut(key, "/")
	n := 0
	for k := range l.running {
		if strings.HasPrefix(k, kind+"/") {
			n++
		}
	}
	if n >= limit {
		l.dropped.Store(true)
		l.log.Debug("too many commands running: dropped (the coordinator re-sends it)", "task", key, "running", n)
		return false
	}
	if l.ctx.Err() != nil {
		return false
	}
	l.running[key] = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.running, key)
			l.mu.Unlock()
			if l.dropped.CompareAndSwap(true, false) {
				l.heartbeatNow() // fetch the dropped work now, not a heartbeat later
			}
		}()
		fn(l.ctx)
	}()
	return true
}

// heartbeatNow asks the loop for a heartbeat at once (one pending request
// is enough).
func (l *coordLink) heartbeatNow() {
	select {
	case l.hbNow <- struct{}{}:
	default:
	}
}

func (l *coordLink) invalidate(cmd *clusterpb.InvalidateCommand) {
	blocks := make([]replica.Block, 0, len(cmd.GetBlocks()))
	for _, b := range cmd.GetBlocks() {
		blocks = append(blocks, replica.Block{ID: b.GetId(), GS: b.GetGs(), NumBytes: int64(b.GetNumBytes())})
	}
	if len(blocks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
	defer cancel()
	if err := l.s.store.Invalidate(ctx, l.pool, blocks); err != nil {
		l.log.Warn("invalidate failed", "blocks", len(blocks), "error", err)
		return
	}
	l.log.Info("replicas invalidated", "blocks", len(blocks))
}

// transfer copies a replica to the targets (re-replication) through the
// TransferBlock path, as FINALIZED replicas.
func (l *coordLink) transfer(ctx context.Context, cmd *clusterpb.TransferCommand) {
	ctx, cancel := context.WithTimeout(ctx, linkTransferTimeout)
	defer cancel()
	targets := make([]string, 0, len(cmd.GetTargets()))
	for _, t := range cmd.GetTargets() {
		targets = append(targets, t.GetGrpcAddr())
	}
	req := &pb.TransferBlockRequest{
		Pool: l.pool, BlockId: cmd.GetBlock().GetId(), Gs: cmd.GetBlock().GetGs(), Targets: targets,
		Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED,
	}
	if _, err := l.s.transferBlock(ctx, req); err != nil {
		l.log.Warn("transfer command failed", "block-id", req.BlockId, "gs", req.Gs, "targets", targets, "error", err)
	}
}

func locationAddrs(locs []*pb.NodeLocation) string {
	a := make([]string, len(locs))
	for i, l := range locs {
		a[i] = l.GetNodeId() + "@" + l.GetGrpcAddr()
	}
	return strings.Join(a, ",")
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func u64(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// storageReports are the volumes' capacity and usage; free is what new
// replicas may use (free space minus the reservations).
func storageReports(vols []replica.VolumeInfo) []*pb.StorageReport {
	out := make([]*pb.StorageReport, 0, len(vols))
	for _, v := range vols {
		out = append(out, &pb.StorageReport{StorageId: v.StorageID, Capacity: u64(v.Capacity), Used: u64(v.Used), Free: u64(v.Available), Failed: v.Failed})
	}
	return out
}

func reportedToPB(r replica.ReportedReplica) *pb.ReportedReplica {
	return &pb.ReportedReplica{BlockId: r.ID, Gs: r.GS, NumBytes: r.NumBytes, State: stateToPB(r.State)}
}

func blockReportToPB(reports []replica.StorageBlockReport) []*pb.StorageBlockReport {
	out := make([]*pb.StorageBlockReport, 0, len(reports))
	for _, r := range reports {
		sr := &pb.StorageBlockReport{StorageId: r.StorageID, StorageType: r.StorageType.String(), Failed: r.Failed,
			Replicas: make([]*pb.ReportedReplica, len(r.Replicas))}
		for i, rr := range r.Replicas {
			sr.Replicas[i] = reportedToPB(rr)
		}
		out = append(out, sr)
	}
	return out
}

func changeToPB(k replica.ChangeKind) clusterpb.ReplicaChange {
	switch k {
	case replica.ChangeReceiving:
		return clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVING
	case replica.ChangeReceived:
		return clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVED
	case replica.ChangeDeleted:
		return clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED
	}
	return clusterpb.ReplicaChange_REPLICA_CHANGE_UNSPECIFIED
}
