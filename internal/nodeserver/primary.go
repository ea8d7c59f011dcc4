package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// primaryCallTimeout bounds one initReplicaRecovery or
// updateReplicaUnderRecovery call on one location; a command's deadline
// shortens it to a quarter of the time left (at least a second), so a dead
// participant cannot use up the attempt.
const primaryCallTimeout = 20 * time.Second

// callTimeout is the per-location call bound for cmd at now.
func callTimeout(cmd *clusterpb.RecoverBlockCommand, now time.Time) time.Duration {
	d := cmd.GetDeadlineUnixNanos()
	if d == 0 {
		return primaryCallTimeout
	}
	return min(primaryCallTimeout, max(time.Until(time.Unix(0, d))/4, time.Second))
}

// commitDeadline is how long the primary retries its commit while the
// coordinators answer Unavailable (no leader yet, or a new leader in safe
// mode that refuses commits until the nodes have reported, design
// §R9.12): until the recovery's deadline — past it the coordinator re-drives
// the recovery with a new id and refuses this one — but at least
// linkCommitMinWindow.
func commitDeadline(cmd *clusterpb.RecoverBlockCommand, now time.Time) time.Time {
	least := now.Add(linkCommitMinWindow)
	if d := cmd.GetDeadlineUnixNanos(); d != 0 {
		if t := time.Unix(0, d); t.After(least) {
			return t
		}
	}
	return least
}

// recoverBlock runs one block recovery as its primary (design §R4.1) and
// commits it. A plan that fails (preempted by a newer recovery, every
// location failed, ...) ends the attempt without a commit: the
// coordinator's attempt timeout re-drives it with a new id.
func (l *coordLink) recoverBlock(ctx context.Context, cmd *clusterpb.RecoverBlockCommand) error {
	ctx, cancel := context.WithTimeout(ctx, linkRecoveryTimeout)
	defer cancel()
	log := l.log.With("block-id", cmd.GetBlockId(), "gs", cmd.GetGs(), "recovery-id", cmd.GetRecoveryId(), "path", cmd.GetPath())
	c, err := l.s.syncRecovery(ctx, l.pool, cmd)
	if err != nil {
		log.Warn("block recovery failed: no commit", "error", err)
		return err
	}
	req := &clusterpb.CommitBlockSyncRequest{
		NodeId: l.s.cfg.ID, BlockId: c.BlockID, RecoveryId: c.RecoveryID, NewGs: c.NewGS, NewLength: u64(c.NewLength),
		CloseFile: c.CloseFile, DeleteBlock: c.DeleteBlock, OldGs: c.OldGS,
	}
	for _, t := range c.Targets {
		req.Targets = append(req.Targets, string(t))
	}
	cctx, ccancel := context.WithDeadline(ctx, commitDeadline(cmd, time.Now()))
	defer ccancel()
	err = l.call(cctx, linkCommitRounds, func(ctx context.Context, nl clusterpb.NodeLinkClient) error {
		_, err := nl.CommitBlockSynchronization(ctx, req)
		return err
	})
	switch code := status.Code(err); {
	case err == nil:
		log.Info("block recovery committed", "new-length", c.NewLength, "targets", req.Targets, "delete", c.DeleteBlock)
	case code == codes.Aborted || code == codes.FailedPrecondition:
		// A stale or preempted recovery id: the coordinator is right.
		log.Info("block recovery commit refused", "error", err)
	default:
		log.Warn("block recovery commit failed", "error", err)
	}
	return err
}

