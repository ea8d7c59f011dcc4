package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// restartNode starts n's node again on the same gRPC address and volumes
// (n.conn reconnects to it).
func restartNode(t *testing.T, n *testNode) {
	t.Helper()
	cfg := n.srv.Config()
	cfg.GRPCAddr, cfg.HTTPAddr = n.addr, "127.0.0.1:0"
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("restart %s: %v", cfg.ID, err)
	}
	n.srv = srv
	t.Cleanup(func() { srv.Close() })
}

// openRetry opens a pipeline, retrying while a node is still unreachable
// (a restarted node's address is redialed after a backoff).
func openRetry(t *testing.T, ctx context.Context, n *testNode, setup *pb.WriteSetup) *blockio.Pipeline {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := blockio.Open(ctx, n.conn, setup, blockio.Options{Address: n.addr})
		var be *blockio.Error
		if err == nil {
			return p
		}
		if !errors.As(err, &be) || be.Code != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("open %v: %v", setup.GetStage(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShutdownForRestartResumesPipeline is the node side of design §R7
// scenario 26: a node of an open pipeline shuts down for a restart; the
// writer gets an out-of-band NODE_RESTARTING naming that node (relayed by
// the nodes upstream of it); the node's replica comes back RBW from its
// restart marker; a streaming recovery with the same three nodes resumes
// the block, and every replica ends FINALIZED and byte-identical.
func TestShutdownForRestartResumesPipeline(t *testing.T) {
	for victim := 0; victim < 3; victim++ {
		t.Run(fmt.Sprintf("node%d", victim+1), func(t *testing.T) {
			ctx := testCtx(t)
			nodes := []*testNode{startNode(t, "n1"), startNode(t, "n2"), startNode(t, "n3")}
			a := nodes[0]
			const id, gs = 1, 1001
			data := randomBytes(400<<10+123, uint64(victim))
			half := int64(200<<10 + 100)
			p := openRetry(t, ctx, a, createSetup(id, gs, nodes[1].addr, nodes[2].addr))
			pkts := blockio.SplitPackets(data[:half], 0, 64<<10)
			pkts[len(pkts)-1].Sync = true
			if err := sendAll(t, ctx, p, pkts); err != nil {
				t.Fatal(err)
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := nodes[victim].srv.ShutdownForRestart(); err != nil {
				t.Fatalf("shutdown for restart: %v", err)
			}
			// The next packet (or the ack reader, for the first node) meets
			// the out-of-band ack.
			more := int64(300 << 10)
			err := sendAll(t, ctx, p, blockio.SplitPackets(data[:more], half, 64<<10))
			if err == nil {
				err = p.Flush(ctx)
			}
			var be *blockio.Error
			if !errors.As(err, &be) || be.Index != victim || be.Reason != pb.ReasonNodeRestarting || be.Code != codes.Unavailable {
				t.Fatalf("pipeline error %v, want NODE_RESTARTING at node %d", err, victim)
			}
			acked, sent := p.Acked(), p.Sent()
			p.Abort()
			if acked < half {
				t.Fatalf("acked %d < %d", acked, half)
			}
			restartNode(t, nodes[victim])
			for _, n := range nodes {
				ri := getReplica(t, n, id)
				if ri.State != replica.StateRBW || ri.GS != gs || ri.BytesAcked < acked || ri.NumBytes > sent {
					t.Fatalf("%s after the restart: %+v, want RBW at GS %d holding [%d, %d] bytes", n.srv.ID(), ri, gs, acked, sent)
				}
			}
			// The writer's pipeline recovery with the same nodes.
			const newGS = gs + 1
			setup := &pb.WriteSetup{Pool: testPool, BlockId: id, Gs: gs, NewGs: newGS, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
				MinBytesRcvd: acked, MaxBytesRcvd: sent, Targets: []string{nodes[1].addr, nodes[2].addr}, ClientName: "test-client"}
			p = openRetry(t, ctx, a, setup)
			pkts = blockio.SplitPackets(data, acked, 64<<10)
			pkts[len(pkts)-1].Last = true
			if err := sendAll(t, ctx, p, pkts); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				checkFinalized(t, n, id, newGS, data)
			}
		})
	}
}

// TestShutdownForRestartMarkerExpiry: a node back after its
// --restart-replica-expiry reloads the replica RWR, and the writer's
// recovery through it is refused (the writer then drops the node).
func TestShutdownForRestartMarkerExpiry(t *testing.T) {
	ctx := testCtx(t)
	// The marker keeps whole milliseconds, rounded down: an expiry 1 ns
	// after the shutdown is already past when the node loads.
	n := startNode(t, "n1", func(c *Config) { c.RestartReplicaExpiry = time.Nanosecond })
	p := openRetry(t, ctx, n, createSetup(1, 10))
	data := randomBytes(5000, 9)
	if err := sendAll(t, ctx, p, blockio.SplitPackets(data, 0, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.srv.ShutdownForRestart(); err != nil {
		t.Fatal(err)
	}
	p.Abort()
	restartNode(t, n)
	if ri := getReplica(t, n, 1); ri.State != replica.StateRWR || ri.NumBytes != 5000 {
		t.Fatalf("after an expired restart: %+v, want RWR of 5000 bytes", ri)
	}
	setup := &pb.WriteSetup{Pool: testPool, BlockId: 1, Gs: 10, NewGs: 11, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		MinBytesRcvd: 5000, MaxBytesRcvd: 5000, ClientName: "test-client"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := blockio.Open(ctx, n.conn, setup, blockio.Options{Address: n.addr})
		var be *blockio.Error
		if errors.As(err, &be) && be.Code == codes.Unavailable && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !errors.As(err, &be) || be.Code != codes.NotFound || be.Reason != "NON_RBW_REPLICA" {
			t.Fatalf("recovery of an RWR replica: %v, want NotFound NON_RBW_REPLICA", err)
		}
		break
	}
}

// TestRestartingNodeRefusesPipelines: once a shutdown for restart began,
// a new client pipeline through the node is refused NODE_RESTARTING,
// whether the node is first or downstream; transfers are not client
// pipelines. ShutdownNode twice: the second is FailedPrecondition.
func TestRestartingNodeRefusesPipelines(t *testing.T) {
	ctx := testCtx(t)
	a, b := startNode(t, "n1"), startNode(t, "n2")
	rs := b.srv.restart
	rs.mu.Lock()
	rs.restart = true // the gate alone: the node keeps serving otherwise
	rs.mu.Unlock()
	var be *blockio.Error
	_, err := blockio.Open(ctx, b.conn, createSetup(1, 10), blockio.Options{Address: b.addr})
	if !errors.As(err, &be) || be.Index != 0 || be.Reason != pb.ReasonNodeRestarting || be.Code != codes.Unavailable {
		t.Fatalf("setup on a restarting node: %v", err)
	}
	_, err = blockio.Open(ctx, a.conn, createSetup(2, 10, b.addr), blockio.Options{Address: a.addr})
	if !errors.As(err, &be) || be.Index != 1 || be.Reason != pb.ReasonNodeRestarting {
		t.Fatalf("setup through a restarting node: %v", err)
	}
	tr := &pb.WriteSetup{Pool: testPool, BlockId: 3, Gs: 10, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, ExpectedLength: 10, ClientName: "test-client"}
	p, err := blockio.Open(ctx, b.conn, tr, blockio.Options{Address: b.addr})
	if err != nil {
		t.Fatalf("transfer setup on a restarting node: %v", err)
	}
	p.Abort()
	// The RPC: the first call starts the shutdown, a second is refused.
	if _, err := a.client.ShutdownNode(ctx, &pb.ShutdownNodeRequest{ForRestart: true}); err != nil {
		t.Fatal(err)
	}
	_, err = a.client.ShutdownNode(ctx, &pb.ShutdownNodeRequest{})
	if err == nil {
		t.Fatal("second ShutdownNode accepted")
	}
	if code := status.Code(err); code != codes.FailedPrecondition && code != codes.Unavailable {
		t.Fatalf("second ShutdownNode: %v", err)
	}
	// Run returns once the requested shutdown is done.
	runErr := make(chan error, 1)
	go func() { runErr <- a.srv.Run(context.Background()) }()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("run after ShutdownNode: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after ShutdownNode")
	}
}
