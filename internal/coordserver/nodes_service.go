package coordserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Bounds of the node reports.
const (
	maxReportReplicas    = 1 << 20
	maxIncrementalChange = 10000
	maxInvalidatePerBeat = 1000
	// maxRecoveriesPerBeat bounds the recover commands of one heartbeat
	// reply (the rest come with the next ones, oldest recovery first).
	maxRecoveriesPerBeat = 64
	// maxReplChecksPerCycle bounds the dirty blocks one replication cycle
	// checks (the rest wait for the next).
	maxReplChecksPerCycle = 100000
)

// defaultLookupChunk bounds the block lookups made under one hold of the state
// machine's read lock, which applies wait for, and the blocks handled
// under one hold of the soft state's lock, which every node's heartbeats
// and reports wait for (Server.lookupChunk; Config.lookupChunk in tests).
const defaultLookupChunk = 4096

// lookupChunk is this server's chunk: defaultLookupChunk unless a test
// set a smaller one in its Config.
func (s *Server) lookupChunk() int {
	if s.cfg.lookupChunk > 0 {
		return s.cfg.lookupChunk
	}
	return defaultLookupChunk
}

// invalidateChecksPerBeat bounds the replicas a heartbeat checks for
// invalidation, from each source (rechecks, the sweep): a node with a
// million replicas has each swept every ~31 heartbeats, one with at most
// this many at every heartbeat. A variable for tests.
var invalidateChecksPerBeat = 1 << 15

// nodeLinkService is the storage nodes' API: registration (replicated),
// heartbeats and block reports (leader soft state), recovery commits
// (replicated).
type nodeLinkService struct {
	clusterpb.UnimplementedNodeLinkServer
	s *Server
}

// registeredNode returns the node's record, or FailedPrecondition "node
// not registered" (the node registers again on that reason).
func (s *Server) registeredNode(id string) (*fsmpb.NodeRecord, error) {
	if err := s.checkFSName("node id", id); err != nil {
		return nil, err
	}
	var n *fsmpb.NodeRecord
	s.fsm.View(func(st *fsm.State) { n, _ = st.Node(id) })
	if n == nil {
		return nil, s.statusErr(codes.FailedPrecondition, ReasonNodeNotRegistered, fmt.Sprintf("node %q not registered", id))
	}
	return n, nil
}

func (s *Server) checkStorages(reps []*pb.StorageReport) error {
	if len(reps) > fsm.MaxStoragesPerNode {
		return s.badRequest(fmt.Sprintf("%d storages, at most %d", len(reps), fsm.MaxStoragesPerNode))
	}
	for _, r := range reps {
		if err := s.checkFSName("storage id", r.GetStorageId()); err != nil {
			return err
		}
	}
	return nil
}

// setStorages records a node's storage stats (caller holds f.mu).
func (n *nodeSoft) setStorages(reps []*pb.StorageReport) {
	n.storages = map[string]*pb.StorageReport{}
	n.free = 0
	for _, r := range reps {
		n.storages[r.StorageId] = proto.Clone(r).(*pb.StorageReport)
		if !r.Failed {
			n.free += r.Free
		}
	}
}

func (l *nodeLinkService) Register(ctx context.Context, req *clusterpb.NodeRegisterRequest) (*clusterpb.NodeRegisterResponse, error) {
	s := l.s
	if req.Node == nil {
		return nil, s.badRequest("register: no node")
	}
	if err := s.checkFSName("node id", req.Node.Id); err != nil {
		return nil, err
	}
	if err := s.checkStorages(req.Storages); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	node := proto.Clone(req.Node).(*fsmpb.NodeRecord)
	node.RegisteredUnixNanos, node.UpdatedUnixNanos = 0, 0
	r, err := s.proposeNS(nil, nsOp(&fsmpb.RegisterNodeOp{Node: node}))
	if err != nil {
		return nil, err
	}
	f := s.fsLocked()
	term := f.term
	n := f.node(node.Id)
	n.lastHeartbeat = time.Now()
	n.setStorages(req.Storages)
	// A (re-)registered node sends a full report before its replicas
	// count again; its blocks are judged without them meanwhile.
	n.fullReport = false
	old := n.replicas // no longer written once replaced
	n.setReplicas(map[uint64]softReplica{})
	f.mu.Unlock()
	s.forgetChunked(term, n, slices.Collect(maps.Keys(old)))
	s.log.Info("storage node registered", "node", node.Id, "grpc-addr", node.GrpcAddr)
	return &clusterpb.NodeRegisterResponse{Node: proto.Clone(r.Result.GetNode()).(*fsmpb.NodeRecord), ClusterId: s.cfg.ClusterID}, nil
}