// syncRecovery is the primary's work before the commit: initReplicaRecovery
// on every location (this node's own directly), the plan, and
// updateReplicaUnderRecovery on every participant. It returns the commit.
func (s *Server) syncRecovery(ctx context.Context, pool string, cmd *clusterpb.RecoverBlockCommand) (lr.CommitRequest, error) {
	locs := cmd.GetLocations()
	if cmd.GetBlockId() == 0 || cmd.GetRecoveryId() == 0 || len(locs) == 0 || len(locs) > 2*s.cfg.MaxTargets+2 {
		return lr.CommitRequest{}, fmt.Errorf("bad recovery command: block %d, recovery id %d, %d locations", cmd.GetBlockId(), cmd.GetRecoveryId(), len(locs))
	}
	b := lr.Block{ID: cmd.GetBlockId(), GS: cmd.GetGs(), NumBytes: int64(cmd.GetNumBytes()), Recovery: lr.Recovery{ID: cmd.GetRecoveryId()}}
	byNode := make(map[lr.NodeID]*pb.NodeLocation, len(locs))
	for _, loc := range locs {
		byNode[lr.NodeID(loc.GetNodeId())] = loc
	}

	replies := make([]lr.ReplicaReply, len(locs))
	var wg sync.WaitGroup
	callT := callTimeout(cmd, time.Now())
	for i, loc := range locs {
		wg.Go(func() { replies[i] = s.initRecoveryAt(ctx, pool, b, loc, callT) })
	}
	wg.Wait()
	plan, err := lr.PlanRecovery(b, replies)
	if err != nil {
		return lr.CommitRequest{}, err
	}
	s.log.Info("block recovery plan", "block-id", b.ID, "recovery-id", b.Recovery.ID, "action", plan.Action.String(),
		"participants", len(plan.Participants), "new-length", plan.NewLength, "reason", plan.Reason)

	var synced []lr.NodeID
	if plan.Action == lr.PlanSync {
		// Test-only failpoint (Config.FailpointRecoveryPause): the
		// participants are RUR under this recovery id; nothing is updated
		// or committed yet.
		if d, prefix, _ := parseRecoveryPause(s.cfg.FailpointRecoveryPause); d > 0 && strings.HasPrefix(cmd.GetPath(), prefix) {
			s.log.Warn("failpoint recovery-pause: the primary sleeps before updateReplicaUnderRecovery", "block-id", b.ID,
				"recovery-id", b.Recovery.ID, "path", cmd.GetPath(), "pause", d)
			if !sleepCtx(ctx, d) {
				return lr.CommitRequest{}, ctx.Err()
			}
		}
		ok := make([]bool, len(plan.Participants))
		for i, rep := range plan.Participants {
			wg.Go(func() {
				err := s.updateRecoveryAt(ctx, pool, b, rep, plan.NewLength, byNode[rep.Node], callTimeout(cmd, time.Now()))
				if err != nil {
					s.log.Warn("update replica under recovery failed", "block-id", b.ID, "node", rep.Node, "error", err)
					return
				}
				ok[i] = true
			})
		}
		wg.Wait()
		for i, rep := range plan.Participants {
			if ok[i] {
				synced = append(synced, rep.Node)
			}
		}
	}
	return lr.BuildCommit(b, plan, synced)
}

// dataNodeAt is the DataNode client of a location: nil for this node.
func (s *Server) dataNodeAt(loc *pb.NodeLocation) (pb.DataNodeClient, error) {
	if loc.GetNodeId() == s.cfg.ID {
		return nil, nil
	}
	if err := validateAddr(loc.GetGrpcAddr()); err != nil {
		return nil, fmt.Errorf("location %s: %w", loc.GetNodeId(), err)
	}
	conn, err := s.peers.get(loc.GetGrpcAddr())
	if err != nil {
		return nil, err
	}
	return pb.NewDataNodeClient(conn), nil
}

func (s *Server) initRecoveryAt(ctx context.Context, pool string, b lr.Block, loc *pb.NodeLocation, timeout time.Duration) lr.ReplicaReply {
	reply := lr.ReplicaReply{Node: lr.NodeID(loc.GetNodeId()), Kind: lr.ReplyFailed}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := &pb.InitReplicaRecoveryRequest{Pool: pool, BlockId: b.ID, Gs: b.GS, NumBytes: b.NumBytes, RecoveryId: b.Recovery.ID}
	var resp *pb.InitReplicaRecoveryResponse
	client, err := s.dataNodeAt(loc)
	if err == nil {
		if client == nil {
			resp, err = s.initReplicaRecovery(ctx, req)
		} else {
			resp, err = client.InitReplicaRecovery(ctx, req)
		}
	}
	switch {
	case err != nil && recoveryInProgress(err):
		reply.Kind = lr.ReplyRecoveryInProgress
	case err != nil:
		s.log.Info("init replica recovery failed", "block-id", b.ID, "node", loc.GetNodeId(), "error", err)
	case !resp.GetFound():
		reply.Kind = lr.ReplyNoReplica
	case resp.GetOriginalState() == pb.ReplicaState_REPLICA_STATE_UNSPECIFIED:
		s.log.Info("init replica recovery: no state", "block-id", b.ID, "node", loc.GetNodeId())
	default:
		reply.Kind = lr.ReplyReplica
		reply.State = lr.ReplicaState(resp.GetOriginalState() - 1) // the wire is ordinal + 1
		reply.GS, reply.NumBytes = resp.GetGs(), resp.GetBytesOnDisk()
	}
	return reply
}

// recoveryInProgress: a recovery with an equal or higher id owns the
// replica (replica.KindRecoveryInProgress on the wire).
func recoveryInProgress(err error) bool {
	if status.Code(err) != codes.Aborted {
		return false
	}
	switch statusReason(err) {
	case "RECOVERY_IN_PROGRESS", "PREEMPTED":
		return true
	}
	return false
}

func (s *Server) updateRecoveryAt(ctx context.Context, pool string, b lr.Block, rep lr.ReplicaReply, newLength int64, loc *pb.NodeLocation, timeout time.Duration) error {
	if loc == nil {
		return errors.New("participant is not a location")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := &pb.UpdateReplicaUnderRecoveryRequest{
		Pool: pool, BlockId: b.ID, Gs: rep.GS, NumBytes: rep.NumBytes, RecoveryId: b.Recovery.ID, NewBlockId: b.ID, NewLength: newLength,
	}
	client, err := s.dataNodeAt(loc)
	if err != nil {
		return err
	}
	if client == nil {
		_, err = s.updateReplicaUnderRecovery(ctx, req)
	} else {
		_, err = client.UpdateReplicaUnderRecovery(ctx, req)
	}
	return err
}
