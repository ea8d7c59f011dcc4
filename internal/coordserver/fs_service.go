package coordserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
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
		s.renew(client, time.Now())
	}
	return &pb.FileOpResponse{Seq: r.Seq, Result: apiNamespaceResult(r.Result)}, nil
}

// renew records a lease renewal of client (leader memory).
func (s *Server) renew(client string, now time.Time) {
	f := s.fsLocked()
	f.renewals[client] = now
	f.mu.Unlock()
}

func nsOp(op any) *fsmpb.NamespaceOp {
	switch x := op.(type) {
	case *fsmpb.CreateFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CreateFile{CreateFile: x}}
	case *fsmpb.AddBlockOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AddBlock{AddBlock: x}}
	case *fsmpb.CompleteFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CompleteFile{CompleteFile: x}}
	case *fsmpb.AppendFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AppendFile{AppendFile: x}}
	case *fsmpb.DeleteFileOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_DeleteFile{DeleteFile: x}}
	case *fsmpb.AbandonBlockOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AbandonBlock{AbandonBlock: x}}
	case *fsmpb.UpdateBlockForPipelineOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_UpdateBlockForPipeline{UpdateBlockForPipeline: x}}
	case *fsmpb.UpdatePipelineOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_UpdatePipeline{UpdatePipeline: x}}
	case *fsmpb.StartRecoveryOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_StartRecovery{StartRecovery: x}}
	case *fsmpb.CommitBlockSyncOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CommitBlockSync{CommitBlockSync: x}}
	case *fsmpb.ReleaseLeaseOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_ReleaseLease{ReleaseLease: x}}
	case *fsmpb.RegisterNodeOp:
		return &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_RegisterNode{RegisterNode: x}}
	}
	panic(fmt.Sprintf("nsOp: %T", op))
}

// fileView is a file and its blocks read under one FSM view.
type fileView struct {
	file   *fsmpb.FileRecord
	blocks []*fsmpb.BlockRecord
	nodes  map[string]*fsmpb.NodeRecord
}

func (s *Server) viewFile(path string) (fileView, bool) {
	var v fileView
	var ok bool
	s.fsm.View(func(st *fsm.State) {
		v.file, ok = st.File(path)
		if ok {
			v.blocks, _ = st.BlocksOfFile(path)
		}
		v.nodes = map[string]*fsmpb.NodeRecord{}
		for _, n := range st.Nodes() {
			v.nodes[n.Id] = n
		}
	})
	return v, ok
}

// replicatedLocked lists the blocks of v that live nodes reported
// FINALIZED at their GS and length (ref, when given, overrides the
// client's view of its block): the leader vouches for their minimal
// replication.
func (f *fsSoft) replicatedLocked(v fileView, ref *fsmpb.BlockRef, now time.Time, stale time.Duration) []uint64 {
	var out []uint64
	for _, b := range v.blocks {
		gs, n := b.Gs, int64(b.NumBytes)
		if ref != nil && ref.Id == b.Id {
			gs, n = ref.Gs, int64(ref.NumBytes)
		}
		if b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE {
			continue
		}
		if f.finalizedAt(b.Id, gs, n, now, stale) >= 1 {
			out = append(out, b.Id)
		}
	}
	return out
}

func notFound(path string) error { return fmt.Errorf("%w: %s", fsm.ErrFileNotFound, path) }

// takeOver runs the soft-limit takeover of a create or append (design
// §R3.5): an open file of another writer whose lease passed the soft limit
// is released (or recovered) first.
func (s *Server) takeOver(op lr.WriteOp, path, client string) error {
	v, ok := s.viewFile(path)
	if !ok || !v.file.UnderConstruction || v.file.LeaseHolder == client {
		return nil // the FSM decides
	}
	now := time.Now()
	soft := s.fsLocked()
	rf := s.ruleFileLocked(soft, v, now)
	renewed := soft.renewed(v.file.LeaseHolder)
	soft.mu.Unlock()
	acc, err := lr.CheckWriteAccess(rf, lr.AccessRequest{Op: op, Caller: client, Now: now, LeaseRenewed: renewed}, s.fsCfg().rules())
	if err != nil {
		return s.fsErr(err)
	}
	if !acc.Release {
		return nil
	}
	d, err := s.releaseFile(path, acc.NewHolder, "soft limit passed: "+op.String()+" by "+client)
	if err != nil {
		return err
	}
	_, err = lr.AnswerRelease(op, d)
	return s.fsErr(err)
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
		if err := s.takeOver(lr.OpCreate, req.Path, req.ClientName); err != nil {
			return nil, err
		}
	}
	return s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.CreateFileOp{
		Path: req.Path, Replication: req.Replication, BlockSize: req.BlockSize, ClientName: req.ClientName, Overwrite: req.Overwrite,
	}))
}

