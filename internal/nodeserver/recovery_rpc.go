package nodeserver

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/replica"
)

// initReplicaRecovery is the first half of block recovery on this location
// (design §R2.12): the replica becomes RUR under recoveryId and its original
// bytes on disk, GS and state are returned. No replica → found = false.
func (s *Server) initReplicaRecovery(ctx context.Context, req *pb.InitReplicaRecoveryRequest) (*pb.InitReplicaRecoveryResponse, error) {
	if err := validateBlockRef(req.GetPool(), req.GetBlockId(), req.GetGs()); err != nil {
		return nil, s.toStatus(err)
	}
	if req.GetRecoveryId() == 0 || req.GetNumBytes() < 0 {
		return nil, s.toStatus(badRequest(pb.ReasonBadSetup, "recovery id must be > 0 and num bytes >= 0"))
	}
	b := replica.Block{ID: req.GetBlockId(), GS: req.GetGs(), NumBytes: req.GetNumBytes()}
	info, err := s.store.InitReplicaRecovery(ctx, req.GetPool(), b, req.GetRecoveryId())
	if err != nil {
		s.log.Info("init replica recovery refused", "pool", req.GetPool(), "block-id", b.ID, "recovery-id", req.GetRecoveryId(), "error", err)
		return nil, s.toStatus(err)
	}
	if info == nil {
		return &pb.InitReplicaRecoveryResponse{Found: false, BlockId: b.ID}, nil
	}
	s.log.Info("replica under recovery", "pool", req.GetPool(), "block-id", b.ID, "recovery-id", req.GetRecoveryId(),
		"gs", info.GS, "bytes-on-disk", info.BytesOnDisk, "original-state", info.OriginalState.String())
	return &pb.InitReplicaRecoveryResponse{
		Found: true, BlockId: info.ID, BytesOnDisk: info.BytesOnDisk, Gs: info.GS, OriginalState: stateToPB(info.OriginalState),
	}, nil
}

// updateReplicaUnderRecovery is the second half (design §R2.13): truncate to
// the agreed length, GS := recoveryId, FINALIZED.
func (s *Server) updateReplicaUnderRecovery(ctx context.Context, req *pb.UpdateReplicaUnderRecoveryRequest) (*pb.UpdateReplicaUnderRecoveryResponse, error) {
	if err := validateBlockRef(req.GetPool(), req.GetBlockId(), req.GetGs()); err != nil {
		return nil, s.toStatus(err)
	}
	if req.GetRecoveryId() == 0 || req.GetNumBytes() < 0 || req.GetNewLength() < 0 {
		return nil, s.toStatus(badRequest(pb.ReasonBadSetup, "recovery id must be > 0, lengths >= 0"))
	}
	old := replica.Block{ID: req.GetBlockId(), GS: req.GetGs(), NumBytes: req.GetNumBytes()}
	info, err := s.store.UpdateReplicaUnderRecovery(ctx, req.GetPool(), old, req.GetRecoveryId(), req.GetNewBlockId(), req.GetNewLength())
	if err != nil {
		s.log.Info("update replica under recovery refused", "pool", req.GetPool(), "block-id", old.ID, "recovery-id", req.GetRecoveryId(), "error", err)
		return nil, s.toStatus(err)
	}
	s.log.Info("replica recovered", "pool", req.GetPool(), "block-id", old.ID, "recovery-id", req.GetRecoveryId(), "length", info.NumBytes)
	return &pb.UpdateReplicaUnderRecoveryResponse{Replica: replicaToPB(info)}, nil
}
