//go:build e2e

package e2e

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
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc"
)

// TestNodeKilledKeepsSyncedBytes runs one storage node in a container,
// writes a block to completion and a second one only up to an hsync, then
// SIGKILLs the container and starts it again on the same volume: the
// finalized block comes back FINALIZED with every byte, the other comes
// back RWR (design §R1.4) holding at least every byte that was acked after an
// fsync, and both verify against their checksums when read.
func TestNodeKilledKeepsSyncedBytes(t *testing.T) {
	p, err := newProject("docker-compose-node.yml", []string{"node1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("compose logs of %s:\n%s", p.name, p.logs(200))
		}
		if err := p.down(); err != nil {
			t.Errorf("down %s: %v", p.name, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	const pool = "BP-1"
	conn := dialNode(t, p)

	rng := rand.New(rand.NewSource(1))
	full := make([]byte, 300_000)
	rng.Read(full)
	writeBlock(ctx, t, conn, 1, full, true)
	synced := make([]byte, 200_000+123) // ends inside a chunk
	rng.Read(synced)
	writeBlock(ctx, t, conn, 2, synced, false)

	if err := p.kill("node1"); err != nil {
		t.Fatal(err)
	}
	if err := p.start("node1"); err != nil {
		t.Fatal(err)
	}
	dn := pb.NewDataNodeClient(dialNode(t, p))
	states := map[uint64]*pb.Replica{}
	if err := poll(time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		r, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: pool})
		if err != nil {
			return err
		}
		for _, rep := range r.Replicas {
			states[rep.BlockId] = rep
		}
		return nil
	}); err != nil {
		t.Fatalf("list replicas after the restart: %v", err)
	}
	if r := states[1]; r == nil || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.NumBytes != int64(len(full)) {
		t.Fatalf("finalized block after SIGKILL: %v", r)
	}
	if r := states[2]; r == nil || r.State != pb.ReplicaState_REPLICA_STATE_RWR || r.NumBytes < int64(len(synced)) {
		t.Fatalf("hsynced block after SIGKILL: %v (want RWR with >= %d bytes)", r, len(synced))
	}
	if got := readBlock(ctx, t, dn, 1, 0); !bytes.Equal(got, full) {
		t.Fatalf("finalized block: read %d bytes, differ from what was written", len(got))
	}
	if got := readBlock(ctx, t, dn, 2, int64(len(synced))); !bytes.Equal(got, synced) {
		t.Fatalf("hsynced block: read %d bytes, differ from what was written", len(got))
	}
	t.Logf("after SIGKILL: block 1 FINALIZED %d bytes, block 2 RWR %d bytes (%d acked after hsync)", states[1].NumBytes, states[2].NumBytes, len(synced))
}

func dialNode(t *testing.T, p *project) *grpc.ClientConn {
	t.Helper()
	var addr string
	if err := poll(time.Minute, 200*time.Millisecond, func(ctx context.Context) (err error) {
		addr, err = p.port("node1", 7400)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, p.creds())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dn := pb.NewDataNodeClient(conn)
	if err := poll(time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := dn.VolumeInfo(ctx, &pb.VolumeInfoRequest{})
		return err
	}); err != nil {
		t.Fatalf("node at %s does not answer: %v", addr, err)
	}
	return conn
}

// writeBlock writes data as block id in 64 KiB packets. finish: the last
// packet finalizes the replica; otherwise the last packet asks for an hsync
// and the replica stays RBW.
func writeBlock(ctx context.Context, t *testing.T, conn *grpc.ClientConn, id uint64, data []byte, finish bool) {
	t.Helper()
	setup := &pb.WriteSetup{Pool: "BP-1", BlockId: id, Gs: 1001, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, ClientName: "e2e"}
	pl, err := blockio.Open(ctx, conn, setup, blockio.Options{Address: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	const packet = 64 << 10
	for off := 0; off < len(data); off += packet {
		end := min(off+packet, len(data))
		last := end == len(data)
		if _, err := pl.Send(ctx, blockio.Packet{Offset: int64(off), Data: data[off:end], Last: last && finish, Fsync: last && !finish}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pl.Acked(); got != int64(len(data)) {
		t.Fatalf("block %d: %d bytes acked, want %d", id, got, len(data))
	}
}

func readBlock(ctx context.Context, t *testing.T, dn pb.DataNodeClient, id uint64, length int64) []byte {
	t.Helper()
	s, err := dn.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: "BP-1", BlockId: id, Gs: 1001, Length: length})
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
			t.Fatal(fmt.Errorf("read block %d: %w", id, err))
		}
		if c.BytesPerChecksum != blockio.ChunkSize {
			t.Fatalf("block %d: %d bytes per checksum", id, c.BytesPerChecksum)
		}
		if bad := blockio.Verify(c.Data, c.Checksums); bad >= 0 {
			t.Fatalf("block %d: chunk %d after offset %d does not verify", id, bad, c.Offset)
		}
		out = append(out, c.Data...)
	}
}
