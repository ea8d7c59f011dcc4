package nodeserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
)

// A block written through three nodes, hflushed and read while being
// written, then finished: every replica FINALIZED, byte-identical, every
// chunk verifies.
func TestPipelineThreeNodes(t *testing.T) {
	ctx := testCtx(t)
	a, b, c := startNode(t, "n1"), startNode(t, "n2"), startNode(t, "n3")
	nodes := []*testNode{a, b, c}
	const id, gs = 1, 1001
	data := randomBytes(300<<10+777, 1)
	flushAt := int64(200<<10 + 300) // inside a chunk

	p, err := blockio.Open(ctx, a.conn, createSetup(id, gs, b.addr, c.addr), blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	pkts := blockio.SplitPackets(data[:flushAt], 0, 64<<10)
	pkts[len(pkts)-1].Sync = true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Acked() != flushAt {
		t.Fatalf("acked %d, want %d", p.Acked(), flushAt)
	}
	// hflush: every node shows the flushed length to readers, mid-write.
	for _, n := range nodes {
		resp, err := n.client.GetReplicaVisibleLength(ctx, &pb.GetReplicaVisibleLengthRequest{Pool: testPool, BlockId: id, Gs: gs})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetVisibleLength() != flushAt {
			t.Fatalf("%s: visible length %d, want %d", n.srv.ID(), resp.GetVisibleLength(), flushAt)
		}
		got, visible := readAll(t, ctx, n, id, gs, 0, 0)
		if visible != flushAt || !bytes.Equal(got, data[:flushAt]) {
			t.Fatalf("%s: read %d bytes (visible %d) mid-write, want the first %d", n.srv.ID(), len(got), visible, flushAt)
		}
		if st := getReplica(t, n, id).State; st != replica.StateRBW {
			t.Fatalf("%s: state %v mid-write", n.srv.ID(), st)
		}
	}
	// A read from the middle of a chunk.
	if got, _ := readAll(t, ctx, b, id, gs, 1000, 3000); !bytes.Equal(got, data[1000:4000]) {
		t.Fatal("read [1000, 4000) differs")
	}

	// The rest, resending the partial chunk; hsync and finish at the end.
	pkts = blockio.SplitPackets(data, flushAt, 64<<10)
	pkts[len(pkts)-1].Last, pkts[len(pkts)-1].Fsync = true, true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !p.Finished() || p.Acked() != int64(len(data)) {
		t.Fatalf("finished %v, acked %d of %d", p.Finished(), p.Acked(), len(data))
	}
	for _, n := range nodes {
		checkFinalized(t, n, id, gs, data)
	}

	// The node's metrics and health endpoints reflect the write.
	body := httpGet(t, "http://"+a.srv.HTTPAddr()+"/metrics")
	for _, want := range []string{"logbook_node_bytes_written_total", `logbook_node_replicas{pool="BP-1",state="FINALIZED"} 1`,
		"logbook_node_packets_received_total", "logbook_node_volume_available_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if body := httpGet(t, "http://"+a.srv.HTTPAddr()+"/healthz"); strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %q", body)
	}
}

// checkFinalized: n's replica is FINALIZED at gs with exactly data, and
// every chunk verifies (server side on read, client side in readAll).
func checkFinalized(t *testing.T, n *testNode, id, gs uint64, data []byte) {
	t.Helper()
	ri := getReplica(t, n, id)
	if ri.State != replica.StateFinalized || ri.GS != gs || ri.NumBytes != int64(len(data)) {
		t.Fatalf("%s: replica %v GS %d len %d, want FINALIZED GS %d len %d", n.srv.ID(), ri.State, ri.GS, ri.NumBytes, gs, len(data))
	}
	got, _ := readAll(t, testCtx(t), n, id, gs, 0, 0)
	if !bytes.Equal(got, data) {
		t.Fatalf("%s: replica bytes differ from what was written", n.srv.ID())
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The middle node dies mid-stream: the client learns it was node 1, runs
// streaming recovery on the survivors with a new GS, fills a replacement
// node by TransferBlock (TRANSFER_RBW) at a non-chunk-aligned acked length,
// resends from the acked length and finishes (design §R5.3, §R7 items 19, 20,
// 22).
func TestPipelineRecoveryAfterMiddleNodeDies(t *testing.T) {
	ctx := testCtx(t)
	a, b, c, d := startNode(t, "n1"), startNode(t, "n2"), startNode(t, "n3"), startNode(t, "n4")
	const id, gs, newGS = 7, 5000, 5001
	data := randomBytes(400<<10+123, 2)
	flushAt := int64(128<<10 + 1000) // acked length inside a chunk

	p, err := blockio.Open(ctx, a.conn, createSetup(id, gs, b.addr, c.addr), blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	pkts := blockio.SplitPackets(data[:flushAt], 0, 64<<10)
	pkts[len(pkts)-1].Sync = true
	if err := sendAll(t, ctx, p, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	b.kill()
	// The next packets (resending the partial chunk) cannot be acked.
	more := blockio.SplitPackets(data[:flushAt+100<<10], flushAt, 64<<10)
	sendErr := sendAll(t, ctx, p, more)
	if sendErr == nil {
		sendErr = p.Flush(ctx)
	}
	var pe *blockio.Error
	if !errors.As(sendErr, &pe) {
		t.Fatalf("pipeline error %v, want a *blockio.Error", sendErr)
	}
	if pe.Index != 1 || pe.Address != b.addr {
		t.Fatalf("failed node %d (%s), want 1 (%s): %v", pe.Index, pe.Address, b.addr, pe)
	}
	acked, sent := p.Acked(), p.Sent()
	if acked != flushAt || sent <= acked {
		t.Fatalf("acked %d sent %d, want acked %d < sent", acked, sent, flushAt)
	}
	p.Abort()

	// A replacement node gets the survivors' acked bytes, at the old GS.
	tr, err := a.client.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: testPool, BlockId: id, Gs: gs,
		Targets: []string{d.addr}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW})
	if err != nil {
		t.Fatal(err)
	}
	if tr.GetBytesSent() != acked || tr.GetGs() != gs {
		t.Fatalf("transfer sent %d bytes at GS %d, want %d at %d", tr.GetBytesSent(), tr.GetGs(), acked, gs)
	}
	if ri := getReplica(t, d, id); ri.State != replica.StateRBW || ri.BytesAcked != acked || ri.GS != gs || ri.HasWriter {
		t.Fatalf("replacement replica %+v, want RBW acked %d GS %d without writer", ri, acked, gs)
	}

	// Streaming recovery on a, c, d with a new GS; resend from acked.
	setup := &pb.WriteSetup{Pool: testPool, BlockId: id, Gs: gs, NewGs: newGS,
		Stage:        pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		MinBytesRcvd: acked, MaxBytesRcvd: sent, Targets: []string{c.addr, d.addr}, ClientName: "test-client"}
	p2, err := blockio.Open(ctx, a.conn, setup, blockio.Options{Address: a.addr})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, c, d} {
		if ri := getReplica(t, n, id); ri.GS != newGS || ri.NumBytes != acked {
			t.Fatalf("%s after recovery setup: GS %d len %d, want %d and %d", n.srv.ID(), ri.GS, ri.NumBytes, newGS, acked)
		}
	}
	pkts = blockio.SplitPackets(data, acked, 64<<10)
	pkts[len(pkts)-1].Last = true
	if err := sendAll(t, ctx, p2, pkts); err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, c, d} {
		checkFinalized(t, n, id, newGS, data)
	}
}

// Block recovery through the DataNode RPCs: three RBW replicas of
// different lengths are initialized under a recovery id, truncated to the
// shortest and finalized with GS = recovery id (design §R4.1, §R7 item 5).
func TestBlockRecoveryRPCs(t *testing.T) {
	ctx := testCtx(t)
	nodes := []*testNode{startNode(t, "n1"), startNode(t, "n2"), startNode(t, "n3")}
	const id, gs, rid = 9, 300, 301
	data := randomBytes(80_000, 3)
	lengths := []int64{100*512 + 100, 120*512 + 7, 150 * 512}
	for i, n := range nodes {
		p, err := blockio.Open(ctx, n.conn, createSetup(id, gs), blockio.Options{Address: n.addr})
		if err != nil {
			t.Fatal(err)
		}
		pkts := blockio.SplitPackets(data[:lengths[i]], 0, 64<<10)
		pkts[len(pkts)-1].Sync = true
		if err := sendAll(t, ctx, p, pkts); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil { // the writer goes away: RBW stays
			t.Fatal(err)
		}
		waitFor(t, "writer released", func() bool { return !getReplica(t, n, id).HasWriter })
	}

	// The primary's part (design §R4.1): init everywhere, pick the length.
	var infos []*pb.InitReplicaRecoveryResponse
	for _, n := range nodes {
		info, err := n.client.InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{Pool: testPool, BlockId: id, Gs: gs, RecoveryId: rid})
		if err != nil {
			t.Fatal(err)
		}
		if !info.GetFound() || info.GetOriginalState() != pb.ReplicaState_REPLICA_STATE_RBW || info.GetGs() != gs {
			t.Fatalf("init: %v", info)
		}
		infos = append(infos, info)
	}
	// The same or an older recovery id is refused: a recovery owns the replica.
	_, err := nodes[0].client.InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{Pool: testPool, BlockId: id, Gs: gs, RecoveryId: rid})
	wantCode(t, err, codes.Aborted, "RECOVERY_IN_PROGRESS")
	// No such replica: found = false.
	if info, err := nodes[0].client.InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{Pool: testPool, BlockId: 999, Gs: gs, RecoveryId: rid}); err != nil || info.GetFound() {
		t.Fatalf("init of a missing replica: %v %v", info, err)
	}
	newLen := infos[0].GetBytesOnDisk()
	for _, info := range infos {
		newLen = min(newLen, info.GetBytesOnDisk())
	}
	if newLen != lengths[0] {
		t.Fatalf("new length %d, want %d", newLen, lengths[0])
	}
	// Growing a replica is refused and changes nothing.
	_, err = nodes[0].client.UpdateReplicaUnderRecovery(ctx, &pb.UpdateReplicaUnderRecoveryRequest{Pool: testPool, BlockId: id,
		Gs: gs, NumBytes: infos[0].GetBytesOnDisk(), RecoveryId: rid, NewBlockId: id, NewLength: newLen + 1})
	wantCode(t, err, codes.OutOfRange, "CANNOT_GROW")
	for i, n := range nodes {
		resp, err := n.client.UpdateReplicaUnderRecovery(ctx, &pb.UpdateReplicaUnderRecoveryRequest{Pool: testPool, BlockId: id,
			Gs: infos[i].GetGs(), NumBytes: infos[i].GetBytesOnDisk(), RecoveryId: rid, NewBlockId: id, NewLength: newLen})
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.GetReplica(); r.GetState() != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.GetGs() != rid || r.GetNumBytes() != newLen {
			t.Fatalf("%s after update: %v", n.srv.ID(), r)
		}
	}
	for _, n := range nodes {
		checkFinalized(t, n, id, rid, data[:newLen])
	}
	// A stale recovery id now changes nothing (invariant 5).
	_, err = nodes[1].client.InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{Pool: testPool, BlockId: id, Gs: gs, RecoveryId: rid})
	wantCode(t, err, codes.FailedPrecondition, "REPLICA_GS_NOT_BELOW_RECOVERY_ID")
	checkFinalized(t, nodes[1], id, rid, data[:newLen])

	// The block report shows the finalized replica.
	rep, err := nodes[2].client.BlockReport(ctx, &pb.BlockReportRequest{Pool: testPool})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GetStorages()) != 1 || len(rep.GetStorages()[0].GetReplicas()) != 1 ||
		rep.GetStorages()[0].GetReplicas()[0].GetState() != pb.ReplicaState_REPLICA_STATE_FINALIZED {
		t.Fatalf("block report %v", rep)
	}
}
