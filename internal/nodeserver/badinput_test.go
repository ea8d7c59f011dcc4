package nodeserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawWrite runs a WriteBlock stream with hand-made messages and returns
// every ack and the stream's final status (nil when it ended cleanly).
func rawWrite(t *testing.T, ctx context.Context, n *testNode, msgs ...*pb.WritePacket) ([]*pb.WriteAck, error) {
	t.Helper()
	stream, err := n.client.WriteBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			break // the server ended the stream; Recv says why
		}
	}
	stream.CloseSend()
	var acks []*pb.WriteAck
	for {
		ack, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return acks, nil
		}
		if err != nil {
			return acks, err
		}
		acks = append(acks, ack)
	}
}

func setupMsg(s *pb.WriteSetup) *pb.WritePacket {
	return &pb.WritePacket{Msg: &pb.WritePacket_Setup{Setup: s}}
}

func packetMsg(seq, off int64, data []byte) *pb.WritePacket {
	return &pb.WritePacket{Msg: &pb.WritePacket_Packet{Packet: &pb.Packet{Seqno: seq, Offset: off, Data: data, Checksums: blockio.Checksums(data)}}}
}

// writeFinalized writes a whole block to n alone.
func writeFinalized(t *testing.T, ctx context.Context, n *testNode, id, gs uint64, data []byte) {
	t.Helper()
	p, err := blockio.Open(ctx, n.conn, createSetup(id, gs), blockio.Options{Address: n.addr})
	if err != nil {
		t.Fatal(err)
	}
	pkts := blockio.SplitPackets(data, 0, 64<<10)
	pkts[len(pkts)-1].Last = true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// Bad input over gRPC gets the exact code, leaves the replica as it was and
// the server serving (invariant 7).
func TestBadInput(t *testing.T) {
	ctx := testCtx(t)
	var full atomic.Bool
	n := startNode(t, "n1", func(c *Config) {
		c.diskUsage = func(string) (replica.DiskUsage, error) {
			if full.Load() {
				return replica.DiskUsage{Capacity: 1 << 30, Available: 4096}, nil
			}
			return replica.DiskUsage{Capacity: 1 << 40, Available: 1 << 39}, nil
		}
	})
	const good, goodGS = 1, 100
	data := randomBytes(10_000, 4)
	writeFinalized(t, ctx, n, good, goodGS, data)
	// stillServing: the finalized block reads back whole after every case.
	stillServing := func(t *testing.T) {
		t.Helper()
		checkFinalized(t, n, good, goodGS, data)
	}
	visible := func(pool string, id, gs uint64) error {
		_, err := n.client.GetReplicaVisibleLength(ctx, &pb.GetReplicaVisibleLengthRequest{Pool: pool, BlockId: id, Gs: gs})
		return err
	}

	t.Run("unknown pool", func(t *testing.T) {
		wantCode(t, visible("BP-nope", good, goodGS), codes.NotFound, "BLOCK_POOL_NOT_FOUND")
		_, err := rawWrite(t, ctx, n, setupMsg(&pb.WriteSetup{Pool: "BP-nope", BlockId: 2, Gs: 1, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE}))
		wantCode(t, err, codes.NotFound, "BLOCK_POOL_NOT_FOUND")
		_, err = n.client.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: "BP-nope"})
		wantCode(t, err, codes.NotFound, "BLOCK_POOL_NOT_FOUND")
		stillServing(t)
	})
	t.Run("path characters in pool ids", func(t *testing.T) {
		for _, pool := range []string{"../BP-1", "BP-1/../../x", "/etc", ".", "", strings.Repeat("a", 129)} {
			wantCode(t, visible(pool, good, goodGS), codes.InvalidArgument, pb.ReasonBadSetup)
			_, err := rawWrite(t, ctx, n, setupMsg(&pb.WriteSetup{Pool: pool, BlockId: 3, Gs: 1, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE}))
			wantCode(t, err, codes.InvalidArgument, pb.ReasonBadSetup)
			_, err = n.client.BlockReport(ctx, &pb.BlockReportRequest{Pool: pool})
			wantCode(t, err, codes.InvalidArgument, pb.ReasonBadSetup)
		}
		stillServing(t)
	})
	t.Run("wrong GS", func(t *testing.T) {
		wantCode(t, visible(testPool, good, goodGS+1), codes.FailedPrecondition, "REPLICA_GS_OLDER")
		stream, err := n.client.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: testPool, BlockId: good, Gs: goodGS + 1})
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, err, codes.FailedPrecondition, "REPLICA_GS_OLDER")
		// Append at a GS the replica does not have.
		_, err = rawWrite(t, ctx, n, setupMsg(&pb.WriteSetup{Pool: testPool, BlockId: good, Gs: goodGS - 1, NewGs: goodGS + 5,
			MinBytesRcvd: int64(len(data)), Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND}))
		wantCode(t, err, codes.FailedPrecondition, "GS_MISMATCH")
		// A new GS that is not newer.
		_, err = rawWrite(t, ctx, n, setupMsg(&pb.WriteSetup{Pool: testPool, BlockId: good, Gs: goodGS, NewGs: goodGS,
			Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND}))
		wantCode(t, err, codes.InvalidArgument, pb.ReasonBadSetup)
		// Creating a block that exists.
		_, err = rawWrite(t, ctx, n, setupMsg(createSetup(good, goodGS+1)))
		wantCode(t, err, codes.AlreadyExists, "REPLICA_EXISTS")
		stillServing(t)
	})
	t.Run("lengths beyond the replica", func(t *testing.T) {
		stream, err := n.client.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: testPool, BlockId: good, Gs: goodGS, Length: int64(len(data)) + 1})
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, err, codes.OutOfRange, "READ_BEYOND_VISIBLE_LENGTH")
		_, err = n.client.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: testPool, BlockId: good, Gs: goodGS,
			Targets: []string{n.addr}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, BytesToSend: int64(len(data)) + 1})
		wantCode(t, err, codes.OutOfRange, "TRANSFER_BEYOND_VISIBLE_LENGTH")
		// Append with a length the replica does not have.
		_, err = rawWrite(t, ctx, n, setupMsg(&pb.WriteSetup{Pool: testPool, BlockId: good, Gs: goodGS, NewGs: goodGS + 1,
			MinBytesRcvd: int64(len(data)) + 512, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND}))
		wantCode(t, err, codes.OutOfRange, "LENGTH_MISMATCH")
		stillServing(t)
	})
	t.Run("bad checksum", func(t *testing.T) {
		const id = 20
		first := randomBytes(1024, 5)
		second := packetMsg(1, 1024, randomBytes(1024, 6))
		second.GetPacket().Checksums[1] ^= 1
		acks, err := rawWrite(t, ctx, n, setupMsg(createSetup(id, 7)), packetMsg(0, 0, first), second)
		wantCode(t, err, codes.DataLoss, pb.ReasonChecksumMismatch)
		last := acks[len(acks)-1]
		if last.GetSeqno() != 1 || blockio.FirstBad(last.GetStatuses()) != 0 || codes.Code(last.GetStatuses()[0].GetCode()) != codes.DataLoss {
			t.Fatalf("last ack %v, want packet 1 failing on node 0 with DataLoss", last)
		}
		waitFor(t, "writer released", func() bool { return !getReplica(t, n, id).HasWriter })
		if ri := getReplica(t, n, id); ri.State != replica.StateRBW || ri.NumBytes != 1024 || ri.BytesAcked != 1024 {
			t.Fatalf("replica after a bad packet: %+v", ri)
		}
		stillServing(t)
	})
	t.Run("seqnos", func(t *testing.T) {
		for i, tc := range []struct {
			name string
			seqs []int64
		}{{"duplicated", []int64{0, 0}}, {"backwards", []int64{5, 4}}, {"gap", []int64{0, 2}}, {"negative", []int64{-1}}} {
			t.Run(tc.name, func(t *testing.T) {
				id := uint64(30 + i)
				msgs := []*pb.WritePacket{setupMsg(createSetup(id, 7))}
				for k, seq := range tc.seqs {
					msgs = append(msgs, packetMsg(seq, int64(k)*512, randomBytes(512, uint64(k))))
				}
				_, err := rawWrite(t, ctx, n, msgs...)
				reason := pb.ReasonSeqnoOutOfOrder
				if tc.seqs[0] < 0 {
					reason = pb.ReasonBadPacket
				}
				wantCode(t, err, codes.InvalidArgument, reason)
				waitFor(t, "writer released", func() bool { return !getReplica(t, n, id).HasWriter })
				if ri := getReplica(t, n, id); ri.NumBytes != int64(512*(len(tc.seqs)-1)) {
					t.Fatalf("replica has %d bytes, want only the good packets'", ri.NumBytes)
				}
			})
		}
		stillServing(t)
	})
	t.Run("oversized packets", func(t *testing.T) {
		_, err := rawWrite(t, ctx, n, setupMsg(createSetup(40, 7)), packetMsg(0, 0, make([]byte, blockio.MaxPacketData+512)))
		wantCode(t, err, codes.InvalidArgument, pb.ReasonPacketTooLarge)
		// Beyond the gRPC message limit the transport refuses it.
		_, err = rawWrite(t, ctx, n, setupMsg(createSetup(41, 7)), packetMsg(0, 0, make([]byte, 1<<20)))
		wantCode(t, err, codes.ResourceExhausted, "")
		for _, id := range []uint64{40, 41} {
			waitFor(t, "writer released", func() bool { return !getReplica(t, n, id).HasWriter })
			if ri := getReplica(t, n, id); ri.NumBytes != 0 {
				t.Fatalf("blk_%d has %d bytes", id, ri.NumBytes)
			}
		}
		// Misaligned offsets and a wrong checksum count.
		bad := packetMsg(0, 100, make([]byte, 512))
		_, err = rawWrite(t, ctx, n, setupMsg(createSetup(42, 7)), bad)
		wantCode(t, err, codes.InvalidArgument, pb.ReasonBadPacket)
		bad = packetMsg(0, 0, make([]byte, 1024))
		bad.GetPacket().Checksums = bad.GetPacket().Checksums[:1]
		_, err = rawWrite(t, ctx, n, setupMsg(createSetup(43, 7)), bad)
		wantCode(t, err, codes.InvalidArgument, pb.ReasonBadPacket)
		// A gap past the bytes on disk.
		_, err = rawWrite(t, ctx, n, setupMsg(createSetup(44, 7)), packetMsg(0, 1024, make([]byte, 512)))
		wantCode(t, err, codes.OutOfRange, "PACKET_GAP")
		stillServing(t)
	})
	t.Run("bad setups", func(t *testing.T) {
		many := make([]string, blockio.MaxTargets+1)
		for i := range many {
			many[i] = "127.0.0.1:1"
		}
		for name, s := range map[string]*pb.WriteSetup{
			"too many targets": createSetup(50, 7, many...),
			"bad target":       createSetup(50, 7, "no-port"),
			"long client name": {Pool: testPool, BlockId: 50, Gs: 7, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, ClientName: strings.Repeat("x", 300)},
			"no stage":         {Pool: testPool, BlockId: 50, Gs: 7},
			"block id 0":       {Pool: testPool, Gs: 7, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE},
			"negative length":  {Pool: testPool, BlockId: 50, Gs: 7, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, ExpectedLength: -1},
			"min above max": {Pool: testPool, BlockId: 50, Gs: 7, NewGs: 8, MinBytesRcvd: 10, MaxBytesRcvd: 5,
				Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY},
		} {
			_, err := rawWrite(t, ctx, n, setupMsg(s))
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: %v, want InvalidArgument", name, err)
			}
		}
		// A packet first.
		_, err := rawWrite(t, ctx, n, packetMsg(0, 0, nil))
		wantCode(t, err, codes.InvalidArgument, pb.ReasonBadSetup)
		if _, err := n.srv.Store().GetReplica(testPool, 50); replica.KindOf(err) != replica.KindNotFound {
			t.Fatalf("a refused setup left a replica: %v", err)
		}
		stillServing(t)
	})
	t.Run("a dead downstream node", func(t *testing.T) {
		dead := startNode(t, "dead")
		dead.kill()
		acks, err := rawWrite(t, ctx, n, setupMsg(createSetup(60, 7, dead.addr)))
		wantCode(t, err, codes.Aborted, pb.ReasonDownstreamFailed)
		if len(acks) != 1 || blockio.FirstBad(acks[0].GetStatuses()) != 1 || acks[0].GetStatuses()[1].GetAddress() != dead.addr {
			t.Fatalf("setup acks %v, want node 1 (%s) failed", acks, dead.addr)
		}
		stillServing(t)
	})
	t.Run("full volume", func(t *testing.T) {
		full.Store(true)
		_, err := rawWrite(t, ctx, n, setupMsg(createSetup(70, 7)))
		wantCode(t, err, codes.ResourceExhausted, "DISK_OUT_OF_SPACE")
		if _, err := n.srv.Store().GetReplica(testPool, 70); replica.KindOf(err) != replica.KindNotFound {
			t.Fatalf("a refused create left a replica: %v", err)
		}
		stillServing(t)
		full.Store(false)
		writeFinalized(t, ctx, n, 70, 7, data)
		checkFinalized(t, n, 70, 7, data)
	})
}
