package nodeserver

import (
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
)

// Append to a finalized block whose length ends inside a chunk (the
// partial chunk is resent), then a failure while closing is recovered with
// PIPELINE_CLOSE_RECOVERY (design §R2.4, §R2.7, §R7 item 23).
func TestAppendThenCloseRecovery(t *testing.T) {
	ctx := testCtx(t)
	a, b := startNode(t, "n1"), startNode(t, "n2")
	const id = 11
	data := randomBytes(90_000, 11)
	first := int64(70_001)

	p, err := blockio.Open(ctx, a.conn, createSetup(id, 10, b.addr), blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	pkts := blockio.SplitPackets(data[:first], 0, 64<<10)
	pkts[len(pkts)-1].Last = true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	setup := &pb.WriteSetup{Pool: testPool, BlockId: id, Gs: 10, NewGs: 11, MinBytesRcvd: first,
		Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, Targets: []string{b.addr}}
	p, err = blockio.Open(ctx, a.conn, setup, blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	pkts = blockio.SplitPackets(data, first, 8<<10)
	pkts[len(pkts)-1].Sync = true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The close fails (the stream ends without the last packet).
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, b} {
		waitFor(t, "writer released", func() bool { return !getReplica(t, n, id).HasWriter })
		if ri := getReplica(t, n, id); ri.State != replica.StateRBW || ri.GS != 11 || ri.BytesAcked != int64(len(data)) {
			t.Fatalf("%s after append: %+v", n.srv.ID(), ri)
		}
	}
	setup = &pb.WriteSetup{Pool: testPool, BlockId: id, Gs: 11, NewGs: 12, MinBytesRcvd: int64(len(data)),
		Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY, Targets: []string{b.addr}}
	p, err = blockio.Open(ctx, a.conn, setup, blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, b} {
		checkFinalized(t, n, id, 12, data)
	}
}

// Re-replication: a FINALIZED replica copied to two new nodes through one
// transfer pipeline, and a prefix that ends inside a chunk copied as RBW.
func TestTransferBlock(t *testing.T) {
	ctx := testCtx(t)
	src, x, y, z := startNode(t, "src"), startNode(t, "x"), startNode(t, "y"), startNode(t, "z")
	const id, gs = 21, 40
	data := randomBytes(200_000+3, 21)
	writeFinalized(t, ctx, src, id, gs, data)

	resp, err := src.client.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: testPool, BlockId: id, Gs: gs,
		Targets: []string{x.addr, y.addr}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetBytesSent() != int64(len(data)) {
		t.Fatalf("sent %d bytes", resp.GetBytesSent())
	}
	checkFinalized(t, x, id, gs, data)
	checkFinalized(t, y, id, gs, data)

	const part = 100_001
	if _, err := src.client.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: testPool, BlockId: id, Gs: gs,
		Targets: []string{z.addr}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, BytesToSend: part}); err != nil {
		t.Fatal(err)
	}
	ri := getReplica(t, z, id)
	if ri.State != replica.StateRBW || ri.NumBytes != part || ri.BytesAcked != part {
		t.Fatalf("RBW copy %+v", ri)
	}
	got, _ := readAll(t, ctx, z, id, gs, 0, 0)
	if string(got) != string(data[:part]) {
		t.Fatal("RBW copy differs")
	}
	// A second copy onto a node that has the replica at the same GS is refused.
	_, err = src.client.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: testPool, BlockId: id, Gs: gs,
		Targets: []string{x.addr}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED})
	wantCode(t, err, codes.AlreadyExists, "REPLICA_EXISTS")
	checkFinalized(t, x, id, gs, data)
}
