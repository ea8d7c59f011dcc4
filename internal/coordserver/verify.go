package coordserver

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Verify replicates a checkpoint entry; every member records the digest of
// its state when it applies it, so the digests compare the members' states
// at exactly one index.
func (c *clusterService) Verify(ctx context.Context, _ *pb.VerifyRequest) (*pb.VerifyResponse, error) {
	s := c.s
	resp, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_CHECKPOINT, &fsmpb.CheckpointCommand{})
	if err != nil {
		return nil, err
	}
	cp := resp.(*fsm.Checkpoint)
	digest, err := cp.Wait(ctx)
	if err != nil {
		return nil, checkpointStatus(err)
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, s.toStatus(err)
	}
	servers := f.Configuration().Servers
	out := &pb.VerifyResponse{Index: cp.Index, Members: make([]*pb.MemberDigest, len(servers)), Consistent: true}
	var wg sync.WaitGroup
	for i, srv := range servers {
		md := &pb.MemberDigest{Id: string(srv.ID)}
		out.Members[i] = md
		if md.Id == s.cfg.ID {
			md.Digest = hex.EncodeToString(digest[:])
			continue
		}
		addr := s.memberGRPCAddr(md.Id)
		if addr == "" {
			md.Error = "gRPC address unknown"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err := s.peers.get(addr)
			var r *clusterpb.CheckpointDigestResponse
			if err == nil {
				// WaitForReady: a member that restarted moments ago is
				// answered once its connection is back, not refused from
				// the redial backoff.
				r, err = clusterpb.NewPeerClient(conn).CheckpointDigest(cctx, &clusterpb.CheckpointDigestRequest{Index: cp.Index}, grpc.WaitForReady(true))
			}
			if err != nil {
				md.Error = status.Convert(err).Message()
				return
			}
			md.Digest = hex.EncodeToString(r.Digest)
		}()
	}
	wg.Wait()
	for _, md := range out.Members {
		if md.Error != "" || md.Digest != out.Members[0].Digest {
			out.Consistent = false
		}
	}
	if !out.Consistent {
		s.log.Error("verify: members disagree or did not answer", "index", cp.Index, "members", out.Members)
	}
	return out, nil
}

func (p *peerService) CheckpointDigest(ctx context.Context, req *clusterpb.CheckpointDigestRequest) (*clusterpb.CheckpointDigestResponse, error) {
	s := p.s
	if err := s.fsm.WaitApplied(ctx, req.Index); err != nil {
		return nil, s.toStatus(err)
	}
	d, ok, err := s.fsm.CheckpointDigest(ctx, req.Index)
	if err != nil {
		return nil, checkpointStatus(err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no checkpoint recorded at index %d (restored from a later snapshot?)", req.Index)
	}
	return &clusterpb.CheckpointDigestResponse{Digest: d[:]}, nil
}

// checkpointStatus is the status of a checkpoint digest that could not be
// waited for: the caller's deadline, or later checkpoints replaced it.
func checkpointStatus(err error) error {
	if errors.Is(err, fsm.ErrCheckpointExpired) {
		return status.Errorf(codes.Aborted, "verify: %v; retry", err)
	}
	return status.FromContextError(err).Err()
}