// chooseTargetsLocked picks count distinct live registered nodes, most
// free space first (then by id), avoiding excluded; fewer when not enough
// are live, at least one.
func (s *Server) chooseTargetsLocked(f *fsSoft, nodes map[string]*fsmpb.NodeRecord, count int, excluded []string, now time.Time) ([]string, error) {
	stale := s.fsCfg().NodeStaleInterval
	var live []string
	for id := range nodes {
		if f.live(id, now, stale) && !contains(excluded, id) {
			live = append(live, id)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := f.nodes[live[i]].free, f.nodes[live[j]].free
		if a != b {
			return a > b
		}
		return live[i] < live[j]
	})
	if len(live) == 0 {
		return nil, s.statusErr(codes.Unavailable, ReasonNoLiveNodes, "no live storage nodes")
	}
	return live[:min(max(count, 1), len(live))], nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
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
	v, ok := s.viewFile(req.Path)
	if !ok {
		return nil, s.fsErr(notFound(req.Path))
	}
	now := time.Now()
	soft := s.fsLocked()
	targets, err := s.chooseTargetsLocked(soft, v.nodes, int(v.file.Replication), req.ExcludedNodes, now)
	replicated := soft.replicatedLocked(v, formatBlockRef(req.Previous), now, s.fsCfg().NodeStaleInterval)
	soft.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp, err := s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.AddBlockOp{
		Path: req.Path, ClientName: req.ClientName, Previous: formatBlockRef(req.Previous), Targets: targets, ReplicatedBlocks: replicated,
	}))
	if err != nil {
		return nil, err
	}
	resp.Locations = locations(v.nodes, resp.Result.GetBlock().GetExpectedLocations())
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
	v, ok := s.viewFile(req.Path)
	if !ok {
		return nil, s.fsErr(notFound(req.Path))
	}
	soft := s.fsLocked()
	replicated := soft.replicatedLocked(v, formatBlockRef(req.Last), time.Now(), s.fsCfg().NodeStaleInterval)
	soft.mu.Unlock()
	return s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.CompleteFileOp{
		Path: req.Path, ClientName: req.ClientName, Last: formatBlockRef(req.Last), ReplicatedBlocks: replicated,
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
	if err := s.takeOver(lr.OpAppend, req.Path, req.ClientName); err != nil {
		return nil, err
	}
	v, ok := s.viewFile(req.Path)
	if !ok {
		return nil, s.fsErr(notFound(req.Path))
	}
	// The replicas of a partial last block: the live nodes that reported
	// it finalized at its GS and length (empty keeps its expected ones).
	var targets []string
	if k := len(v.blocks); k > 0 {
		last := v.blocks[k-1]
		now, stale := time.Now(), s.fsCfg().NodeStaleInterval
		soft := s.fsLocked()
		for _, id := range soft.reporters(last.Id) {
			r := soft.nodes[id].replicas[last.Id]
			if _, reg := v.nodes[id]; reg && soft.live(id, now, stale) && r.state == pb.ReplicaState_REPLICA_STATE_FINALIZED &&
				r.gs == last.Gs && r.numBytes == int64(last.NumBytes) && len(targets) < maxFSTargets {
				targets = append(targets, id)
			}
		}
		soft.mu.Unlock()
	}
	resp, err := s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.AppendFileOp{Path: req.Path, ClientName: req.ClientName, Targets: targets}))
	if err != nil {
		return nil, err
	}
	resp.Locations = locations(v.nodes, resp.Result.GetBlock().GetExpectedLocations())
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
	return s.fileOp(req.Session, "", nsOp(&fsmpb.DeleteFileOp{Path: req.Path, Recursive: req.Recursive}))
}

func (n *namespaceService) AbandonBlock(ctx context.Context, req *pb.AbandonBlockRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("abandon block", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	return s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.AbandonBlockOp{Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId}))
}