func (l *nodeLinkService) Heartbeat(ctx context.Context, req *clusterpb.NodeHeartbeatRequest) (*clusterpb.NodeHeartbeatResponse, error) {
	s := l.s
	if err := s.checkStorages(req.Storages); err != nil {
		return nil, err
	}
	if err := s.checkFSName("node id", req.NodeId); err != nil {
		return nil, err
	}
	if n := len(req.Cache.GetBlockIds()); n > pb.MaxCacheReportBlocks {
		return nil, s.badRequest(fmt.Sprintf("cache report of %d blocks, at most %d", n, pb.MaxCacheReportBlocks))
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	rec, err := s.registeredNode(req.NodeId)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	f := s.fsLocked()
	n := f.node(req.NodeId)
	n.lastHeartbeat = now
	n.dead = false
	n.setStorages(req.Storages)
	f.setCacheReport(n, req.Cache)
	safe := f.safeMode
	f.mu.Unlock()
	resp := &clusterpb.NodeHeartbeatResponse{SafeMode: safe}
	for _, r := range req.Storages {
		if !contains(rec.StorageIds, r.StorageId) {
			// A storage the registration does not list: register again.
			resp.Commands = append(resp.Commands, &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_ReRegister{ReRegister: &clusterpb.ReRegisterCommand{}}})
			break
		}
	}
	resp.Commands = append(resp.Commands, s.nodeCommands(req.NodeId, now)...)
	return resp, nil
}

// nodeCommands is the work for node id, derived from the FSM (recoveries
// whose primary it is) and from the leader's soft state (full report
// request, invalidations outside safe mode).
func (s *Server) nodeCommands(id string, now time.Time) []*clusterpb.NodeCommand {
	s.readRemovals()
	var out []*clusterpb.NodeCommand
	var recs []*fsmpb.BlockRecord
	nodes := map[string]*fsmpb.NodeRecord{}
	s.fsm.View(func(st *fsm.State) {
		recs = st.RecoveriesOfPrimary(id)
		recs = recs[:min(len(recs), maxRecoveriesPerBeat)]
		for _, n := range st.Nodes() {
			nodes[n.Id] = n
		}
	})
	f := s.fsLocked()
	locs := make([][]string, len(recs))
	for i, b := range recs {
		locs[i] = f.recoveryLocationsLocked(b.ExpectedLocations, now, s.fsCfg().NodeStaleInterval, s.fsCfg().NodeDeadInterval)
	}
	n := f.node(id)
	if !n.fullReport {
		out = append(out, &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_SendFullReport{SendFullReport: &clusterpb.SendFullReportCommand{}}})
	}
	safe := f.safeMode
	transfers, excess := n.takeWorkLocked()
	cache, uncache := n.cache.takeWork(now, s.fsCfg().CacheTimeout)
	var check []replicaCheck
	if !safe && n.fullReport {
		check = f.takeChecksLocked(n, invalidateChecksPerBeat)
	}
	f.mu.Unlock()
	for i, b := range recs {
		out = append(out, &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_RecoverBlock{RecoverBlock: &clusterpb.RecoverBlockCommand{
			BlockId: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, RecoveryId: b.Recovery.GetRecoveryId(), Path: b.Path,
			Locations: locations(nodes, locs[i]), DeadlineUnixNanos: b.Recovery.GetDeadlineUnixNanos(),
		}}})
	}
	for _, t := range transfers {
		out = append(out, &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_Transfer{Transfer: t}})
	}
	if inv := append(excess, s.invalidations(id, check, now)...); len(inv) > 0 {
		out = append(out, &clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_Invalidate{Invalidate: &clusterpb.InvalidateCommand{Blocks: inv}}})
	}
	return append(out, cacheCommands(cache, uncache)...)
}

