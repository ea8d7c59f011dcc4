package coordserver

import (
	"bytes"
	"context"
	"math/rand"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fastReplication: nodes go stale after 1 s and dead after 3 s; the
// replication monitor runs every 100 ms.
func fastReplication(_ int, c *Config) {
	c.FS.NodeStaleInterval = time.Second
	c.FS.NodeDeadInterval = 3 * time.Second
	c.FS.ReplicationCheckInterval = 100 * time.Millisecond
	c.FS.ReplicationTimeout = 20 * time.Second
}

// writeFile creates path (replication 3) with one block of data written
// through a real 3-node pipeline and completes it.
func writeFile(ctx context.Context, t *testing.T, e *fsEnv, path string, data []byte) *pb.BlockRecord {
	t.Helper()
	if _, err := e.ns.Create(ctx, &pb.CreateRequest{Path: path, Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	blk := ab.Result.Block
	pl := openPipeline(ctx, t, blk, ab.Locations, "w1")
	for off := 0; off < len(data); off += 64 << 10 {
		end := min(off+64<<10, len(data))
		if _, err := pl.Send(ctx, blockio.Packet{Offset: int64(off), Data: data[off:end], Last: end == len(data)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, path+" completed", func() bool {
		c, err := e.ns.Complete(ctx, &pb.CompleteRequest{Path: path, ClientName: "w1", Last: &pb.BlockRef{Id: blk.Id, Gs: blk.Gs, NumBytes: uint64(len(data))}})
		return err == nil && c.Result.GetClosed()
	})
	return blk
}

// finalizedHolders returns the nodes whose DataNode API lists block b
// FINALIZED at its GS and length (read directly, not from reports).
func finalizedHolders(ctx context.Context, t *testing.T, nodes map[string]pb.DataNodeClient, b *pb.BlockRecord, size int) []string {
	t.Helper()
	var out []string
	for id, dn := range nodes {
		reps, err := dn.ListReplicas(ctx, &pb.ListReplicasRequest{Pool: "BP-1"})
		if err != nil {
			continue
		}
		for _, r := range reps.Replicas {
			if r.BlockId == b.Id && r.Gs == b.Gs && r.NumBytes == int64(size) && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestReReplicationAfterNodeDeath (design §R6, invariant 6): a complete block
// on 3 of 4 nodes loses one node for good; once the node is dead the leader
// copies the block from a surviving replica to the fourth node, which then
// holds the same bytes. When the dead node comes back with its replica, the
// block has 4 good replicas: one is invalidated, and at no point do fewer
// than 3 nodes hold the block.
func TestReReplicationAfterNodeDeath(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, fastReplication)
	servers := startNodes(t, e, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	data := make([]byte, 700_000+321)
	rand.New(rand.NewSource(11)).Read(data)
	b := writeFile(ctx, t, e, "/r/f", data)

	dns := map[string]pb.DataNodeClient{}
	byID := map[string]*nodeserver.Server{}
	for _, s := range servers {
		dns[s.ID()] = dataNode(t, s)
		byID[s.ID()] = s
	}
	var holders []string
	eventually(t, 20*time.Second, "3 finalized replicas", func() bool {
		holders = finalizedHolders(ctx, t, dns, b, len(data))
		return len(holders) == 3
	})
	victim := holders[0]
	vnode := byID[victim]
	vnode.Close()
	delete(dns, victim)

	var st *pb.StatResponse
	eventually(t, 30*time.Second, "the block back on 3 live nodes", func() bool {
		h := finalizedHolders(ctx, t, dns, b, len(data))
		if len(h) != 3 {
			return false
		}
		var err error
		st, err = e.ns.Stat(ctx, &pb.StatRequest{Path: "/r/f"})
		if err != nil || len(st.Blocks) != 1 {
			return false
		}
		var reported []string
		for _, r := range st.Blocks[0].ReportedLocations {
			if r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && r.Gs == b.Gs {
				reported = append(reported, r.NodeId)
			}
		}
		slices.Sort(reported)
		return slices.Equal(reported, h)
	})
	eventually(t, 10*time.Second, victim+" dead and nothing under-replicated", func() bool {
		r, err := e.ns.ListNodes(ctx, &pb.ListNodesRequest{})
		if err != nil || r.UnderReplicatedBlocks != 0 || r.MissingBlocks != 0 || r.PendingReplications != 0 {
			return false
		}
		for _, n := range r.Nodes {
			if n.Node.Id == victim {
				return n.Dead && !n.Live
			}
		}
		return false
	})
	for id, dn := range dns {
		if got := readReplica(ctx, t, dn, st.Blocks[0]); !bytes.Equal(got, data) {
			t.Fatalf("%s: replica bytes differ from what was written", id)
		}
	}

	// The dead node returns with its old replica: 4 good copies, one too many.
	back := e.tc.restartNode(vnode)
	dns[victim] = dataNode(t, back)
	eventually(t, 30*time.Second, victim+" back, live with a full report", func() bool {
		r, err := e.ns.ListNodes(ctx, &pb.ListNodesRequest{})
		if err != nil {
			return false
		}
		for _, n := range r.Nodes {
			if n.Node.Id == victim {
				return n.Live && n.FullReport && !n.Dead
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "the excess replica invalidated", func() bool {
		h := finalizedHolders(ctx, t, dns, b, len(data))
		if len(h) < 3 {
			t.Fatalf("only %v hold the block: below its replication", h)
		}
		return len(h) == 3
	})
}

// TestReportBadBlocks: bad input gets InvalidArgument (or
// FailedPrecondition for an unregistered reporting node) and changes
// nothing; an entry for a deleted block or a replica the node does not
// hold is ignored; a good report shows the replica corrupt in Stat and
// writes no journal event (soft state only).
func TestReportBadBlocks(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/b", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/b", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	}
	if _, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/b", ClientName: "w1", Last: &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 100}}); err != nil {
		t.Fatal(err)
	}
	victim := b.ExpectedLocations[0]
	one := func(r *pb.BadReplica) []*pb.BadReplica { return []*pb.BadReplica{r} }
	many := make([]*pb.BadReplica, blocks.MaxBadReplicas+1)
	for i := range many {
		many[i] = &pb.BadReplica{BlockId: b.Id, Gs: b.Gs, NodeId: victim}
	}
	seq := e.nextSeq()
	for _, c := range []struct {
		name string
		req  *pb.ReportBadBlocksRequest
	}{
		{"no reporter", &pb.ReportBadBlocksRequest{Replicas: one(&pb.BadReplica{BlockId: b.Id, Gs: b.Gs, NodeId: victim})}},
		{"no replicas", &pb.ReportBadBlocksRequest{Reporter: "r"}},
		{"too many", &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: many}},
		{"block 0", &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: one(&pb.BadReplica{Gs: b.Gs, NodeId: victim})}},
		{"GS 0", &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: one(&pb.BadReplica{BlockId: b.Id, NodeId: victim})}},
		{"no node", &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: one(&pb.BadReplica{BlockId: b.Id, Gs: b.Gs})}},
		{"reason too long", &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: one(&pb.BadReplica{BlockId: b.Id, Gs: b.Gs, NodeId: victim, Reason: string(make([]byte, 2000))})}},
	} {
		if _, err := e.ns.ReportBadBlocks(e.ctx, c.req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", c.name, err)
		}
	}
	_, err = e.nl.ReportBadBlocks(e.ctx, &pb.ReportBadBlocksRequest{Reporter: "stranger", Replicas: one(&pb.BadReplica{BlockId: b.Id, Gs: b.Gs, NodeId: victim})})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("report from an unregistered node: %v, want FailedPrecondition", err)
	}
	r, err := e.ns.ReportBadBlocks(e.ctx, &pb.ReportBadBlocksRequest{Reporter: "r", Replicas: []*pb.BadReplica{
		{BlockId: b.Id + 100, Gs: b.Gs, NodeId: victim}, // no such block
		{BlockId: b.Id, Gs: b.Gs + 5, NodeId: victim},   // not the GS it holds
		{BlockId: b.Id, Gs: b.Gs, NodeId: "nobody"},     // unknown node
	}})
	if err != nil || r.Accepted != 0 {
		t.Fatalf("ignored entries: %v, %v", r, err)
	}
	for _, l := range e.stat("/b").Blocks[0].ReportedLocations {
		if l.Corrupt {
			t.Fatalf("a refused or ignored report marked %s corrupt", l.NodeId)
		}
	}
	r, err = e.nl.ReportBadBlocks(e.ctx, &pb.ReportBadBlocksRequest{Reporter: victim, Replicas: one(&pb.BadReplica{BlockId: b.Id, Gs: b.Gs, NodeId: victim, Reason: "checksum"})})
	if err != nil || r.Accepted != 1 {
		t.Fatalf("report: %v, %v", r, err)
	}
	for _, l := range e.stat("/b").Blocks[0].ReportedLocations {
		if l.Corrupt != (l.NodeId == victim) {
			t.Fatalf("after the report: %v", l)
		}
	}
	if got := e.nextSeq(); got != seq {
		t.Fatalf("bad block reports wrote journal events: next seq %d -> %d", seq, got)
	}
}

// TestGetAdditionalNode: the lease holder of an open file gets a live node
// outside existing ∪ excluded for its last block; other callers, blocks and
// files get a clear status, and the call writes no journal event.
func TestGetAdditionalNode(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(4)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/g", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/g", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	seq := e.nextSeq()
	r, err := e.ns.GetAdditionalNode(e.ctx, &pb.GetAdditionalNodeRequest{Path: "/g", ClientName: "w1", BlockId: b.Id,
		Existing: b.ExpectedLocations[:2], Excluded: b.ExpectedLocations[2:]})
	if err != nil || r.Node == nil || slices.Contains(b.ExpectedLocations, r.Node.NodeId) || r.Node.GrpcAddr == "" {
		t.Fatalf("additional node: %v, %v (pipeline %v)", r, err, b.ExpectedLocations)
	}
	all := append(append([]string(nil), b.ExpectedLocations...), r.Node.NodeId)
	many := make([]string, maxFSTargets+1)
	for i := range many {
		many[i] = "n"
	}
	for _, c := range []struct {
		name string
		req  *pb.GetAdditionalNodeRequest
		code codes.Code
	}{
		{"relative path", &pb.GetAdditionalNodeRequest{Path: "g", ClientName: "w1", BlockId: b.Id}, codes.InvalidArgument},
		{"no client", &pb.GetAdditionalNodeRequest{Path: "/g", BlockId: b.Id}, codes.InvalidArgument},
		{"too many existing", &pb.GetAdditionalNodeRequest{Path: "/g", ClientName: "w1", BlockId: b.Id, Existing: many}, codes.InvalidArgument},
		{"no such file", &pb.GetAdditionalNodeRequest{Path: "/nope", ClientName: "w1", BlockId: b.Id}, codes.NotFound},
		{"not the lease holder", &pb.GetAdditionalNodeRequest{Path: "/g", ClientName: "w2", BlockId: b.Id}, codes.FailedPrecondition},
		{"not the last block", &pb.GetAdditionalNodeRequest{Path: "/g", ClientName: "w1", BlockId: b.Id + 1}, codes.FailedPrecondition},
		{"no node left", &pb.GetAdditionalNodeRequest{Path: "/g", ClientName: "w1", BlockId: b.Id, Existing: all}, codes.FailedPrecondition},
	} {
		if _, err := e.ns.GetAdditionalNode(e.ctx, c.req); status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
	}
	if got := e.nextSeq(); got != seq {
		t.Fatalf("GetAdditionalNode wrote journal events: next seq %d -> %d", seq, got)
	}
}