func (n *namespaceService) UpdateBlockForPipeline(ctx context.Context, req *pb.UpdateBlockForPipelineRequest) (*pb.FileOpResponse, error) {
	s := n.s
	if err := s.checkFileCall("update block for pipeline", req.Path, req.ClientName, req.Session); err != nil {
		return nil, err
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	return s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.UpdateBlockForPipelineOp{Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId}))
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
	v, ok := s.viewFile(req.Path)
	if !ok {
		return nil, s.fsErr(notFound(req.Path))
	}
	switch {
	case !v.file.UnderConstruction:
		return nil, s.fsErr(fmt.Errorf("%w: %s", fsm.ErrNotUnderConstruction, req.Path))
	case v.file.LeaseHolder != req.ClientName:
		return nil, s.fsErr(fmt.Errorf("%w: %s is held by %s, not %s", fsm.ErrNotLeaseHolder, req.Path, v.file.LeaseHolder, req.ClientName))
	case len(v.blocks) == 0 || v.blocks[len(v.blocks)-1].Id != req.BlockId:
		return nil, s.fsErr(fmt.Errorf("%w: block %d is not the last block of %s", fsm.ErrNotLastBlock, req.BlockId, req.Path))
	case v.blocks[len(v.blocks)-1].State != fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION:
		return nil, s.fsErr(fmt.Errorf("%w: block %d is %v", fsm.ErrBlockState, req.BlockId, v.blocks[len(v.blocks)-1].State))
	}
	soft := s.fsLocked()
	targets, err := s.chooseTargetsLocked(soft, v.nodes, 1, append(append([]string(nil), req.Existing...), req.Excluded...), time.Now())
	soft.mu.Unlock()
	if err != nil {
		// Not Unavailable: no node to add is an answer, not a reason to
		// retry (the writer goes on without one, or fails if it must add).
		return nil, s.statusErr(codes.FailedPrecondition, ReasonNoAdditionalNode,
			fmt.Sprintf("no live node outside the pipeline of block %d and the %d excluded", req.BlockId, len(req.Excluded)))
	}
	return &pb.GetAdditionalNodeResponse{Node: locations(v.nodes, targets)[0]}, nil
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
	resp, err := s.fileOp(req.Session, req.ClientName, nsOp(&fsmpb.UpdatePipelineOp{
		Path: req.Path, ClientName: req.ClientName, BlockId: req.BlockId, OldGs: req.OldGs, NewGs: req.NewGs, NewLength: req.NewLength, NewNodes: req.NewNodes,
	}))
	if err != nil {
		return nil, err
	}
	if v, ok := s.viewFile(req.Path); ok {
		resp.Locations = locations(v.nodes, resp.Result.GetBlock().GetExpectedLocations())
	}
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
	var blocks []*fsmpb.BlockRecord
	addrs := map[string]string{}
	s.fsm.View(func(st *fsm.State) {
		fs, ok := st.FileStatus(req.Path)
		if !ok {
			return
		}
		resp = &pb.StatResponse{File: apiFileStatus(fs)}
		blocks, _ = st.BlocksOfFile(req.Path)
		for _, n := range st.Nodes() {
			addrs[n.Id] = n.GrpcAddr
		}
	})
	if resp == nil {
		return nil, s.fsErr(notFound(req.Path))
	}
	var soft *fsSoft
	if s.isLeader() {
		soft = s.fsLocked()
		defer soft.mu.Unlock()
		resp.FromLeader = true
	}
	for _, b := range blocks {
		bs := &pb.BlockStatus{Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, State: apiBlockState(b.State), ExpectedLocations: append([]string(nil), b.ExpectedLocations...)}
		bs.Recovery = apiBlockRecovery(b.Recovery)
		if soft != nil {
			bs.ReportedLocations = soft.reported(b.Id)
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
	v, ok := s.viewFile(req.Path)
	if !ok {
		return nil, s.fsErr(notFound(req.Path))
	}
	now := time.Now()
	soft := s.fsLocked()
	rf := s.ruleFileLocked(soft, v, now)
	renewed := soft.renewed(v.file.LeaseHolder)
	soft.mu.Unlock()
	acc, err := lr.CheckWriteAccess(rf, lr.AccessRequest{Op: lr.OpRecoverLease, Caller: req.ClientName, Now: now, LeaseRenewed: renewed}, s.fsCfg().rules())
	if err != nil {
		return nil, s.fsErr(err)
	}
	if acc.Proceed {
		return &pb.RecoverLeaseResponse{Closed: true}, nil
	}
	d, err := s.releaseFile(req.Path, acc.NewHolder, "recover lease by "+req.ClientName)
	if err != nil {
		return nil, err
	}
	closed, err := lr.AnswerRelease(lr.OpRecoverLease, d)
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
	s.renew(req.ClientName, time.Now())
	var open int
	s.fsm.View(func(st *fsm.State) { open = len(st.FilesOfHolder(req.ClientName)) })
	cfg := s.fsCfg()
	return &pb.RenewLeaseResponse{OpenFiles: uint32(open), SoftLimitMs: cfg.LeaseSoftLimit.Milliseconds(), HardLimitMs: cfg.LeaseHardLimit.Milliseconds()}, nil
}
