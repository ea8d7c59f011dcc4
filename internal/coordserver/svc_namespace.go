package coordserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/blocktoken"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/grpc/codes"
)

// Request bounds of the file-system services (checked before anything is
// proposed).
const (
	maxFSPathBytes   = fsm.MaxPathBytes
	maxFSTargets     = fsm.MaxReplication
	maxFSListLimit   = 10000
	defaultListLimit = 1000
)

// namespaceService is the client's file-system API. Every call is
// answered by the leader (forwardOrHandle forwards from followers).
type namespaceService struct {
	pb.UnimplementedNamespaceServer
	s *Server
}

// fsReady: this member leads, applied its first entry of the term, and
// the replicated log format carries namespace commands.
func (s *Server) fsReady(ctx context.Context) error {
	if !s.isLeader() {
		return s.statusErr(codes.Unavailable, ReasonNotLeader, "not the leader")
	}
	if err := s.waitLeaderReady(ctx); err != nil {
		return err
	}
	return s.needFormat(fsm.NamespaceFormat, "the namespace needs")
}

func (s *Server) checkFSPath(what, p string) error {
	switch {
	case p == "":
		return s.badRequest(what + ": empty path")
	case len(p) > maxFSPathBytes:
		return s.badRequest(fmt.Sprintf("%s: path of %d bytes, at most %d", what, len(p), maxFSPathBytes))
	case !strings.HasPrefix(p, "/"):
		return s.badRequest(fmt.Sprintf("%s: path %q is not absolute", what, p))
	}
	if err := fsm.ValidPath(p); err != nil {
		return s.fsErr(err)
	}
	return nil
}

func (s *Server) checkFSName(what, n string) error {
	switch {
	case n == "":
		return s.badRequest("empty " + what)
	case len(n) > fsm.MaxNameBytes:
		return s.badRequest(fmt.Sprintf("%s of %d bytes, at most %d", what, len(n), fsm.MaxNameBytes))
	}
	return nil
}

// checkFileCall checks what every writer's call carries: its path, the
// client name (the lease holder) and the exactly-once session.
func (s *Server) checkFileCall(what, path, client string, sess *pb.FsSession) error {
	if err := s.checkFSPath(what, path); err != nil {
		return err
	}
	if err := s.checkFSName("client name", client); err != nil {
		return err
	}
	return s.checkSession(sess)
}

func (s *Server) checkSession(sess *pb.FsSession) error {
	if len(sess.GetClientId()) > fsm.MaxNameBytes {
		return s.badRequest(fmt.Sprintf("client id of %d bytes, at most %d", len(sess.GetClientId()), fsm.MaxNameBytes))
	}
	if sess.GetSessionEstablished() && sess.GetClientId() == "" {
		return s.badRequest("session_established needs a client id")
	}
	return nil
}

func (s *Server) checkNodeList(what string, ids []string) error {
	if len(ids) > maxFSTargets {
		return s.badRequest(fmt.Sprintf("%d %s, at most %d", len(ids), what, maxFSTargets))
	}
	for _, id := range ids {
		if err := s.checkFSName(what, id); err != nil {
			return err
		}
	}
	return nil
}

// proposeNS proposes one namespace op and returns the FSM's result; a
// refusal comes back as its gRPC status.
func (s *Server) proposeNS(sess *pb.FsSession, op *fsmpb.NamespaceOp) (fsm.NamespaceResult, error) {
	cmd := &fsmpb.NamespaceCommand{ClientId: sess.GetClientId(), RequestSeq: sess.GetRequestSeq(), AckedSeq: sess.GetAckedSeq(), SessionEstablished: sess.GetSessionEstablished(), Op: op}
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_NAMESPACE, cmd)
	if err != nil {
		return fsm.NamespaceResult{}, err
	}
	r, ok := resp.(fsm.NamespaceResult)
	if !ok {
		return fsm.NamespaceResult{}, s.statusErr(codes.Internal, "BAD_RESPONSE", fmt.Sprintf("unexpected state machine response %T", resp))
	}
	if r.Err != nil {
		return r, s.fsErr(r.Err)
	}
	return r, nil
}

// fileOp proposes op and answers with a copy of its result (the FSM's is
// shared with the state); a success renews client's lease.
func (s *Server) fileOp(sess *pb.FsSession, client string, op *fsmpb.NamespaceOp) (*pb.FileOpResponse, error) {
	r, err := s.proposeNS(sess, op)
	if err != nil {
		return nil, err
	}
	if client != "" {
		s.blocks.Renew(client)
	}
	return &pb.FileOpResponse{Seq: r.Seq, Result: apiNamespaceResult(r.Result)}, nil
}

