package coordserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// startNodes starts n real storage nodes joined to tc's coordinators and
// waits until the leader sees all of them live with a full report. opts
// adjust each node's config.
func startNodes(t *testing.T, e *fsEnv, n int, opts ...func(*nodeserver.Config)) []*nodeserver.Server {
	t.Helper()
	var nodes []*nodeserver.Server
	for i := 1; i <= n; i++ {
		nodes = append(nodes, e.tc.addNode(func(cfg *nodeserver.Config) {
			cfg.ID = fmt.Sprintf("dn%d", i)
			for _, o := range opts {
				o(cfg)
			}
		}))
	}
	eventually(t, 20*time.Second, "every node live with a full report", func() bool {
		r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
		if err != nil || len(r.Nodes) != n || r.SafeMode {
			return false
		}
		for _, s := range r.Nodes {
			if !s.Live || !s.FullReport {
				return false
			}
		}
		return true
	})
	return nodes
}

// TestLeaseRecoveryWithRealNodes is the heart of the coordinator: a writer
// streams a block to a 3-node pipeline, hflushes, sends a little more and
// dies. After the lease's hard limit the leader starts a block recovery,
// the primary node runs it (initReplicaRecovery, the plan,
// updateReplicaUnderRecovery on every participant) and commits it; the
// file is closed. Invariant 4: every participating replica has the same GS,
// the same length and the same bytes, and that length is at least what the
// writer saw acknowledged. Faults:
//   - none;
//   - the coordinator leader is killed as soon as the recovery is started
//     (the new leader resumes it from FSM state);
//   - one node restarts after the writer died, so its replica comes back
//     RWR: the RBW replicas win (design §R4.1), the RWR one is left out and,
//     now stale, invalidated by the leader, which then re-replicates the
//     block, one replica short, back onto that node.
func TestLeaseRecoveryWithRealNodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// afterWriterDied runs once the writer is gone; it returns the
		// index of a node whose replica must not take part (-1: none).
		afterWriterDied func(t *testing.T, e *fsEnv, nodes []*nodeserver.Server) int
	}{
		{"no-fault", func(*testing.T, *fsEnv, []*nodeserver.Server) int { return -1 }},
		{"leader-killed-during-recovery", func(t *testing.T, e *fsEnv, _ []*nodeserver.Server) int {
			eventually(t, 30*time.Second, "the recovery to start", func() bool {
				st, err := e.ns.Stat(e.ctx, &pb.StatRequest{Path: "/logs/app"})
				return err == nil && len(st.Blocks) == 1 && (st.Blocks[0].Recovery != nil || !st.File.UnderConstruction)
			})
			old := e.leader
			e.tc.kill(old)
			e.connect(e.tc.waitLeader())
			e.tc.start(old)
			return -1
		}},
		{"node-restarted-replica-rwr", func(t *testing.T, e *fsEnv, nodes []*nodeserver.Server) int {
			i := len(nodes) - 1
			nodes[i] = e.tc.restartNode(nodes[i])
			return i
		}},
	}
	for _, tcase := range cases {
		t.Run(tcase.name, func(t *testing.T) {
			e := newFSEnv(t, shortLeases, func(i int, c *Config) {
				c.FS.RecoveryTimeout = 20 * time.Second
				c.FS.NodeStaleInterval = 5 * time.Second
			})
			nodes := startNodes(t, e, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			if _, err := e.ns.Create(ctx, &pb.CreateRequest{Path: "/logs/app", Replication: 3, BlockSize: 1 << 20, ClientName: "writer-1"}); err != nil {
				t.Fatal(err)
			}
			ab, err := e.ns.AddBlock(ctx, &pb.AddBlockRequest{Path: "/logs/app", ClientName: "writer-1"})
			if err != nil {
				t.Fatal(err)
			}
			blk := ab.Result.Block
			if len(ab.Locations) != 3 {
				t.Fatalf("add block: %d locations", len(ab.Locations))
			}
			data := make([]byte, 300_000)
			rand.New(rand.NewSource(7)).Read(data)
			acked, sent := writeThenDie(ctx, t, blk, ab.Locations, data)
			excluded := tcase.afterWriterDied(t, e, nodes)

			// The writer is gone: nothing renews its lease. The leader recovers.
			var st *pb.StatResponse
			eventually(t, 60*time.Second, "the file closed by block recovery", func() bool {
				st, err = e.ns.Stat(ctx, &pb.StatRequest{Path: "/logs/app"})
				return err == nil && !st.File.UnderConstruction && len(st.Blocks) == 1 && st.Blocks[0].State == pb.BlockState_BLOCK_STATE_COMPLETE
			})
			b := st.Blocks[0]
			if b.Gs <= blk.Gs {
				t.Fatalf("recovered GS %d, the writer's was %d", b.Gs, blk.Gs)
			}
			if int64(b.NumBytes) < acked || int64(b.NumBytes) > sent {
				t.Fatalf("recovered length %d: acknowledged %d, sent %d", b.NumBytes, acked, sent)
			}
			for i, n := range nodes {
				dn := dataNode(t, n)
				if i == excluded {
					// Left out of the recovery: stale now, so the leader
					// has it deleted; the block, one replica short, is
					// then copied back to it (re-replication).
					eventually(t, 30*time.Second, n.ID()+"'s stale replica replaced by a copy", func() bool {
						reps, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: "BP-1"})
						return err == nil && len(reps.Replicas) == 1 && reps.Replicas[0].Gs == b.Gs &&
							reps.Replicas[0].State == pb.ReplicaState_REPLICA_STATE_FINALIZED
					})
				}
				reps, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: "BP-1"})
				if err != nil || len(reps.Replicas) != 1 {
					t.Fatalf("%s: replicas %v, %v", n.ID(), reps, err)
				}
				r := reps.Replicas[0]
				if r.BlockId != b.Id || r.Gs != b.Gs || r.NumBytes != int64(b.NumBytes) || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED {
					t.Fatalf("%s: replica %v, block %v", n.ID(), r, b)
				}
				if got := readReplica(ctx, t, dn, b); !bytes.Equal(got, data[:b.NumBytes]) {
					t.Fatalf("%s: the recovered replica's bytes differ from what was written", n.ID())
				}
			}
			t.Logf("recovered block %d: GS %d -> %d, length %d (acknowledged %d, sent %d)", b.Id, blk.Gs, b.Gs, b.NumBytes, acked, sent)
		})
	}
}

