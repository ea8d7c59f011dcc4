package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
)

// transferBlock copies this node's replica to the targets (HDFS
// DataNode.transferBlock / DataTransfer): it reads the visible bytes (or
// bytes_to_send of them), verifying every chunk, and writes them through a
// WriteBlock pipeline with a transfer stage. The copy carries this node's
// stored GS, which must be at least the caller's. A length that ends inside
// a chunk is sent as a short last chunk with its checksum recomputed.
func (s *Server) transferBlock(ctx context.Context, req *pb.TransferBlockRequest) (*pb.TransferBlockResponse, error) {
	if err := s.validateTransfer(req); err != nil {
		return nil, s.toStatus(err)
	}
	br, err := s.store.OpenBlock(req.GetPool(), replica.Block{ID: req.GetBlockId(), GS: req.GetGs()})
	if err != nil {
		return nil, s.toStatus(err)
	}
	defer br.Close()
	info := br.Replica()
	n := br.Length()
	if want := req.GetBytesToSend(); want > 0 {
		if want > n {
			return nil, s.statusErr(codes.OutOfRange, "TRANSFER_BEYOND_VISIBLE_LENGTH", fmt.Sprintf("bytes to send %d > visible length %d", want, n))
		}
		n = want
	}
	if br.BytesPerChecksum() != blockio.ChunkSize {
		return nil, s.statusErr(codes.FailedPrecondition, "UNSUPPORTED_CHUNK_SIZE", fmt.Sprintf("replica has %d-byte chunks, the wire carries %d", br.BytesPerChecksum(), blockio.ChunkSize))
	}
	targets := req.GetTargets()
	conn, err := s.peers.get(targets[0])
	if err != nil {
		return nil, s.toStatus(err)
	}
	log := s.log.With("pool", req.GetPool(), "block-id", req.GetBlockId(), "gs", info.GS, "stage", req.GetStage().String(), "targets", targets)
	setup := &pb.WriteSetup{
		Pool: req.GetPool(), BlockId: req.GetBlockId(), Gs: info.GS, Stage: req.GetStage(),
		ExpectedLength: n, Targets: targets[1:], ClientName: "node:" + s.cfg.ID,
	}
	p, err := blockio.Open(ctx, conn, setup, blockio.Options{Address: targets[0]})
	if err != nil {
		s.metrics.transfers.WithLabelValues("failed").Inc()
		log.Warn("transfer setup failed", "error", err)
		return nil, s.pipelineStatus(err)
	}
	if err := s.sendReplica(ctx, p, br, req.GetPool(), n); err != nil {
		p.Abort()
		s.metrics.transfers.WithLabelValues("failed").Inc()
		log.Warn("transfer failed", "error", err)
		return nil, s.pipelineStatus(err)
	}
	if err := p.Flush(ctx); err != nil {
		p.Abort()
		s.metrics.transfers.WithLabelValues("failed").Inc()
		return nil, s.pipelineStatus(err)
	}
	if err := p.Close(); err != nil {
		s.metrics.transfers.WithLabelValues("failed").Inc()
		return nil, s.pipelineStatus(err)
	}
	s.metrics.transfers.WithLabelValues("ok").Inc()
	log.Info("block transferred", "bytes", n)
	return &pb.TransferBlockResponse{Gs: info.GS, BytesSent: n}, nil
}

func (s *Server) validateTransfer(req *pb.TransferBlockRequest) error {
	if err := validateBlockRef(req.GetPool(), req.GetBlockId(), req.GetGs()); err != nil {
		return err
	}
	switch req.GetStage() {
	case pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, pb.BlockStage_BLOCK_STAGE_TRANSFER_TEMPORARY:
	default:
		return badRequest(pb.ReasonBadSetup, fmt.Sprintf("transfer stage %v: want a TRANSFER stage", req.GetStage()))
	}
	if n := len(req.GetTargets()); n == 0 || n > s.cfg.MaxTargets+1 {
		return badRequest(pb.ReasonBadSetup, fmt.Sprintf("%d targets: want 1..%d", n, s.cfg.MaxTargets+1))
	}
	for _, t := range req.GetTargets() {
		if err := validateAddr(t); err != nil {
			return badRequest(pb.ReasonBadSetup, fmt.Sprintf("target %.64q: %v", t, err))
		}
	}
	if b := req.GetBytesToSend(); b < 0 || b > maxBlockLength {
		return badRequest(pb.ReasonBadSetup, fmt.Sprintf("bytes to send %d", b))
	}
	return nil
}

// sendReplica sends [0, n) of br as packets, the last one flagged.
func (s *Server) sendReplica(ctx context.Context, p *blockio.Pipeline, br replica.BlockReader, pool string, n int64) error {
	buf := make([]byte, blockio.MaxPacketData)
	for off := int64(0); ; {
		want := min(int64(len(buf)), (n-off+blockio.ChunkSize-1)/blockio.ChunkSize*blockio.ChunkSize)
		var k int
		if want > 0 {
			var err error
			k, _, err = br.ReadChunks(off, buf[:want])
			if err == io.EOF {
				return fmt.Errorf("replica ended at %d of %d bytes", off, n)
			}
			if err != nil {
				s.readFailed(pool, br.Replica(), err)
				return err
			}
		}
		// The pipeline keeps unacked packets: each gets its own bytes.
		data := append([]byte(nil), buf[:min(int64(k), n-off)]...)
		last := off+int64(len(data)) >= n
		if _, err := p.Send(ctx, blockio.Packet{Offset: off, Data: data, Last: last}); err != nil {
			return err
		}
		off += int64(len(data))
		if last {
			return nil
		}
	}
}

// pipelineStatus turns a transfer failure into the caller's status: a
// target's failure keeps its code and reason.
func (s *Server) pipelineStatus(err error) error {
	var pe *blockio.Error
	if errors.As(err, &pe) {
		return s.statusErr(pe.Code, pe.Reason, fmt.Sprintf("transfer target %d (%s): %s", pe.Index, pe.Address, pe.Msg))
	}
	return s.toStatus(err)
}