// readRemovals reads the state machine's removal feed on from where this
// term read to and marks each replica of a removed block for a recheck,
// so that a deleted file's replicas are invalidated at the next heartbeats
// however large the sweep. Removals the feed lost (to its bound or a
// restore) are left to the sweep.
func (s *Server) readRemovals() {
	f := s.fsLocked()
	term, from, started := f.term, f.removedAt, f.removedRead
	f.mu.Unlock()
	var ids []uint64
	next := from
	s.fsm.View(func(st *fsm.State) {
		if !started {
			next = st.RemovalFeedEnd()
			return
		}
		ids, next, _ = st.RemovedBlocks(from, 1<<16)
	})
	f = s.fsLocked()
	if f.term != term || (f.removedRead && f.removedAt >= next) {
		f.mu.Unlock()
		return // a new term, or another heartbeat read as far
	}
	f.removedAt, f.removedRead = next, true
	f.mu.Unlock()
	s.eachChunked(term, ids, func(f *fsSoft, id uint64) { f.recheckHolders(id, "") })
}

// invalidations classifies node id's replicas check with
// leaserecovery.ReconcileReplica: replicas of deleted (unknown) blocks,
// and replicas whose GS is older than their COMMITTED/COMPLETE block's
// while another live node holds a good copy, are invalidated. Those left
// unjudged by the per-heartbeat bound are rechecked at the next heartbeat.
func (s *Server) invalidations(id string, check []replicaCheck, now time.Time) []*fsmpb.BlockRef {
	if len(check) == 0 {
		return nil
	}
	stale := s.fsCfg().NodeStaleInterval
	blocks := make([]*fsmpb.BlockRecord, len(check))
	var maxGS uint64
	chunk := s.lookupChunk()
	for i := 0; i < len(check); i += chunk {
		end := min(i+chunk, len(check))
		s.fsm.View(func(st *fsm.State) {
			for j := i; j < end; j++ {
				blocks[j], _ = st.Block(check[j].id)
			}
			// The highest GS allocated (NextGS is not yet), read with the
			// last lookups: no block looked up has a newer one.
			maxGS = st.NextGS() - 1
		})
	}
	var out []*fsmpb.BlockRef
	f := s.fsLocked()
	defer f.mu.Unlock()
	n := f.node(id)
	for i, r := range check {
		if len(out) >= maxInvalidatePerBeat {
			for _, rest := range check[i:] {
				if _, ok := n.replicas[rest.id]; ok {
					n.markRecheck(rest.id)
				}
			}
			break
		}
		rs, ok := toRuleReplicaState(r.state)
		if !ok {
			continue
		}
		var stored *lr.Block
		b := blocks[i]
		if b != nil {
			rb := ruleBlock(b, 0)
			stored = &rb
		}
		rep := lr.ReportedReplica{Node: lr.NodeID(id), ID: r.id, GS: r.gs, NumBytes: r.numBytes, State: rs}
		rc := lr.ReconcileReplica(stored, rep, lr.ReportContext{MaxGS: maxGS, Location: true})
		switch {
		case rc.Action == lr.ReportInvalidate:
			out = append(out, &fsmpb.BlockRef{Id: r.id, Gs: r.gs, NumBytes: uint64(max(r.numBytes, 0))})
		case rc.Action == lr.ReportMarkCorrupt && b != nil && r.gs < b.Gs &&
			(b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE || b.State == fsmpb.BlockState_BLOCK_STATE_COMMITTED):
			// Never the last good copy.
			if f.finalizedAt(r.id, b.Gs, int64(b.NumBytes), now, stale) >= 1 {
				out = append(out, &fsmpb.BlockRef{Id: r.id, Gs: r.gs, NumBytes: uint64(max(r.numBytes, 0))})
			}
		}
	}
	return out
}