func dataNode(t *testing.T, n *nodeserver.Server) pb.DataNodeClient {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewDataNodeClient(conn)
}

// writeThenDie streams data[:200000] with an hflush, then 50 000 bytes more
// without waiting for acks, then drops the stream as a dying writer does. It
// returns the length acknowledged by the whole pipeline and the length sent.
func writeThenDie(ctx context.Context, t *testing.T, blk *pb.BlockRecord, locs []*pb.NodeLocation, data []byte) (acked, sent int64) {
	t.Helper()
	pl := openPipeline(ctx, t, blk, locs, "writer-1")
	const synced = 200_000
	for off := 0; off < synced; off += 64 << 10 {
		end := min(off+64<<10, synced)
		if _, err := pl.Send(ctx, blockio.Packet{Offset: int64(off), Data: data[off:end], Sync: end == synced}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acked = pl.Acked()
	if acked != synced {
		t.Fatalf("acked %d after hflush, want %d", acked, synced)
	}
	// More bytes, some of which may reach some nodes, then death.
	from := synced - synced%512 // the partial last chunk is sent again
	if _, err := pl.Send(ctx, blockio.Packet{Offset: int64(from), Data: data[from : synced+50_000]}); err != nil {
		t.Fatal(err)
	}
	pl.Abort()
	return acked, synced + 50_000
}

// openPipeline opens a create pipeline for blk on locs as client; the
// connection closes when the test ends.
func openPipeline(ctx context.Context, t *testing.T, blk *pb.BlockRecord, locs []*pb.NodeLocation, client string) *blockio.Pipeline {
	t.Helper()
	conn, err := grpc.NewClient(locs[0].GrpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var targets []string
	for _, l := range locs[1:] {
		targets = append(targets, l.GrpcAddr)
	}
	setup := &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: blk.Gs, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, Targets: targets, ClientName: client}
	pl, err := blockio.Open(ctx, conn, setup, blockio.Options{Address: locs[0].GrpcAddr})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func readReplica(ctx context.Context, t *testing.T, dn pb.DataNodeClient, b *pb.BlockStatus) []byte {
	t.Helper()
	s, err := dn.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: "BP-1", BlockId: b.Id, Gs: b.Gs})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if bad := blockio.Verify(c.Data, c.Checksums); bad >= 0 {
			t.Fatalf("chunk %d after %d does not verify", bad, c.Offset)
		}
		out = append(out, c.Data...)
	}
}
