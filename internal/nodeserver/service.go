package nodeserver

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/replica"
)

// dataService is the DataNode gRPC service: it translates messages into
// calls on the dataset; the work is in the files named after each call.
type dataService struct {
	pb.UnimplementedDataNodeServer
	s *Server
}

var _ pb.DataNodeServer = (*dataService)(nil)

func (d *dataService) WriteBlock(stream pb.DataNode_WriteBlockServer) error {
	return d.s.writeBlock(stream)
}

func (d *dataService) ReadBlock(req *pb.ReadBlockRequest, stream pb.DataNode_ReadBlockServer) error {
	return d.s.readBlock(req, stream)
}

func (d *dataService) GetReplicaVisibleLength(ctx context.Context, req *pb.GetReplicaVisibleLengthRequest) (*pb.GetReplicaVisibleLengthResponse, error) {
	return d.s.visibleLength(ctx, req)
}

func (d *dataService) TransferBlock(ctx context.Context, req *pb.TransferBlockRequest) (*pb.TransferBlockResponse, error) {
	return d.s.transferBlock(ctx, req)
}

func (d *dataService) InitReplicaRecovery(ctx context.Context, req *pb.InitReplicaRecoveryRequest) (*pb.InitReplicaRecoveryResponse, error) {
	return d.s.initReplicaRecovery(ctx, req)
}

func (d *dataService) UpdateReplicaUnderRecovery(ctx context.Context, req *pb.UpdateReplicaUnderRecoveryRequest) (*pb.UpdateReplicaUnderRecoveryResponse, error) {
	return d.s.updateReplicaUnderRecovery(ctx, req)
}

func (d *dataService) VolumeInfo(context.Context, *pb.VolumeInfoRequest) (*pb.VolumeInfoResponse, error) {
	out := &pb.VolumeInfoResponse{NodeId: d.s.cfg.ID, Pools: d.s.store.BlockPools()}
	for _, v := range d.s.store.VolumeInfo() {
		out.Volumes = append(out.Volumes, &pb.Volume{
			Path: v.Path, StorageId: v.StorageID, StorageType: v.StorageType.String(),
			Capacity: v.Capacity, Free: v.Free, Available: v.Available, Used: v.Used,
			Reserved: v.Reserved, ReservedForReplicas: v.ReservedForReplicas, NumBlocks: int64(v.NumBlocks),
			Failed: v.Failed, FailureReason: v.FailureReason,
		})
	}
	return out, nil
}

func (d *dataService) ListReplicas(_ context.Context, req *pb.ListReplicasRequest) (*pb.ListReplicasResponse, error) {
	if err := validatePool(req.GetPool()); err != nil {
		return nil, d.s.toStatus(err)
	}
	infos, err := d.s.store.Replicas(req.GetPool())
	if err != nil {
		return nil, d.s.toStatus(err)
	}
	out := &pb.ListReplicasResponse{Replicas: make([]*pb.Replica, len(infos))}
	for i, ri := range infos {
		out.Replicas[i] = replicaToPB(ri)
	}
	return out, nil
}

func (d *dataService) BlockReport(_ context.Context, req *pb.BlockReportRequest) (*pb.BlockReportResponse, error) {
	if err := validatePool(req.GetPool()); err != nil {
		return nil, d.s.toStatus(err)
	}
	reports, err := d.s.store.BlockReport(req.GetPool())
	if err != nil {
		return nil, d.s.toStatus(err)
	}
	out := &pb.BlockReportResponse{NodeId: d.s.cfg.ID, Pool: req.GetPool()}
	for _, r := range reports {
		sr := &pb.StorageBlockReport{StorageId: r.StorageID, StorageType: r.StorageType.String(), Failed: r.Failed,
			Replicas: make([]*pb.ReportedReplica, len(r.Replicas))}
		for i, rr := range r.Replicas {
			sr.Replicas[i] = &pb.ReportedReplica{BlockId: rr.ID, Gs: rr.GS, NumBytes: rr.NumBytes, State: stateToPB(rr.State)}
		}
		out.Storages = append(out.Storages, sr)
	}
	return out, nil
}

// GossipKeyring applies a gossip keyring operation for a coordinator's
// GossipKeyring (security.go lets only coordinators call it).
func (d *dataService) GossipKeyring(_ context.Context, req *pb.MemberGossipKeyringRequest) (*pb.MemberGossipKeyringResponse, error) {
	keys, err := gossipkeys.Apply(d.s.keyring, d.s.log, req.GetOp(), req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.MemberGossipKeyringResponse{Keys: keys}, nil
}

func (d *dataService) ShutdownNode(_ context.Context, req *pb.ShutdownNodeRequest) (*pb.ShutdownNodeResponse, error) {
	if err := d.s.requestShutdown(req.GetForRestart()); err != nil {
		return nil, err
	}
	return &pb.ShutdownNodeResponse{}, nil
}

// stateToPB maps a replica state to the wire (ordinal + 1).
func stateToPB(st replica.State) pb.ReplicaState {
	if st > replica.StateTemporary {
		return pb.ReplicaState_REPLICA_STATE_UNSPECIFIED
	}
	return pb.ReplicaState(st + 1)
}

func replicaToPB(r replica.ReplicaInfo) *pb.Replica {
	out := &pb.Replica{
		Pool: r.Pool, BlockId: r.ID, Gs: r.GS, State: stateToPB(r.State), NumBytes: r.NumBytes,
		BytesOnDisk: r.BytesOnDisk, BytesAcked: r.BytesAcked, VisibleLength: r.VisibleLength,
		StorageId: r.StorageID, StorageType: r.StorageType.String(), VolumePath: r.VolumePath,
		HasWriter: r.HasWriter, Cached: r.Cached,
	}
	if r.State == replica.StateRUR {
		out.OriginalState, out.RecoveryId = stateToPB(r.OriginalState), r.RecoveryID
	}
	return out
}
