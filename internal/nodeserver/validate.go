package nodeserver

import (
	"fmt"
	"net"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
)

// Bounds on what the network may send (beyond the packet limits in
// blockio).
const (
	maxAddrLen       = 256
	maxClientNameLen = 256
	// maxBlockLength bounds offsets and lengths so that no sum overflows.
	maxBlockLength = 1 << 40
	// maxRecvMsgBytes is the gRPC receive limit: one full packet and its
	// checksums with room for the framing, or a setup with every target.
	maxRecvMsgBytes = blockio.MaxPacketData + 16<<10
)

// validatePool checks a block pool id before anything builds a path from it.
func validatePool(pool string) error {
	if err := replica.ValidatePoolID(pool); err != nil {
		return badRequest(pb.ReasonBadSetup, err.Error())
	}
	return nil
}

func validateBlockRef(pool string, id, gs uint64) error {
	if err := validatePool(pool); err != nil {
		return err
	}
	if id == 0 || gs == 0 {
		return badRequest(pb.ReasonBadSetup, "block id and generation stamp must be > 0")
	}
	return nil
}

// validateSetup checks a WriteSetup from the network; nothing has been
// touched yet.
func validateSetup(s *pb.WriteSetup, maxTargets int) error {
	if s == nil {
		return badRequest(pb.ReasonBadSetup, "the first message of WriteBlock must be a setup")
	}
	if err := validateBlockRef(s.GetPool(), s.GetBlockId(), s.GetGs()); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return badRequest(pb.ReasonBadSetup, fmt.Sprintf(format, args...))
	}
	switch st := s.GetStage(); st {
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND_RECOVERY,
		pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY, pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY:
		if s.GetNewGs() <= s.GetGs() {
			return bad("stage %v needs new_gs > gs, got %d <= %d", st, s.GetNewGs(), s.GetGs())
		}
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, pb.BlockStage_BLOCK_STAGE_TRANSFER_TEMPORARY,
		pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED:
		if s.GetNewGs() != 0 {
			return bad("stage %v takes no new_gs", st)
		}
	default:
		return bad("unknown stage %d", int32(st))
	}
	minB, maxB, exp := s.GetMinBytesRcvd(), s.GetMaxBytesRcvd(), s.GetExpectedLength()
	if minB < 0 || maxB < 0 || exp < 0 || minB > maxBlockLength || maxB > maxBlockLength || exp > maxBlockLength {
		return bad("lengths must be in [0, %d]", int64(maxBlockLength))
	}
	if s.GetStage() == pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY && minB > maxB {
		return bad("min bytes received %d > max %d", minB, maxB)
	}
	if len(s.GetTargets()) > maxTargets {
		return bad("%d targets, at most %d", len(s.GetTargets()), maxTargets)
	}
	for _, t := range s.GetTargets() {
		if err := validateAddr(t); err != nil {
			return bad("target %.64q: %v", t, err)
		}
	}
	if len(s.GetClientName()) > maxClientNameLen {
		return bad("client name of %d bytes, at most %d", len(s.GetClientName()), maxClientNameLen)
	}
	return nil
}

func validateAddr(a string) error {
	if a == "" || len(a) > maxAddrLen {
		return fmt.Errorf("want 1-%d bytes", maxAddrLen)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" || port == "" {
		return fmt.Errorf("want host:port")
	}
	return nil
}

// packetChecker validates the packets of one stream in order.
type packetChecker struct {
	started bool
	prev    int64
	done    bool // the last packet was seen
}

// check validates p against the stream so far: seqnos are consecutive,
// offsets chunk-aligned, data at most 64 KiB with one checksum per chunk.
// Checksum values are verified separately (verifyPacket).
func (c *packetChecker) check(p *pb.Packet) error {
	if p == nil {
		return badRequest(pb.ReasonBadPacket, "a setup may only be the first message")
	}
	seq := p.GetSeqno()
	switch {
	case c.done:
		return badRequest(pb.ReasonBadPacket, fmt.Sprintf("packet %d after the last packet of the block", seq))
	case seq < 0:
		return badRequest(pb.ReasonBadPacket, fmt.Sprintf("negative seqno %d", seq))
	case c.started && seq <= c.prev:
		return badRequest(pb.ReasonSeqnoOutOfOrder, fmt.Sprintf("seqno %d duplicated or out of order (previous %d)", seq, c.prev))
	case c.started && seq != c.prev+1:
		return badRequest(pb.ReasonSeqnoOutOfOrder, fmt.Sprintf("seqno %d skips ahead of %d", seq, c.prev+1))
	}
	n := len(p.GetData())
	switch {
	case n > blockio.MaxPacketData:
		return badRequest(pb.ReasonPacketTooLarge, fmt.Sprintf("packet of %d bytes, at most %d", n, blockio.MaxPacketData))
	case p.GetOffset() < 0 || p.GetOffset()%blockio.ChunkSize != 0 || p.GetOffset() > maxBlockLength:
		return badRequest(pb.ReasonBadPacket, fmt.Sprintf("offset %d: want a multiple of %d in [0, %d]", p.GetOffset(), blockio.ChunkSize, int64(maxBlockLength)))
	case len(p.GetChecksums()) != (n+blockio.ChunkSize-1)/blockio.ChunkSize:
		return badRequest(pb.ReasonBadPacket, fmt.Sprintf("%d data bytes need %d checksums, got %d", n, (n+blockio.ChunkSize-1)/blockio.ChunkSize, len(p.GetChecksums())))
	}
	c.started, c.prev = true, seq
	c.done = p.GetLastPacketInBlock()
	return nil
}

// verifyPacket checks the chunk checksums of a validated packet.
func verifyPacket(p *pb.Packet) error {
	if bad := blockio.Verify(p.GetData(), p.GetChecksums()); bad >= 0 {
		return &reqError{code: codes.DataLoss, reason: pb.ReasonChecksumMismatch,
			msg: fmt.Sprintf("packet %d: chunk %d (block offset %d) does not match its checksum", p.GetSeqno(), bad, p.GetOffset()+int64(bad)*blockio.ChunkSize)}
	}
	return nil
}
