package coordserver

import (
	"context"
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/clusterpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/protobuf/proto"
)

// Bounds of the node reports.
const (
	maxReportReplicas    = 1 << 20
	maxIncrementalChange = 10000
)

// nodeLinkService is the storage nodes' API: registration (replicated),
// heartbeats and block reports (leader soft state, the block manager's),
// recovery commits (replicated). It checks and converts; the block
// manager decides.
type nodeLinkService struct {
	clusterpb.UnimplementedNodeLinkServer
	s *Server
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

func storages(reps []*pb.StorageReport) []blocks.Storage {
	out := make([]blocks.Storage, len(reps))
	for i, r := range reps {
		out[i] = blocks.Storage{ID: r.StorageId, Capacity: r.Capacity, Used: r.Used, Free: r.Free, Failed: r.Failed}
	}
	return out
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
	if !s.gossipAdmits(req.Node.Id) {
		return &clusterpb.NodeRegisterResponse{ClusterId: s.cfg.ClusterID, AwaitingGossip: true}, nil
	}
	node := proto.Clone(req.Node).(*fsmpb.NodeRecord)
	node.RegisteredUnixNanos, node.UpdatedUnixNanos = 0, 0
	rec, err := s.blocks.Register(node, storages(req.Storages))
	if err != nil {
		return nil, s.fsErr(err)
	}
	return &clusterpb.NodeRegisterResponse{Node: proto.Clone(rec).(*fsmpb.NodeRecord), ClusterId: s.cfg.ClusterID, BlockKeys: s.heartbeatKeys()}, nil
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
	r, err := s.blocks.Heartbeat(blocks.Heartbeat{NodeID: req.NodeId, Storages: storages(req.Storages), Cache: blocks.CacheReport{
		Capacity: req.Cache.GetCapacity(), Used: req.Cache.GetUsed(), BlockIDs: req.Cache.GetBlockIds(),
	}})
	if err != nil {
		return nil, s.fsErr(err)
	}
	return &clusterpb.NodeHeartbeatResponse{SafeMode: r.SafeMode, Commands: nodeCommands(r.Work), BlockKeys: s.heartbeatKeys()}, nil
}

// nodeCommands is w as heartbeat reply commands: re-register, full
// report, recoveries, transfers, one invalidation, uncache, cache.
func nodeCommands(w blocks.Work) []*clusterpb.NodeCommand {
	var out []*clusterpb.NodeCommand
	cmd := func(c any) {
		nc := &clusterpb.NodeCommand{}
		switch c := c.(type) {
		case *clusterpb.ReRegisterCommand:
			nc.Command = &clusterpb.NodeCommand_ReRegister{ReRegister: c}
		case *clusterpb.SendFullReportCommand:
			nc.Command = &clusterpb.NodeCommand_SendFullReport{SendFullReport: c}
		case *clusterpb.RecoverBlockCommand:
			nc.Command = &clusterpb.NodeCommand_RecoverBlock{RecoverBlock: c}
		case *clusterpb.TransferCommand:
			nc.Command = &clusterpb.NodeCommand_Transfer{Transfer: c}
		case *clusterpb.InvalidateCommand:
			nc.Command = &clusterpb.NodeCommand_Invalidate{Invalidate: c}
		case *clusterpb.UncacheCommand:
			nc.Command = &clusterpb.NodeCommand_Uncache{Uncache: c}
		case *clusterpb.CacheCommand:
			nc.Command = &clusterpb.NodeCommand_Cache{Cache: c}
		}
		out = append(out, nc)
	}
	if w.ReRegister {
		cmd(&clusterpb.ReRegisterCommand{})
	}
	if w.SendFullReport {
		cmd(&clusterpb.SendFullReportCommand{})
	}
	for _, r := range w.Recover {
		cmd(&clusterpb.RecoverBlockCommand{
			BlockId: r.BlockID, Gs: r.GS, NumBytes: r.NumBytes, RecoveryId: r.RecoveryID, Path: r.Path,
			Locations: nodeLocations(r.Locations), DeadlineUnixNanos: r.DeadlineUnixNanos,
		})
	}
	for _, t := range w.Transfers {
		cmd(&clusterpb.TransferCommand{Block: t.Block, Targets: nodeLocations(t.Targets)})
	}
	if len(w.Invalidate) > 0 {
		cmd(&clusterpb.InvalidateCommand{Blocks: w.Invalidate})
	}
	if len(w.Uncache) > 0 {
		cmd(&clusterpb.UncacheCommand{Blocks: w.Uncache})
	}
	if len(w.Cache) > 0 {
		cmd(&clusterpb.CacheCommand{Blocks: w.Cache})
	}
	return out
}

func nodeLocations(ls []blocks.Location) []*pb.NodeLocation {
	out := make([]*pb.NodeLocation, len(ls))
	for i, l := range ls {
		out[i] = &pb.NodeLocation{NodeId: l.NodeID, GrpcAddr: l.Addr}
	}
	return out
}

// toRuleReplicaState maps the wire replica state to the rules' (ok false
// for UNSPECIFIED or unknown values).
func toRuleReplicaState(st pb.ReplicaState) (lr.ReplicaState, bool) {
	switch st {
	case pb.ReplicaState_REPLICA_STATE_FINALIZED:
		return lr.ReplicaFinalized, true
	case pb.ReplicaState_REPLICA_STATE_RBW:
		return lr.ReplicaRBW, true
	case pb.ReplicaState_REPLICA_STATE_RWR:
		return lr.ReplicaRWR, true
	case pb.ReplicaState_REPLICA_STATE_RUR:
		return lr.ReplicaRUR, true
	case pb.ReplicaState_REPLICA_STATE_TEMPORARY:
		return lr.ReplicaTemporary, true
	}
	return 0, false
}

// apiReplicaState is toRuleReplicaState's inverse.
func apiReplicaState(st lr.ReplicaState) pb.ReplicaState {
	switch st {
	case lr.ReplicaFinalized:
		return pb.ReplicaState_REPLICA_STATE_FINALIZED
	case lr.ReplicaRBW:
		return pb.ReplicaState_REPLICA_STATE_RBW
	case lr.ReplicaRWR:
		return pb.ReplicaState_REPLICA_STATE_RWR
	case lr.ReplicaRUR:
		return pb.ReplicaState_REPLICA_STATE_RUR
	case lr.ReplicaTemporary:
		return pb.ReplicaState_REPLICA_STATE_TEMPORARY
	}
	return pb.ReplicaState_REPLICA_STATE_UNSPECIFIED
}

// replica checks and converts one reported replica.
func (s *Server) replica(r *pb.ReportedReplica) (blocks.Replica, error) {
	if r == nil {
		return blocks.Replica{}, s.badRequest("report: empty replica")
	}
	st, ok := toRuleReplicaState(r.State)
	if !ok {
		return blocks.Replica{}, s.badRequest(fmt.Sprintf("report: block %d in replica state %v", r.BlockId, r.State))
	}
	if r.NumBytes < 0 || r.NumBytes > fsm.MaxBlockSize {
		return blocks.Replica{}, s.badRequest(fmt.Sprintf("report: block %d of %d bytes", r.BlockId, r.NumBytes))
	}
	return blocks.Replica{BlockID: r.BlockId, GS: r.Gs, NumBytes: r.NumBytes, State: st}, nil
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
	report := make([]blocks.StorageReplicas, len(req.Storages))
	for i, st := range req.Storages {
		total += len(st.Replicas)
		if total > maxReportReplicas {
			return nil, s.badRequest(fmt.Sprintf("report of more than %d replicas", maxReportReplicas))
		}
		report[i] = blocks.StorageReplicas{StorageID: st.StorageId, Failed: st.Failed, Replicas: make([]blocks.Replica, len(st.Replicas))}
		for j, r := range st.Replicas {
			rep, err := s.replica(r)
			if err != nil {
				return nil, err
			}
			report[i].Replicas[j] = rep
		}
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if err := s.blocks.BlockReport(ctx, req.NodeId, report); err != nil {
		return nil, s.fsErr(err)
	}
	return &clusterpb.NodeReportResponse{}, nil
}

func (l *nodeLinkService) IncrementalReport(ctx context.Context, req *clusterpb.NodeIncrementalReportRequest) (*clusterpb.NodeReportResponse, error) {
	s := l.s
	if err := s.checkFSName("node id", req.NodeId); err != nil {
		return nil, err
	}
	if len(req.Changes) > maxIncrementalChange {
		return nil, s.badRequest(fmt.Sprintf("%d changes, at most %d", len(req.Changes), maxIncrementalChange))
	}
	changes := make([]blocks.Change, len(req.Changes))
	for i, c := range req.Changes {
		switch c.Change {
		case clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED:
			if c.Replica == nil {
				return nil, s.badRequest("report: deleted change without a replica")
			}
			// A deleted replica's state and length do not matter.
			changes[i] = blocks.Change{Deleted: true, StorageID: c.StorageId, Replica: blocks.Replica{BlockID: c.Replica.BlockId, GS: c.Replica.Gs}}
		case clusterpb.ReplicaChange_REPLICA_CHANGE_UNSPECIFIED:
			return nil, s.badRequest(fmt.Sprintf("report: unknown change %v", c.Change))
		default:
			if c.Change > clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED {
				return nil, s.badRequest(fmt.Sprintf("report: unknown change %v", c.Change))
			}
			rep, err := s.replica(c.Replica)
			if err != nil {
				return nil, err
			}
			changes[i] = blocks.Change{StorageID: c.StorageId, Replica: rep}
		}
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	if err := s.blocks.IncrementalReport(req.NodeId, changes); err != nil {
		return nil, s.fsErr(err)
	}
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
	r, err := s.blocks.CommitBlockSync(&fsmpb.CommitBlockSyncOp{
		BlockId: req.BlockId, RecoveryId: req.RecoveryId, NewGs: req.NewGs, NewLength: req.NewLength, CloseFile: req.CloseFile,
		DeleteBlock: req.DeleteBlock, Targets: req.Targets, OldGs: req.OldGs,
	}, req.NodeId)
	if err != nil {
		err = s.fsErr(err)
		s.metrics.recoveryCommits.WithLabelValues(errReason(err)).Inc()
		return nil, err
	}
	s.metrics.recoveryCommits.WithLabelValues("ok").Inc()
	return &clusterpb.CommitBlockSyncResponse{Result: proto.Clone(r.Result).(*fsmpb.NamespaceResult)}, nil
}

// ReportBadBlocks (NodeLink): a node's scanners and reads; the reporter
// must be a registered node.
func (l *nodeLinkService) ReportBadBlocks(ctx context.Context, req *pb.ReportBadBlocksRequest) (*pb.ReportBadBlocksResponse, error) {
	return l.s.reportBadBlocks(ctx, req, true)
}

func (s *Server) reportBadBlocks(ctx context.Context, req *pb.ReportBadBlocksRequest, fromNode bool) (*pb.ReportBadBlocksResponse, error) {
	if err := s.checkFSName("reporter", req.Reporter); err != nil {
		return nil, err
	}
	if len(req.Replicas) == 0 || len(req.Replicas) > blocks.MaxBadReplicas {
		return nil, s.badRequest(fmt.Sprintf("%d bad replicas: want 1..%d", len(req.Replicas), blocks.MaxBadReplicas))
	}
	bad := make([]blocks.BadReplica, len(req.Replicas))
	for i, r := range req.Replicas {
		if r.BlockId == 0 || r.Gs == 0 {
			return nil, s.badRequest(fmt.Sprintf("bad replica: block %d at GS %d", r.BlockId, r.Gs))
		}
		if err := s.checkFSName("node id", r.NodeId); err != nil {
			return nil, err
		}
		if len(r.Reason) > fsm.MaxReasonBytes {
			return nil, s.badRequest(fmt.Sprintf("reason of %d bytes, at most %d", len(r.Reason), fsm.MaxReasonBytes))
		}
		bad[i] = blocks.BadReplica{BlockID: r.BlockId, GS: r.Gs, NodeID: r.NodeId, Reason: r.Reason}
	}
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	accepted, err := s.blocks.ReportBadBlocks(req.Reporter, fromNode, bad)
	if err != nil {
		return nil, s.fsErr(err)
	}
	return &pb.ReportBadBlocksResponse{Accepted: accepted}, nil
}