func (n *namespaceService) Create(ctx context.Context, req *pb.CreateRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("create", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if req.Overwrite {
		if err := s.blocks.TakeOver(lr.OpCreate, req.Path, req.ClientName); err != nil {
			return nil, s.fsErr(err)
		}
	}
	return s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.CreateFileOp{
		Path: req.Path, Replication: req.Replication, BlockSize: req.BlockSize, ClientName: req.ClientName, Overwrite: req.Overwrite,
	}))
}

func locations(nodes map[string]*fsmpb.NodeRecord, ids []string) []*pb.NodeLocation {
	out := make([]*pb.NodeLocation, 0, len(ids))
	for _, id := range ids {
		out = append(out, &pb.NodeLocation{NodeId: id, GrpcAddr: nodes[id].GetGrpcAddr()})
	}
	return out
}

func (n *namespaceService) AddBlock(ctx context.Context, req *pb.AddBlockRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("add block", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.checkNodeList("excluded nodes", req.ExcludedNodes); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	v, err := s.blocks.ViewFile(req.Path)
	if err != nil {
		return nil, s.fsErr(err)
	}
	if err := s.checkBlockKey(); err != nil {
		return nil, err
	}
	prev := formatBlockRef(req.Previous)
	targets, replicated, err := s.blocks.NewBlock(v, req.ExcludedNodes, prev)
	if err != nil {
		return nil, s.fsErr(err)
	}
	resp, err := s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.AddBlockOp{
		Path: req.Path, ClientName: req.ClientName, Previous: prev, Targets: targets, ReplicatedBlocks: replicated,
	}))
	if err != nil {
		return nil, err
	}
	resp.Locations = locations(v.Nodes, resp.Result.GetBlock().GetExpectedLocations())
	b := resp.Result.GetBlock()
	resp.BlockToken = s.blockToken(ctx, b.GetId(), b.GetGs(), b.GetGs(), writeModes)
	return resp, nil
}

func (n *namespaceService) Complete(ctx context.Context, req *pb.CompleteRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("complete", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	v, err := s.blocks.ViewFile(req.Path)
	if err != nil {
		return nil, s.fsErr(err)
	}
	last := formatBlockRef(req.Last)
	replicated := s.blocks.Replicated(v, last)
	return s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.CompleteFileOp{
		Path: req.Path, ClientName: req.ClientName, Last: last, ReplicatedBlocks: replicated,
	}))
}

func (n *namespaceService) Append(ctx context.Context, req *pb.AppendFileRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("append", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if err := s.blocks.TakeOver(lr.OpAppend, req.Path, req.ClientName); err != nil {
		return nil, s.fsErr(err)
	}
	v, err := s.blocks.ViewFile(req.Path)
	if err != nil {
		return nil, s.fsErr(err)
	}
	if err := s.checkBlockKey(); err != nil {
		return nil, err
	}
	// The replicas of a partial last block: the live nodes that reported
	// it finalized at its GS and length (empty keeps its expected ones).
	targets := s.blocks.AppendTargets(v, maxFSTargets)
	resp, err := s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.AppendFileOp{Path: req.Path, ClientName: req.ClientName, Targets: targets}))
	if err != nil {
		return nil, err
	}
	resp.Locations = locations(v.Nodes, resp.Result.GetBlock().GetExpectedLocations())
	// The append's pipeline starts from the block's GS before it (and
	// reads its last chunk there).
	if b := resp.Result.GetBlock(); b != nil {
		before := b.GetGs()
		if last := v.Last(); last != nil && last.Id == b.GetId() {
			before = last.Gs
		}
		resp.BlockToken = s.blockToken(ctx, b.GetId(), before, b.GetGs(), writeModes)
	}
	return resp, nil
}

func (n *namespaceService) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFSPath("delete", req.Path); err != nil {
		return nil, err
	}
	if err := s.checkSession(req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	// The removed blocks' replicas are invalidated at the nodes' next
	// heartbeats (an unknown block; the state machine's removal feed
	// marks them, see readRemovals).
	return s.fileOp(req.Session, "", blocks.NamespaceOp(&fsmpb.DeleteFileOp{Path: req.Path, Recursive: req.Recursive}))
}

