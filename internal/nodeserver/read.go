package nodeserver

import (
	"context"
	"fmt"
	"io"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
)

// readBlock streams a replica's visible bytes with their checksums (HDFS
// BlockSender). Every chunk is verified as it is read; a corrupt replica
// is reported as a bad block and the stream ends with DataLoss.
func (s *Server) readBlock(req *pb.ReadBlockRequest, stream pb.DataNode_ReadBlockServer) error {
	if err := validateBlockRef(req.GetPool(), req.GetBlockId(), req.GetGs()); err != nil {
		return s.toStatus(err)
	}
	if req.GetOffset() < 0 || req.GetLength() < 0 || req.GetOffset() > maxBlockLength || req.GetLength() > maxBlockLength {
		return s.toStatus(badRequest(pb.ReasonBadSetup, fmt.Sprintf("offset %d and length %d must be in [0, %d]", req.GetOffset(), req.GetLength(), int64(maxBlockLength))))
	}
	br, err := s.store.OpenBlock(req.GetPool(), replica.Block{ID: req.GetBlockId(), GS: req.GetGs()})
	if err != nil {
		return s.toStatus(err)
	}
	defer br.Close()
	visible := br.Length()
	end := visible
	if req.GetLength() > 0 {
		end = req.GetOffset() + req.GetLength()
	}
	if req.GetOffset() > visible || end > visible {
		return s.statusErr(codes.OutOfRange, "READ_BEYOND_VISIBLE_LENGTH",
			fmt.Sprintf("read [%d, %d) beyond the visible length %d", req.GetOffset(), end, visible))
	}
	bpc := int64(br.BytesPerChecksum())
	buf := make([]byte, max(bpc, blockio.MaxPacketData/bpc*bpc))
	off := req.GetOffset() / bpc * bpc
	sent := false
	for off < end {
		if err := stream.Context().Err(); err != nil {
			return s.toStatus(err)
		}
		want := min(int64(len(buf)), (end-off+bpc-1)/bpc*bpc)
		n, sums, err := br.ReadChunks(off, buf[:want])
		if err == io.EOF {
			break
		}
		if err != nil {
			s.readFailed(req.GetPool(), br.Replica(), err)
			return s.toStatus(err)
		}
		chunk := &pb.ReadChunk{Offset: off, Data: buf[:n], Checksums: sums, BytesPerChecksum: uint32(bpc)}
		if !sent {
			chunk.VisibleLength = visible
		}
		// Send marshals the message before it returns: buf is reusable.
		if err := stream.Send(chunk); err != nil {
			return err
		}
		s.metrics.readBytes.Add(float64(n))
		sent = true
		off += int64(n)
	}
	if !sent {
		return stream.Send(&pb.ReadChunk{Offset: off, BytesPerChecksum: uint32(bpc), VisibleLength: visible})
	}
	return nil
}

// readFailed reports a replica found corrupt by a read.
func (s *Server) readFailed(pool string, info replica.ReplicaInfo, err error) {
	if replica.KindOf(err) != replica.KindCorrupt {
		return
	}
	s.reportBadBlock(replica.BadBlock{Pool: pool, Block: info.Block(), StorageID: info.StorageID, Reason: replica.ReasonOf(err)})
}

func (s *Server) visibleLength(_ context.Context, req *pb.GetReplicaVisibleLengthRequest) (*pb.GetReplicaVisibleLengthResponse, error) {
	if err := validateBlockRef(req.GetPool(), req.GetBlockId(), req.GetGs()); err != nil {
		return nil, s.toStatus(err)
	}
	n, err := s.store.GetReplicaVisibleLength(req.GetPool(), replica.Block{ID: req.GetBlockId(), GS: req.GetGs()})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.GetReplicaVisibleLengthResponse{VisibleLength: n}, nil
}
