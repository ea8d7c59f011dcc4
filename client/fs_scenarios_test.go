package client

// The writer-side acceptance scenarios of docs/design.md (§R7,
// scenarios 19–26) with real coordinators and storage nodes in this
// process. The scenario table (every §R7 scenario → the test that covers it,
// or why no cluster test does) is at the top of
// internal/coordserver/scen_harness_test.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Node ports of the scenario clusters come from below the kernel's
// ephemeral range, so a restarted node gets its port back (an outgoing
// connection never holds it), in sequence from a random start.
var (
	scenPortMu   sync.Mutex
	scenNextPort = rand.Intn(8000)
)

func scenPort(t *testing.T) string {
	t.Helper()
	scenPortMu.Lock()
	defer scenPortMu.Unlock()
	for i := 0; i < 8000; i++ {
		scenNextPort = (scenNextPort + 1) % 8000
		addr := fmt.Sprintf("127.0.0.1:%d", 12000+scenNextPort)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	t.Fatal("no free port")
	return ""
}

// scenPorts: every listener on a scenPort, so a restarted node keeps its
// address.
func scenPorts(t *testing.T) coordserver.Ports {
	return coordserver.PortsFrom(func(bool) string { return scenPort(t) })
}

// startScenCluster is startFSClusterN with nodes on fixed ports (so they
// can restart) and coord adjusting the coordinators' config; it returns
// once every node is live with a full report.
func startScenCluster(t *testing.T, nodes int, coord func(*coordserver.Config)) *fsCluster {
	t.Helper()
	var opts []func(*coordserver.Config)
	if coord != nil {
		opts = append(opts, coord)
	}
	fc := startClusterOn(t, nodes, scenPorts(t), opts...)
	fc.waitNodesLive(t, nil)
	return fc
}

// waitNodes waits until the leader lists every node live with a full
// report, out of safe mode; a node in fresh must also show a registration
// other than the instance id given.
func (fc *fsCluster) waitNodesLive(t *testing.T, fresh map[string]string) {
	t.Helper()
	c := fc.client(t)
	pollUntil(t, 30*time.Second, "every node live with a full report", func() (bool, string) {
		r, err := c.Nodes(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if len(r.Nodes) != len(fc.nodes) || r.SafeMode {
			return false, fmt.Sprintf("%d nodes, safe mode %v", len(r.Nodes), r.SafeMode)
		}
		for _, n := range r.Nodes {
			old, restarted := fresh[n.ID]
			if !n.Live || !n.FullReport || (restarted && n.InstanceID == old) {
				return false, fmt.Sprintf("%s: %v", n.ID, n)
			}
		}
		return true, ""
	})
}

func (fc *fsCluster) nodeInstances(t *testing.T) map[string]string {
	t.Helper()
	r, err := fc.client(t).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range r.Nodes {
		out[n.ID] = n.InstanceID
	}
	return out
}

// restart stops the nodes and starts them again on the same addresses and
// data directories (RBW replicas come back RWR), then waits for their new
// registrations and full reports.
func (fc *fsCluster) restartNodes(t *testing.T, ids ...string) {
	t.Helper()
	before := fc.nodeInstances(t)
	fresh := map[string]string{}
	for _, id := range ids {
		fc.startAgain(t, id)
		fresh[id] = before[id]
	}
	fc.waitNodesLive(t, fresh)
}

// replicaOn reads node id's replica of block blk from the node.
func (fc *fsCluster) replicaOn(t *testing.T, id string, blk uint64) (*pb.Replica, bool) {
	t.Helper()
	conn, err := grpc.NewClient(fc.byID[id].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reps, err := pb.NewDataNodeClient(conn).ListReplicas(context.Background(), &pb.ListReplicasRequest{Pool: DefaultBlockPool})
	if err != nil {
		t.Fatalf("%s: list replicas: %v", id, err)
	}
	for _, r := range reps.Replicas {
		if r.BlockId == blk {
			return r, true
		}
	}
	return nil, false
}

// synchronised checks invariant 4 on the nodes in want, read directly from
// them: each holds block b FINALIZED at its GS and length, with the bytes
// data[:length], every chunk verifying. A fresh client reads, so no cached
// connection to a restarted node is in its reconnect backoff.
func (fc *fsCluster) synchronised(ctx context.Context, t *testing.T, b BlockInfo, want []string, data []byte) {
	t.Helper()
	fsys := fc.client(t).FS()
	for _, id := range want {
		r, ok := fc.replicaOn(t, id, b.ID)
		if !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != b.GS || r.NumBytes != int64(b.Length) {
			t.Fatalf("%s: %v, want FINALIZED at GS %d with %d bytes", id, r, b.GS, b.Length)
		}
		got, err := fsys.readAt(ctx, fc.byID[id].GRPCAddr(), b.ID, b.GS, b.Token, 0, int64(b.Length))
		if err != nil || !bytes.Equal(got, data[:b.Length]) {
			t.Fatalf("%s: %d bytes, equal %v, err %v", id, len(got), bytes.Equal(got, data[:min(len(got), int(b.Length))]), err)
		}
	}
}

// countType counts the journal's audit events of type typ.
func countType(ctx context.Context, t *testing.T, c *Client, typ string) int {
	return countEvents(t, ctx, c, typ)
}

func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestScenario19StreamingFailureNoHflush — §R7 scenario 19: "Streaming
// failure, replication 3, DN2 dies, no hflush. n = 2 > floor(3/2) → no
// replacement; new GS; recoverRbw on DN1, DN3 with min = acked, max = sent;
// updatePipeline sets 2 expected locations and new GS; DN2's old-GS RBW
// later reported → corrupt → deleted; NN re-replicates after close." A
// fourth node is live and never added. (The hflush variant, a replacement
// added by transfer, is TestWriterReplacesFailedNode.)
func TestScenario19StreamingFailureNoHflush(t *testing.T) {
	t.Parallel()
	fc := startScenCluster(t, 4, func(c *coordserver.Config) {
		c.FS.ReplicationCheckInterval, c.FS.ReplicationTimeout = 100*time.Millisecond, 5*time.Second
		c.FS.NodeStaleInterval = 2 * time.Second
	})
	c := fc.client(t)
	fsys := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := randomData(19, 600_000)
	w, err := fsys.Create(ctx, "/s19", CreateOptions{Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:300_000]); err != nil {
		t.Fatal(err)
	}
	pipeline, gs0 := idsOf(w.blk.nodes), w.blk.gs
	victim := pipeline[1]
	fc.byID[victim].Close()
	if _, err := w.Write(data[300_000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Stat(ctx, "/s19")
	if err != nil || info.Length != uint64(len(data)) || len(info.Blocks) != 1 {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	survivors := slices.DeleteFunc(slices.Clone(pipeline), func(id string) bool { return id == victim })
	if b.GS <= gs0 || !slices.Equal(sortedIDs(b.Expected), sortedIDs(survivors)) {
		t.Fatalf("after the recovery: GS %d (was %d), expected %v; want the survivors %v, no replacement", b.GS, gs0, b.Expected, survivors)
	}
	fc.synchronised(ctx, t, b, survivors, data)
	if n := countType(ctx, t, c, "logbook.fs.update_pipeline"); n != 1 {
		t.Fatalf("%d pipeline updates, want 1", n)
	}
	// DN2 comes back with its old-GS replica: deleted, and the block is
	// copied back up to 3 replicas.
	fc.restartNodes(t, victim)
	pollUntil(t, 60*time.Second, "3 good replicas, no stale one", func() (bool, string) {
		if r, ok := fc.replicaOn(t, victim, b.ID); ok && r.Gs != b.GS {
			return false, fmt.Sprintf("%s still holds %v", victim, r)
		}
		info, err := fsys.Stat(ctx, "/s19")
		if err != nil {
			return false, err.Error()
		}
		on := finalizedOn(info.Blocks[0])
		return len(on) == 3, fmt.Sprint(on)
	})
	info, _ = fsys.Stat(ctx, "/s19")
	fc.synchronised(ctx, t, info.Blocks[0], finalizedOn(info.Blocks[0]), data)
}

// TestScenario20RecoverRbwTruncatesUnacked — §R7 scenario 20: "recoverRbw
// with bytesOnDisk > bytesAcked → tail truncated to bytesAcked before the
// GS bump (resent packets rewrite it)." The pipeline's last node dies, so
// the two others write a packet nobody acks; the writer's steps are done
// here by hand to see the replicas between them.
func TestScenario20RecoverRbwTruncatesUnacked(t *testing.T) {
	t.Parallel()
	fc := startScenCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(fc.endpoints[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ns := pb.NewNamespaceClient(conn)
	const path, client = "/s20", "raw-writer"
	if _, err := ns.Create(ctx, &pb.CreateRequest{Path: path, Replication: 3, BlockSize: 1 << 20, ClientName: client}); err != nil {
		t.Fatal(err)
	}
	ab, err := ns.AddBlock(ctx, &pb.AddBlockRequest{Path: path, ClientName: client})
	if err != nil {
		t.Fatal(err)
	}
	blk, locs := ab.Result.Block, ab.Locations
	data := randomData(20, 300_000)
	open := func(nodes []*pb.NodeLocation, setup *pb.WriteSetup) *blockio.Pipeline {
		t.Helper()
		cc, err := grpc.NewClient(nodes[0].GrpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		setup.Pool, setup.BlockId, setup.ClientName, setup.Targets = DefaultBlockPool, blk.Id, client, addrs(nodes[1:])
		pl, err := blockio.Open(ctx, cc, setup, blockio.Options{Address: nodes[0].GrpcAddr})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	send := func(pl *blockio.Pipeline, from, to int64, last bool) error {
		for _, p := range blockio.SplitPackets(data[:to], from, blockio.MaxPacketData) {
			p.Sync, p.Last = !last && p.End() == to, last && p.End() == to
			if _, err := pl.Send(ctx, p); err != nil {
				return err
			}
		}
		return pl.Flush(ctx)
	}
	pl := open(locs, &pb.WriteSetup{Gs: blk.Gs, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE})
	if err := send(pl, 0, 200_000, false); err != nil {
		t.Fatal(err)
	}
	const acked, sent = 200_000, 240_000
	fc.byID[locs[2].NodeId].Close()
	err = send(pl, acked, sent, false)
	var be *blockio.Error
	if !errors.As(err, &be) || be.Index != 2 {
		t.Fatalf("send after the last node died: %v, want a failure of node 2", err)
	}
	pl.Abort()
	survivors := locs[:2]
	for _, l := range survivors {
		r, ok := fc.replicaOn(t, l.NodeId, blk.Id)
		if !ok || r.BytesAcked != acked || r.BytesOnDisk <= r.BytesAcked {
			t.Fatalf("%s: %v, want more bytes on disk than the %d acked", l.NodeId, r, acked)
		}
	}
	ub, err := ns.UpdateBlockForPipeline(ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: client, BlockId: blk.Id})
	if err != nil {
		t.Fatal(err)
	}
	g2 := ub.Result.NewGs
	pl = open(survivors, &pb.WriteSetup{Gs: blk.Gs, NewGs: g2, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		MinBytesRcvd: acked, MaxBytesRcvd: sent})
	for _, l := range survivors {
		r, ok := fc.replicaOn(t, l.NodeId, blk.Id)
		if !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.Gs != g2 || r.NumBytes != acked || r.BytesOnDisk != acked || r.BytesAcked != acked {
			t.Fatalf("%s after recoverRbw: %v, want RBW at GS %d truncated to %d", l.NodeId, r, g2, acked)
		}
	}
	if _, err := ns.UpdatePipeline(ctx, &pb.UpdatePipelineRequest{Path: path, ClientName: client, BlockId: blk.Id, OldGs: blk.Gs, NewGs: g2,
		NewLength: acked, NewNodes: idsOf(survivors)}); err != nil {
		t.Fatal(err)
	}
	if err := send(pl, acked, int64(len(data)), true); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "complete", func() (bool, string) {
		r, err := ns.Complete(ctx, &pb.CompleteRequest{Path: path, ClientName: client, Last: &pb.BlockRef{Id: blk.Id, Gs: g2, NumBytes: uint64(len(data))}})
		return err == nil && r.Result.GetClosed(), fmt.Sprint(err)
	})
	info, err := fc.client(t).FS().Stat(ctx, path)
	if err != nil || info.Blocks[0].GS != g2 || info.Blocks[0].Length != uint64(len(data)) {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	fc.synchronised(ctx, t, info.Blocks[0], idsOf(survivors), data)
}

// TestScenario21RecoverRbwUnmatchedLength — §R7 scenario 21: "recoverRbw
// where DN's bytesAcked < client's acked bytes (or numBytes > bytes sent) →
// 'Unmatched length' → that DN becomes the bad node of the next
// iteration." The first node dies; meanwhile the last one's replica gained
// bytes the writer never sent (written into it through its own dataset).
// The writer's recovery onto [DN2, DN3] is refused by DN3; the next
// iteration drops DN3 and the write finishes on DN2 alone.
func TestScenario21RecoverRbwUnmatchedLength(t *testing.T) {
	t.Parallel()
	fc := startScenCluster(t, 3, func(c *coordserver.Config) {
		c.FS.ReplicationCheckInterval, c.FS.ReplicationTimeout = 100*time.Millisecond, 5*time.Second
		c.FS.NodeStaleInterval = 2 * time.Second
	})
	cl := fc.clientWith(t, ReplaceNodeNever)
	fsys := cl.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := randomData(21, 200_000)
	w := syncedWriter(ctx, t, fsys, "/s21", data[:100_000])
	pipeline, id, gs0 := idsOf(w.blk.nodes), w.blk.id, w.blk.gs
	first, mid, last := pipeline[0], pipeline[1], pipeline[2]
	fc.byID[first].Close()
	tw, err := fc.byID[last].Store().RecoverRbw(ctx, DefaultBlockPool, replica.Block{ID: id, GS: gs0}, gs0, 100_000, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	// More than the writer can have sent by the time it recovers (at most
	// the 200 000 bytes it has): numBytes > maxBytesRcvd on DN3.
	extra := append(append([]byte(nil), data[99_840:100_000]...), randomData(210, 110_000)...)
	for off := 0; off < len(extra); off += blockio.MaxPacketData {
		p := extra[off:min(len(extra), off+blockio.MaxPacketData)]
		if err := tw.WritePacket(ctx, int64(99_840+off), p, blockio.Checksums(p)); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if _, err := w.Write(data[100_000:]); err != nil {
		t.Fatal(err)
	}
	// Before the file completes: DN3 refused the recovery and kept its
	// replica as it was.
	if r, ok := fc.replicaOn(t, last, id); !ok || r.Gs != gs0 || r.NumBytes != 210_000 || r.State != pb.ReplicaState_REPLICA_STATE_RBW {
		t.Fatalf("%s: %v, want its refused replica untouched", last, r)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Stat(ctx, "/s21")
	if err != nil || info.Length != uint64(len(data)) {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if !slices.Equal(b.Expected, []string{mid}) || b.GS <= gs0 {
		t.Fatalf("expected %v at GS %d: want only %s (the dead %s and the refusing %s dropped), GS above %d", b.Expected, b.GS, mid, first, last, gs0)
	}
	if n := countType(ctx, t, cl, "logbook.fs.update_block_for_pipeline"); n != 2 {
		t.Fatalf("%d pipeline GSs, want 2 (one per iteration)", n)
	}
	fc.synchronised(ctx, t, b, []string{mid}, data)
	// DN3's replica is stale now: replaced by a copy of DN2's.
	pollUntil(t, 60*time.Second, last+" holding a good copy", func() (bool, string) {
		r, ok := fc.replicaOn(t, last, id)
		return ok && r.Gs == b.GS && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED, fmt.Sprint(r)
	})
	fc.synchronised(ctx, t, b, []string{mid, last}, data)
}

// TestScenario24PipelineRecoveryLimit — §R7 scenario 24: "Six consecutive
// recoveries on the same packet → write fails after the 5th retry; counter
// resets whenever an ack is received." Replication 7 on 7 nodes, so that
// each recovery can drop one more dead node; no replacements.
func TestScenario24PipelineRecoveryLimit(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, kill []int, also int) (*fsCluster, *Client, *FileWriter, []string, error) {
		fc := startScenCluster(t, 7, nil)
		cl := fc.clientWith(t, ReplaceNodeNever)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		w, err := cl.FS().Create(ctx, "/s24", CreateOptions{Replication: 7})
		if err != nil {
			t.Fatal(err)
		}
		data := randomData(24, 150_000)
		if _, err := w.Write(data[:50_000]); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		pipeline := idsOf(w.blk.nodes)
		if len(pipeline) != 7 {
			t.Fatalf("pipeline %v", pipeline)
		}
		for _, i := range kill {
			fc.byID[pipeline[i]].Close()
		}
		if _, err := w.Write(data[50_000:100_000]); err != nil {
			return fc, cl, w, pipeline, err
		}
		if err := w.Sync(ctx); err != nil {
			return fc, cl, w, pipeline, err
		}
		if also >= 0 {
			// An ack came back: the next failure has the full budget.
			fc.byID[pipeline[also]].Close()
			if _, err := w.Write(data[100_000:]); err != nil {
				return fc, cl, w, pipeline, err
			}
		}
		return fc, cl, w, pipeline, w.Close(ctx)
	}
	t.Run("six-fail", func(t *testing.T) {
		_, cl, w, _, err := run(t, []int{1, 2, 3, 4, 5, 6}, -1)
		if err == nil || !strings.Contains(err.Error(), "tried pipeline recovery") {
			t.Fatalf("write with 6 of 7 nodes dead: %v, want the recovery limit", err)
		}
		w.Abort()
		ctx := context.Background()
		if n := countType(ctx, t, cl, "logbook.fs.update_block_for_pipeline"); n != maxPipelineRecoveries {
			t.Fatalf("%d recoveries, want %d", n, maxPipelineRecoveries)
		}
		info, err := cl.FS().Stat(ctx, "/s24")
		if err != nil || !info.UnderConstruction {
			t.Fatalf("after the failed write: %+v, %v; want the file left open", info, err)
		}
	})
	t.Run("reset-on-ack", func(t *testing.T) {
		fc, cl, _, pipeline, err := run(t, []int{1, 2, 3, 4, 5}, 6)
		if err != nil {
			t.Fatalf("5 recoveries, an ack, 1 more: %v", err)
		}
		ctx := context.Background()
		if n := countType(ctx, t, cl, "logbook.fs.update_block_for_pipeline"); n != maxPipelineRecoveries+1 {
			t.Fatalf("%d recoveries, want %d", n, maxPipelineRecoveries+1)
		}
		info, err := cl.FS().Stat(ctx, "/s24")
		if err != nil || info.UnderConstruction || !slices.Equal(info.Blocks[0].Expected, pipeline[:1]) {
			t.Fatalf("stat: %+v, %v; want closed on %s", info, err, pipeline[0])
		}
		fc.synchronised(ctx, t, info.Blocks[0], pipeline[:1], randomData(24, 150_000))
	})
}

// TestScenario25AllPipelineNodesFail — §R7 scenario 25: "All pipeline nodes
// fail → stream aborts ('All datanodes are bad'); file stays open; lease
// recovery later closes it with the acked/available data." The nodes come
// back (their replicas RWR) and another client recovers the lease. With
// the DEFAULT replace-node policy an hflushed writer first asks for a
// replacement node, and there is none in a 3-node cluster.
func TestScenario25AllPipelineNodesFail(t *testing.T) {
	t.Parallel()
	t.Run("replace-never", func(t *testing.T) { testAllPipelineNodesFail(t, ReplaceNodeNever) })
	t.Run("replace-default", func(t *testing.T) {
		testAllPipelineNodesFail(t, ReplaceNodeDefault)
	})
}

func testAllPipelineNodesFail(t *testing.T, policy ReplaceNodePolicy) {
	fc := startScenCluster(t, 3, nil)
	cl := fc.clientWith(t, policy)
	fsys := cl.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := randomData(25, 200_000)
	w := syncedWriter(ctx, t, fsys, "/s25", data[:150_000])
	pipeline := idsOf(w.blk.nodes)
	for _, id := range pipeline {
		fc.byID[id].Close()
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	_, err := w.WriteContext(wctx, data[150_000:])
	if err == nil {
		err = w.Sync(wctx)
	}
	if err == nil || !strings.Contains(err.Error(), "all pipeline nodes") {
		t.Fatalf("write with every pipeline node dead: %v, want all nodes bad", err)
	}
	w.Abort()
	info, err := fsys.Stat(ctx, "/s25")
	if err != nil || !info.UnderConstruction || info.LeaseHolder != fsys.clientName() {
		t.Fatalf("after the abort: %+v, %v; want the file open, still the writer's", info, err)
	}
	fc.restartNodes(t, pipeline...)
	other := fc.client(t).FS()
	pollUntil(t, 60*time.Second, "the lease recovered", func() (bool, string) {
		closed, err := other.RecoverLease(ctx, "/s25")
		return err == nil && closed, fmt.Sprint(err)
	})
	info, err = other.Stat(ctx, "/s25")
	if err != nil || info.UnderConstruction || len(info.Blocks) != 1 {
		t.Fatalf("after recovery: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if b.Length < 150_000 || b.Length > uint64(len(data)) || b.State != BlockComplete {
		t.Fatalf("recovered %d bytes (%v): want at least the 150000 acked", b.Length, b.State)
	}
	fc.synchronised(ctx, t, b, b.Expected, data)
	if !slices.Equal(sortedIDs(b.Expected), sortedIDs(pipeline)) {
		t.Fatalf("recovered onto %v, want the whole pipeline %v", b.Expected, pipeline)
	}
}

// TestScenario26RollingRestart — §R7 scenario 26: "DN rolling restart (OOB)
// within 50 s. RBW re-loaded as RBW; client waits (≤ 30 s) and resumes via
// pipeline recovery with the same DN." For each pipeline position in turn
// a writer hflushes, its node is shut down for a restart through the SDK
// (ShutdownNode), the writer goes on writing and waits — retrying the same
// pipeline, bumping the GS — while the node is down; the node is started
// again, and the write completes with the same three nodes: no node
// dropped, none added (a fourth node is live and holds nothing), one
// pipeline update, every replica FINALIZED and byte-identical.
func TestScenario26RollingRestart(t *testing.T) {
	t.Parallel()
	fc := startScenCluster(t, 4, nil)
	c := fc.client(t)
	fsys := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := randomData(26, 700_000)
	for pos := 0; pos < 3; pos++ {
		path := fmt.Sprintf("/s26-%d", pos)
		w := syncedWriter(ctx, t, fsys, path, data[:300_000])
		pipeline, gs0 := idsOf(w.blk.nodes), w.blk.gs
		victim := pipeline[pos]
		bumps := countType(ctx, t, c, "logbook.fs.update_block_for_pipeline")
		updates := countType(ctx, t, c, "logbook.fs.update_pipeline")
		if err := c.ShutdownNode(ctx, victim, true); err != nil {
			t.Fatalf("shutdown %s for restart: %v", victim, err)
		}
		old := fc.byID[victim]
		old.ShutdownForRestart() // waits for the shutdown the call began
		wrote := make(chan error, 1)
		go func() {
			_, err := w.Write(data[300_000:])
			if err == nil {
				err = w.Close(ctx)
			}
			wrote <- err
		}()
		// The writer retries the same pipeline while the node is down.
		pollUntil(t, 30*time.Second, "the writer retrying while "+victim+" is down", func() (bool, string) {
			n := countType(ctx, t, c, "logbook.fs.update_block_for_pipeline")
			return n > bumps, fmt.Sprintf("%d GS bumps", n-bumps)
		})
		fc.startAgain(t, victim)
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("position %d: write through the restart of %s: %v", pos, victim, err)
			}
		case <-ctx.Done():
			t.Fatal("the writer did not finish")
		}
		info, err := fsys.Stat(ctx, path)
		if err != nil || info.UnderConstruction || info.Length != uint64(len(data)) || len(info.Blocks) != 1 {
			t.Fatalf("stat: %+v, %v", info, err)
		}
		b := info.Blocks[0]
		if b.GS <= gs0 || !slices.Equal(sortedIDs(b.Expected), sortedIDs(pipeline)) {
			t.Fatalf("position %d: GS %d (was %d), expected %v; want the same pipeline %v", pos, b.GS, gs0, b.Expected, pipeline)
		}
		fc.synchronised(ctx, t, b, pipeline, data)
		for id := range fc.byID {
			if !slices.Contains(pipeline, id) {
				if r, ok := fc.replicaOn(t, id, b.ID); ok {
					t.Fatalf("position %d: %s outside the pipeline holds %v (a replacement was added)", pos, id, r)
				}
			}
		}
		if n := countType(ctx, t, c, "logbook.fs.update_pipeline"); n != updates+1 {
			t.Fatalf("position %d: %d pipeline updates, want 1", pos, n-updates)
		}
	}
}

// TestWriterDropsNodeNotBackInTime: a node shut down for a restart that
// does not come back within the writer's NodeRestartTimeout is dropped
// like a failed one (and, the file hflushed, replaced by the fourth node);
// the write completes.
func TestWriterDropsNodeNotBackInTime(t *testing.T) {
	t.Parallel()
	fc := startScenCluster(t, 4, nil)
	c, err := New(context.Background(), Config{Endpoints: fc.endpoints, AttemptTimeout: 2 * time.Second, MaxBackoff: 200 * time.Millisecond,
		NodeRestartTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fsys := c.FS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := randomData(27, 500_000)
	w := syncedWriter(ctx, t, fsys, "/late", data[:200_000])
	pipeline := idsOf(w.blk.nodes)
	victim := pipeline[1]
	if err := fc.byID[victim].ShutdownForRestart(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w.Write(data[200_000:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	info, err := fsys.Stat(ctx, "/late")
	if err != nil || info.Length != uint64(len(data)) {
		t.Fatalf("stat: %+v, %v", info, err)
	}
	b := info.Blocks[0]
	if slices.Contains(b.Expected, victim) || len(b.Expected) != 3 {
		t.Fatalf("expected %v: want 3 nodes without %s", b.Expected, victim)
	}
	if waited < 2*time.Second {
		t.Fatalf("the writer gave %s up after %v, before its 2 s restart timeout", victim, waited)
	}
	fc.synchronised(ctx, t, b, b.Expected, data)
}