func (n *namespaceService) AbandonBlock(ctx context.Context, req *pb.AbandonBlockRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("abandon block", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	return s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.AbandonBlockOp{Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId}))
}

func (n *namespaceService) UpdateBlockForPipeline(ctx context.Context, req *pb.UpdateBlockForPipelineRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("update block for pipeline", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if err := s.checkBlockKey(); err != nil {
		return nil, err
	}
	resp, err := s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.UpdateBlockForPipelineOp{Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId}))
	if err != nil || !s.blockTokensOn() {
		return resp, err
	}
	// The recovery's pipeline moves the replicas from the block's GS (the
	// op leaves it) to the new one.
	if v, err := s.blocks.ViewFile(req.Path); err == nil {
		for _, b := range v.Blocks {
			if b.Id == req.BlockId {
				resp.BlockToken = s.blockToken(ctx, b.Id, b.Gs, resp.Result.GetNewGs(), writeModes)
			}
		}
	}
	return resp, nil
}

// GetAdditionalNode chooses a node to add to the pipeline of path's last
// block (design §R5.3 step 5) from the leader's soft state.
func (n *namespaceService) GetAdditionalNode(ctx context.Context, req *pb.GetAdditionalNodeRequest) (*pb.GetAdditionalNodeResponse, error) {
	s := n.s
	if err := s.checkFileCall("get additional node", req.Path, req.ClientName, nil); err != nil {
		return nil, err
	}
	if err := s.checkNodeList("existing nodes", req.Existing); err != nil {
		return nil, err
	}
	if err := s.checkNodeList("excluded nodes", req.Excluded); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	v, err := s.blocks.ViewFile(req.Path)
	if err != nil {
		return nil, s.fsErr(err)
	}
	node, err := s.blocks.AdditionalNode(v, req.ClientName, req.BlockId, append(append([]string(nil), req.Existing...), req.Excluded...))
	if err != nil {
		return nil, s.fsErr(err)
	}
	return &pb.GetAdditionalNodeResponse{Node: locations(v.Nodes, []string{node})[0]}, nil
}

func (n *namespaceService) UpdatePipeline(ctx context.Context, req *pb.UpdatePipelineRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("update pipeline", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.checkNodeList("new nodes", req.NewNodes); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	resp, err := s.fileOp(req.Session, req.ClientName, blocks.NamespaceOp(&fsmpb.UpdatePipelineOp{
		Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId, OldGs: req.OldGs, NewGs: req.NewGs, NewLength: req.NewLength, NewNodes: req.NewNodes,
	}))
	if err != nil {
		return nil, err
	}
	if v, err := s.blocks.ViewFile(req.Path); err == nil {
		resp.Locations = locations(v.Nodes, resp.Result.GetBlock().GetExpectedLocations())
	}
	resp.BlockToken = s.blockToken(ctx, req.BlockId, req.OldGs, req.NewGs, writeModes)
	return resp, nil
}

func (n *namespaceService) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	s := n.s
	if err := s.checkFSPath("stat", req.Path); err != nil {
		return nil, err
	}
	if err := s.linearizableBarrier(ctx); err != nil {
		return nil, err
	}
	var resp *pb.StatResponse
	var blks []*fsmpb.BlockRecord
	addrs := map[string]string{}
	s.fsm.View(func(st *fsm.State) {
		fs, ok := st.FileStatus(req.Path)
		if !ok {
			if n, ok := st.DirStatus(req.Path); ok {
				resp = &pb.StatResponse{Dir: true, DirEntries: uint64(n)}
			}
			return
		}
		resp = &pb.StatResponse{File: apiFileStatus(fs)}
		blks, _ = st.BlocksOfFile(req.Path)
		for _, n := range st.Nodes() {
			addrs[n.Id] = n.GrpcAddr
		}
	})
	if resp == nil {
		return nil, s.fsErr(fmt.Errorf("%w: %s", fsm.ErrFileNotFound, req.Path))
	}
	if resp.Dir {
		return resp, nil
	}
	ids := make([]uint64, len(blks))
	for i, b := range blks {
		ids[i] = b.Id
	}
	reported, fromLeader := s.blocks.Reported(ids)
	resp.FromLeader = fromLeader
	for _, b := range blks {
		bs := &pb.BlockStatus{Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, State: apiBlockState(b.State), ExpectedLocations: append([]string(nil), b.ExpectedLocations...)}
		bs.Recovery = apiBlockRecovery(b.Recovery)
		for _, r := range reported[b.Id] {
			bs.ReportedLocations = append(bs.ReportedLocations, &pb.ReportedLocation{NodeId: r.NodeID, State: apiReplicaState(r.State), Gs: r.GS,
				NumBytes: r.NumBytes, Corrupt: r.Corrupt, Cached: r.Cached})
		}
		named := map[string]bool{}
		addLoc := func(id string) {
			if a := addrs[id]; a != "" && !named[id] {
				named[id] = true
				bs.Locations = append(bs.Locations, &pb.NodeLocation{NodeId: id, GrpcAddr: a})
			}
		}
		for _, id := range bs.ExpectedLocations {
			addLoc(id)
		}
		for _, r := range bs.ReportedLocations {
			addLoc(r.NodeId)
		}
		bs.BlockToken = s.blockToken(ctx, b.Id, b.Gs, b.Gs, blocktoken.Read)
		resp.Blocks = append(resp.Blocks, bs)
	}
	return resp, nil
}