func (s *Server) checkReplica(r *pb.ReportedReplica) error {
	if r == nil {
		return s.badRequest("report: empty replica")
	}
	if _, ok := toRuleReplicaState(r.State); !ok {
		return s.badRequest(fmt.Sprintf("report: block %d in replica state %v", r.BlockId, r.State))
	}
	if r.NumBytes < 0 || r.NumBytes > fsm.MaxBlockSize {
		return s.badRequest(fmt.Sprintf("report: block %d of %d bytes", r.BlockId, r.NumBytes))
	}
	return nil
}

func (l *nodeLinkService) BlockReport(ctx context.Context, req *clusterpb.NodeBlockReportRequest) (*clusterpb.NodeReportResponse, error) {
	s := l.s
	if err := s.checkFSName("node id", req.NodeId); err != nil {
		return nil, err
	}
	if len(req.Storages) > fsm.MaxStoragesPerNode {
		return nil, s.badRequest(fmt.Sprintf("%d storages, at most %d", len(req.Storages), fsm.MaxStoragesPerNode))
	}
	total := 0
	for _, st := range req.Storages {
		total += len(st.Replicas)
		if total > maxReportReplicas {
			return nil, s.badRequest(fmt.Sprintf("report of more than %d replicas", maxReportReplicas))
		}
		for _, r := range st.Replicas {
			if err := s.checkReplica(r); err != nil {
				return nil, err
			}
		}
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if _, err := s.registeredNode(req.NodeId); err != nil {
		return nil, err
	}
	var registered []string
	s.fsm.View(func(st *fsm.State) {
		for _, n := range st.Nodes() {
			registered = append(registered, n.Id)
		}
	})
	// The soft state's lock, which every node's heartbeats and reports
	// wait for, is held only to swap the node's replicas: they are
	// gathered and indexed before, and the blocks that changed are marked
	// for the replication check after, a chunk at a time. Only those that
	// changed, as HDFS's report diff: a block this node reports as it was
	// holds the same good replicas as before, so its check would find what
	// the last one found, and a large node's periodic report would bury the
	// blocks that do need a check under its own.
	reps := make(map[uint64]softReplica, total)
	ids := make([]uint64, 0, total)
	for _, st := range req.Storages {
		if st.Failed {
			continue
		}
		for _, r := range st.Replicas {
			if _, dup := reps[r.BlockId]; !dup {
				ids = append(ids, r.BlockId)
			}
			reps[r.BlockId] = softReplica{storage: st.StorageId, gs: r.Gs, numBytes: r.NumBytes, state: r.State}
		}
	}
	term, n, old, err := s.installReport(ctx, req.NodeId, reps, ids, registered)
	if err != nil {
		return nil, err
	}
	s.eachChunked(term, ids, func(f *fsSoft, id uint64) {
		// reps is written only under f.mu (incremental reports); one
		// that changed it since the swap marked the block itself.
		if was, ok := old[id]; !ok || was != reps[id] {
			f.markDirty(id)
		}
	})
	slices.Sort(ids)
	var dropped []uint64
	for bid := range old {
		if _, found := slices.BinarySearch(ids, bid); !found {
			dropped = append(dropped, bid)
		}
	}
	s.forgetChunked(term, n, dropped)
	return &clusterpb.NodeReportResponse{}, nil
}

// installReport makes reps (of block ids) node id's replicas: it lists the
// node under each block in the holder index, lookupChunk per hold of the
// soft state's lock, then swaps the map in. It returns the term it did so
// in, the node's soft record and its previous replicas. One full report
// is installed at a time (Server.fullReports): a report's holders must
// stay listed until its swap, which a concurrent one for the same node
// could undo. A term that moves on meanwhile starts it over (the new
// term's index is empty).
func (s *Server) installReport(ctx context.Context, id string, reps map[uint64]softReplica, ids []uint64, registered []string) (uint64, *nodeSoft, map[uint64]softReplica, error) {
	s.fullReports.Lock()
	defer s.fullReports.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, nil, nil, status.FromContextError(err).Err() // the node gave up waiting
	}
	for range 3 {
		f := s.fsLocked()
		term := f.term
		n := f.node(id)
		n.incoming = reps
		f.mu.Unlock()
		if !s.eachChunked(term, ids, func(f *fsSoft, bid uint64) { f.indexHolder(bid, n) }) {
			continue
		}
		f = s.fsLocked()
		if f.term != term {
			f.mu.Unlock()
			continue
		}
		old := n.replicas // no longer written once replaced
		n.setReplicas(reps)
		n.incoming = nil
		n.invalidating = nil
		n.fullReport = true
		n.dead = false
		f.updateSafeMode(registered, time.Now(), s.fsCfg().NodeStaleInterval)
		f.mu.Unlock()
		return term, n, old, nil
	}
	return 0, nil, nil, status.Error(codes.Unavailable, "leadership changed during the block report; send it again")
}

// eachChunked calls fn on each of ids with the soft state locked,
// lookupChunk ids per hold of its lock (which every node's heartbeats and
// reports wait for), while the term is still term. It reports whether it
// got through them all.
func (s *Server) eachChunked(term uint64, ids []uint64, fn func(f *fsSoft, id uint64)) bool {
	for chunk := range slices.Chunk(ids, s.lookupChunk()) {
		f := s.fsLocked()
		if f.term != term {
			f.mu.Unlock()
			return false
		}
		for _, id := range chunk {
			fn(f, id)
		}
		f.mu.Unlock()
	}
	return true
}

func (l *nodeLinkService) IncrementalReport(ctx context.Context, req *clusterpb.NodeIncrementalReportRequest) (*clusterpb.NodeReportResponse, error) {
	s := l.s
	if err := s.checkFSName("node id", req.NodeId); err != nil {
		return nil, err
	}
	if len(req.Changes) > maxIncrementalChange {
		return nil, s.badRequest(fmt.Sprintf("%d changes, at most %d", len(req.Changes), maxIncrementalChange))
	}
	for _, c := range req.Changes {
		if c.Change == clusterpb.ReplicaChange_REPLICA_CHANGE_UNSPECIFIED || c.Change > clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED {
			return nil, s.badRequest(fmt.Sprintf("report: unknown change %v", c.Change))
		}
		if c.Change == clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED {
			if c.Replica == nil {
				return nil, s.badRequest("report: deleted change without a replica")
			}
			continue
		}
		if err := s.checkReplica(c.Replica); err != nil {
			return nil, err
		}
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if _, err := s.registeredNode(req.NodeId); err != nil {
		return nil, err
	}
	f := s.fsLocked()
	n := f.node(req.NodeId)
	for _, c := range req.Changes {
		r := c.Replica
		f.markDirty(r.BlockId)
		if c.Change == clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED {
			f.deleteReplica(n, r.BlockId)
			delete(n.invalidating, r.BlockId)
			continue
		}
		f.setReplica(n, r.BlockId, softReplica{storage: c.StorageId, gs: r.Gs, numBytes: r.NumBytes, state: r.State})
		n.markRecheck(r.BlockId)
		if r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED {
			// A new good copy: the others' older ones may go now.
			f.recheckHolders(r.BlockId, req.NodeId)
		}
	}
	f.mu.Unlock()
	return &clusterpb.NodeReportResponse{}, nil
}

func (l *nodeLinkService) CommitBlockSynchronization(ctx context.Context, req *clusterpb.CommitBlockSyncRequest) (*clusterpb.CommitBlockSyncResponse, error) {
	s := l.s
	if err := s.checkFSName("node id", req.NodeId); err != nil {
		return nil, err
	}
	if err := s.checkNodeList("targets", req.Targets); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if _, err := s.registeredNode(req.NodeId); err != nil {
		return nil, err
	}
	// Design §R9.12 (HDFS rejects commitBlockSynchronization in safe
	// mode): a new leader judges a recovery's outcome only once the nodes
	// have reported. The primary retries Unavailable until its deadline.
	if s.SafeMode() {
		err := s.statusErr(codes.Unavailable, ReasonSafeMode, "commit block synchronization: the leader is in safe mode, waiting for the storage nodes' full reports")
		s.metrics.recoveryCommits.WithLabelValues(errReason(err)).Inc()
		return nil, err
	}
	var replicated []uint64
	if v, ok := s.viewFileOfBlock(req.BlockId); ok {
		soft := s.fsLocked()
		replicated = soft.replicatedLocked(v, &fsmpb.BlockRef{Id: req.BlockId, Gs: req.NewGs, NumBytes: req.NewLength}, time.Now(), s.fsCfg().NodeStaleInterval)
		soft.mu.Unlock()
	}
	r, err := s.proposeNS(nil, nsOp(&fsmpb.CommitBlockSyncOp{
		BlockId: req.BlockId, RecoveryId: req.RecoveryId, NewGs: req.NewGs, NewLength: req.NewLength, CloseFile: req.CloseFile,
		DeleteBlock: req.DeleteBlock, Targets: req.Targets, OldGs: req.OldGs, ReplicatedBlocks: replicated,
	}))
	if err != nil {
		s.metrics.recoveryCommits.WithLabelValues(errReason(err)).Inc()
		return nil, err
	}
	s.metrics.recoveryCommits.WithLabelValues("ok").Inc()
	return &clusterpb.CommitBlockSyncResponse{Result: proto.Clone(r.Result).(*fsmpb.NamespaceResult)}, nil
}

func (s *Server) viewFileOfBlock(id uint64) (fileView, bool) {
	var path string
	s.fsm.View(func(st *fsm.State) {
		if b, ok := st.Block(id); ok {
			path = b.Path
		}
	})
	if path == "" {
		return fileView{}, false
	}
	return s.viewFile(path)
}

// ListNodes lists the registered storage nodes (replicated) with the
// leader's soft view of each: liveness, last heartbeat, full report this
// term, replica count, storages.
func (n *namespaceService) ListNodes(ctx context.Context, _ *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	s := n.s
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	var recs []*fsmpb.NodeRecord
	s.fsm.View(func(st *fsm.State) { recs = st.Nodes() })
	now := time.Now()
	stale := s.fsCfg().NodeStaleInterval
	f := s.fsLocked()
	defer f.mu.Unlock()
	resp := &pb.ListNodesResponse{SafeMode: f.safeMode, UnderReplicatedBlocks: uint64(len(f.repl.needed)),
		MissingBlocks: uint64(len(f.repl.missing)), PendingReplications: uint64(len(f.repl.pending))}
	for _, r := range recs {
		ns := &pb.StorageNodeStatus{Node: apiNodeRecord(r), LastHeartbeatMs: -1, Live: f.live(r.Id, now, stale), Gossip: s.gossip.state(r.Id),
			Dead: f.deadLocked(r.Id, now, s.fsCfg().NodeDeadInterval)}
		if soft := f.nodes[r.Id]; soft != nil {
			if !soft.lastHeartbeat.IsZero() {
				ns.LastHeartbeatMs = now.Sub(soft.lastHeartbeat).Milliseconds()
			}
			ns.FullReport = soft.fullReport
			ns.Replicas = uint64(len(soft.replicas))
			ns.CacheCapacity, ns.CacheUsed, ns.CachedBlocks = soft.cache.capacity, soft.cache.used, uint64(len(soft.cache.cached))
			for _, st := range soft.storages {
				ns.Storages = append(ns.Storages, st)
			}
			slices.SortFunc(ns.Storages, func(a, b *pb.StorageReport) int { return strings.Compare(a.StorageId, b.StorageId) })
		}
		resp.Nodes = append(resp.Nodes, ns)
	}
	return resp, nil
}