func (n *namespaceService) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	s := n.s
	if err := s.checkFSPath("list", req.Dir); err != nil {
		return nil, err
	}
	if len(req.After) > fsm.MaxComponentBytes || strings.Contains(req.After, "/") {
		return nil, s.badRequest("list: after must be one name of at most 255 bytes")
	}
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = defaultListLimit
	case limit > maxFSListLimit:
		return nil, s.badRequest(fmt.Sprintf("list: limit %d, at most %d", limit, maxFSListLimit))
	}
	if err := s.linearizableBarrier(ctx); err != nil {
		return nil, err
	}
	var entries []fsm.ListEntry
	var err error
	s.fsm.View(func(st *fsm.State) { entries, err = st.List(req.Dir, req.After, limit+1) })
	if err != nil {
		return nil, s.fsErr(err)
	}
	resp := &pb.ListResponse{}
	if len(entries) > limit {
		entries, resp.More = entries[:limit], true
	}
	for _, e := range entries {
		le := &pb.ListEntryStatus{Path: e.Path, Dir: e.Dir}
		le.File = apiFileStatus(e.File)
		resp.Entries = append(resp.Entries, le)
	}
	return resp, nil
}

func (n *namespaceService) RecoverLease(ctx context.Context, req *pb.RecoverLeaseRequest) (*pb.RecoverLeaseResponse, error) {
	s := n.s
	if err := s.checkFSPath("recover lease", req.Path); err != nil {
		return nil, err
	}
	if err := s.checkFSName("client name", req.ClientName); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	closed, err := s.blocks.RecoverLease(req.Path, req.ClientName)
	if err != nil {
		return nil, s.fsErr(err)
	}
	return &pb.RecoverLeaseResponse{Closed: closed}, nil
}

func (n *namespaceService) RenewLease(ctx context.Context, req *pb.RenewLeaseRequest) (*pb.RenewLeaseResponse, error) {
	s := n.s
	if err := s.checkFSName("client name", req.ClientName); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	s.blocks.Renew(req.ClientName)
	var open int
	s.fsm.View(func(st *fsm.State) { open = len(st.FilesOfHolder(req.ClientName)) })
	cfg := s.blocks.Config()
	return &pb.RenewLeaseResponse{OpenFiles: uint32(open), SoftLimitMs: cfg.LeaseSoftLimit.Milliseconds(), HardLimitMs: cfg.LeaseHardLimit.Milliseconds()}, nil
}

// cacheReady: fsReady, and the replicated log format carries the
// cache-directive ops (a voter on an older build would halt on them).
func (s *Server) cacheReady(ctx context.Context) error {
	if err := s.fsReady(ctx); err != nil {
		return err
	}
	return s.needFormat(fsm.CacheFormat, "cache directives need")
}

// AddCacheDirective journals a directive (logbook.cache.added); the cache
// monitor then caches the file's COMPLETE blocks.
func (n *namespaceService) AddCacheDirective(ctx context.Context, req *pb.AddCacheDirectiveRequest) (*pb.CacheDirectiveResponse, error) {
	s := n.s
	if err := s.checkFSPath("add cache directive", req.Path); err != nil {
		return nil, err
	}
	if err := s.checkSession(req.Session); err != nil {
		return nil, err
	}
	if err := s.cacheReady(ctx); err != nil {
		return nil, err
	}
	return s.directiveOp(req.Session, &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AddCacheDirective{
		AddCacheDirective: &fsmpb.AddCacheDirectiveOp{Path: req.Path, Replication: req.Replication}}})
}

// RemoveCacheDirective journals the removal (logbook.cache.removed); the
// cache monitor then uncaches what only it covered.
func (n *namespaceService) RemoveCacheDirective(ctx context.Context, req *pb.RemoveCacheDirectiveRequest) (*pb.CacheDirectiveResponse, error) {
	s := n.s
	if err := s.checkSession(req.Session); err != nil {
		return nil, err
	}
	if err := s.cacheReady(ctx); err != nil {
		return nil, err
	}
	return s.directiveOp(req.Session, &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_RemoveCacheDirective{
		RemoveCacheDirective: &fsmpb.RemoveCacheDirectiveOp{Id: req.Id}}})
}

func (s *Server) directiveOp(sess *pb.FsSession, op *fsmpb.NamespaceOp) (*pb.CacheDirectiveResponse, error) {
	r, err := s.proposeNS(sess, op)
	if err != nil {
		return nil, err
	}
	return &pb.CacheDirectiveResponse{Directive: apiCacheDirective(r.Result.GetDirective()), Seq: r.Seq}, nil
}

// ListCacheDirectives lists every directive (replicated) with the leader's
// view of how much of it is cached (soft state, from cache reports).
func (n *namespaceService) ListCacheDirectives(ctx context.Context, _ *pb.ListCacheDirectivesRequest) (*pb.ListCacheDirectivesResponse, error) {
	s := n.s
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	resp := &pb.ListCacheDirectivesResponse{}
	for _, d := range s.blocks.CacheDirectives() {
		resp.Directives = append(resp.Directives, &pb.CacheDirectiveStatus{Directive: apiCacheDirective(d.Directive),
			BlocksNeeded: d.BlocksNeeded, BlocksCached: d.BlocksCached, BytesNeeded: d.BytesNeeded, BytesCached: d.BytesCached})
	}
	return resp, nil
}

// ListNodes lists the registered storage nodes (replicated) with the
// leader's soft view of each: liveness, last heartbeat, full report this
// term, replica count, storages.
func (n *namespaceService) ListNodes(ctx context.Context, _ *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	s := n.s
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	v := s.blocks.Nodes()
	now := time.Now()
	resp := &pb.ListNodesResponse{SafeMode: v.SafeMode, UnderReplicatedBlocks: v.UnderReplicated, MissingBlocks: v.Missing, PendingReplications: v.PendingTransfers}
	for _, ns := range v.Nodes {
		st := &pb.StorageNodeStatus{Node: apiNodeRecord(ns.Record), LastHeartbeatMs: -1, Live: ns.Live, Gossip: ns.Gossip, Dead: ns.Dead,
			FullReport: ns.FullReport, Replicas: ns.Replicas, CacheCapacity: ns.CacheCapacity, CacheUsed: ns.CacheUsed, CachedBlocks: ns.CachedBlocks}
		if ns.SinceHeartbeat >= 0 {
			st.LastHeartbeatMs = ns.SinceHeartbeat.Milliseconds()
		}
		c := ns.ReplicasByState
		st.ReplicasByState = &pb.ReplicaCounts{Finalized: c[lr.ReplicaFinalized], Rbw: c[lr.ReplicaRBW], Rwr: c[lr.ReplicaRWR], Rur: c[lr.ReplicaRUR], Temporary: c[lr.ReplicaTemporary]}
		st.LastFullReportMs, st.LastIncrementalReportMs = msSince(ns.LastFullReport, now), msSince(ns.LastIncrementalReport, now)
		for _, r := range ns.Storages {
			st.Storages = append(st.Storages, &pb.StorageReport{StorageId: r.ID, Capacity: r.Capacity, Used: r.Used, Free: r.Free, Failed: r.Failed})
		}
		resp.Nodes = append(resp.Nodes, st)
	}
	return resp, nil
}

// ReportBadBlocks (Namespace): a reader's checksum failures.
func (n *namespaceService) ReportBadBlocks(ctx context.Context, req *pb.ReportBadBlocksRequest) (*pb.ReportBadBlocksResponse, error) {
	return n.s.reportBadBlocks(ctx, req, false)
}

// msSince is the milliseconds from t to now; -1 for the zero time.
func msSince(t, now time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return now.Sub(t).Milliseconds()
}
