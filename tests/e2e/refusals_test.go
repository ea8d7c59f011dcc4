//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestDestructiveOpsRefused runs the fs compose cluster (TLS, encrypted
// gossip, ACLs) with a journal of events, a consumer and two files of
// three replicas each, and tries every destructive operation as every
// caller that must be refused, on every coordinator and every storage
// node through their published ports:
//
//   - coordinators: Journal.Reset, Trim, SetPaused and RemoveConsumer,
//     Cluster.RemoveServer (a follower), TransferLeadership (to a
//     follower) and ShutdownNode (a replica holder), Namespace.Delete
//     (the files' directory, recursively) and ReportBadBlocks (a
//     holder's replica), and the node link's IncrementalReport (the
//     replica deleted) and ReportBadBlocks as if from a node;
//   - storage nodes, with made-up generation stamps and recovery ids:
//     WriteBlock to reopen the replica (APPEND), to replace it with other
//     bytes (TRANSFER_FINALIZED), to truncate it (CLOSE_RECOVERY) and to
//     create a made-up block, TransferBlock to another node, ReadBlock and
//     GetReplicaVisibleLength without a block token, InitReplicaRecovery,
//     UpdateReplicaUnderRecovery (to length 0) and ShutdownNode.
//
// The callers are strangers' (plaintext, an expired certificate of the
// cluster CA, a reader's token, a malformed token, TLS without a client
// certificate, a certificate of another CA not sent and sent), each
// refused with the code strangers names on a coordinator, and a reader's
// refusal names the permission it lacks. A storage node holds no roles
// and reads no bearer tokens: every caller past the handshake is one
// without an identity there (Unauthenticated: NO_BLOCK_TOKEN for block
// calls, NO_IDENTITY for the others). Two more callers try the node
// calls: admin's own client certificate (block calls Unauthenticated
// without a block token; recovery and shutdown PermissionDenied: only
// node and coordinator certificates make them) and the reader holding the
// read block token its Stat got (PermissionDenied for every write, copy
// or other block's call; its reads are what the token grants, not tried).
// The reader may report a replica bad (read level, as HDFS lets any
// reading client; docs/security.md, "Not protected yet": on any block,
// which gets that replica re-replicated and invalidated): not tried as
// the reader.
//
// Before and after, the test takes the cluster's state: a full journal
// read and positions (after: the same but for logbook.acl.denied audit
// events), the consumers, the namespace (a recursive listing with each
// file's stat), every node's replica list and each replica of the files'
// blocks read byte for byte, the members, the leader and the live nodes;
// both must be equal, and Cluster.Verify (coord journal verify) must find
// every member's state digest equal.
//
// Then admin does what is safe here and checks each took effect:
// RemoveConsumer, Trim, Namespace.Delete of one file (its replicas go
// from every node), TransferLeadership to a follower, ShutdownNode of one
// node (its container exits), Reset, and last RemoveServer of a follower
// (its container exits: a removed member stops). A removed member is not
// added back: it must come back with an empty data directory
// (coordserver.ErrRemoved), which a compose service cannot be given in
// place. The block and recovery RPCs on a node are not made as admin:
// only node and coordinator certificates make them (the refusal of
// admin's certificate above shows it).
func TestDestructiveOpsRefused(t *testing.T) {
	fc := startFSCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := fc.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := fc.seedRefusals(ctx, t, c)
	callers, reader := strangers(ctx, t, fc.cluster, "e2e-reader")

	// The block every node call aims at, a node holding it and one not.
	blk := fc.lastBlock(t, files[0])
	holders := fc.waitReplicated(t, files[0], 3, nil, 60*time.Second)
	var spare string
	for _, n := range fc.nodes {
		if !slices.Contains(holders, n) {
			spare = n
		}
	}
	leader := fc.leader()
	follower := fc.others(leader)[0]
	storage := fc.storageOf(ctx, t, c, holders[0])
	readTok := fc.readerBlockToken(ctx, t, reader, files[0])
	fc.logf("target block %d at GS %d (%d bytes) on %v; leader %s, follower %s", blk.Id, blk.Gs, blk.NumBytes, holders, leader, follower)

	before := fc.state(ctx, t, c, files)
	fc.logf("state before: %s", before)

	coordOps := refusalCoordOps(blk, leader, follower, holders[0], storage)
	for _, who := range callers {
		for _, op := range coordOps {
			if op.readerMay != "" && who.token == reader {
				fc.logf("%-46s | %-40s: not tried (%s)", who.name, op.name, op.readerMay)
				continue
			}
			fc.refuse(ctx, t, who, op.name, op.perm, who.coord, fc.members, func(ctx context.Context, conn *grpc.ClientConn) error {
				return op.call(ctx, conn)
			})
		}
	}
	readerCaller := callers[slices.IndexFunc(callers, func(c caller) bool { return c.token == reader })]
	nodeCallers := append(nodeStrangers(callers),
		nodeCaller{caller: caller{name: "admin's certificate, no block token", conf: fc.tlsConf},
			codes: map[nodeKind]codes.Code{blockWrite: codes.Unauthenticated, blockRead: codes.Unauthenticated, peerOnly: codes.PermissionDenied}},
		nodeCaller{caller: caller{name: "the reader's read block token", conf: readerCaller.conf, token: reader}, blockToken: readTok,
			codes: map[nodeKind]codes.Code{blockWrite: codes.PermissionDenied, peerOnly: codes.Unauthenticated}})
	nodeOps := refusalNodeOps(blk, spare)
	for _, nc := range nodeCallers {
		for _, op := range nodeOps {
			want, ok := nc.codes[op.kind]
			if !ok {
				fc.logf("%-46s | %-40s: not tried (the token grants it)", nc.name, op.name)
				continue
			}
			fc.refuse(ctx, t, nc.caller, op.name, "", want, fc.nodes, func(ctx context.Context, conn *grpc.ClientConn) error {
				return op.call(ctx, pb.NewDataNodeClient(conn), nc.blockToken)
			})
		}
	}

	after := fc.state(ctx, t, c, files)
	fc.logf("state after: %s", after)
	if err := before.same(after); err != nil {
		t.Errorf("the refused calls changed the cluster: %v", err)
	}
	// The reader's refusals, and only they, were audited (rate-limited).
	denied := auditEvents(t, after.journal.events, before.journal.pos.SafePos, "logbook.acl.denied")
	for _, d := range denied {
		op := d.GetDenied()
		fc.logf("audited: %s refused %s on %s (%d more suppressed): %s", op.GetIdentity(), op.GetMethod(), op.GetMember(), op.GetSuppressed(), op.GetReason())
		if !strings.Contains(op.GetIdentity(), "e2e-reader") {
			t.Errorf("a refusal of %s audited, want the reader's only", op.GetIdentity())
		}
	}
	if len(denied) == 0 {
		t.Error("no logbook.acl.denied event for the reader's refusals")
	}
	v, err := c.Cluster().Verify(ctx)
	if err != nil || !v.Consistent {
		t.Errorf("verify: %+v, %v", v, err)
	} else {
		fc.logf("verify: %d members, one state digest at index %d", len(v.Members), v.Index)
	}
	if t.Failed() {
		return
	}
	fc.adminDoes(ctx, t, c, files)
}

// seedRefusals appends events, registers a consumer and writes two
// files of three replicas as admin, and returns the files' paths.
func (fc *fsCluster) seedRefusals(ctx context.Context, t *testing.T, c *client.Client) []string {
	t.Helper()
	for i := range 20 {
		if _, err := c.Journal().Append(ctx, client.Event{Type: "refusals-e2e", Payload: fmt.Appendf(nil, "event-%d", i)}); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if _, err := c.Journal().Consumers().Register(ctx, refusalConsumer, 5); err != nil {
		t.Fatalf("register consumer: %v", err)
	}
	files := []string{"/refusals/a", "/refusals/dir/b"}
	for i, path := range files {
		w, err := c.FS().Create(ctx, path, client.CreateOptions{Replication: 3, BlockSize: 1 << 20})
		if err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
		if _, err := w.Write(writerData(int64(40+i), 200_000+i*1234)); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatalf("close %s: %v", path, err)
		}
		fc.waitReplicated(t, path, 3, nil, 60*time.Second)
	}
	fc.logf("seeded: 20 events, consumer %s, files %v (3 replicas each)", refusalConsumer, files)
	return files
}

const refusalConsumer = "e2e-victim"

// coordOp is a destructive call on a coordinator.
type coordOp struct {
	name string
	// perm is what a reader's refusal must say it lacks.
	perm string
	// readerMay, when set, says why a reader may make the call.
	readerMay string
	call      func(ctx context.Context, conn *grpc.ClientConn) error
}

func refusalCoordOps(blk *pb.BlockStatus, leader, follower, holder, storage string) []coordOp {
	sess := &pb.FsSession{ClientId: "e2e-intruder", RequestSeq: 1}
	bad := []*pb.BadReplica{{BlockId: blk.Id, Gs: blk.Gs, NodeId: holder, Reason: "e2e: made up"}}
	return []coordOp{
		{name: "Journal.Reset", perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewJournalClient(cc).Reset(ctx, &pb.ResetRequest{Confirm: true})
			return err
		}},
		{name: "Journal.Trim", perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewJournalClient(cc).Trim(ctx, &pb.TrimRequest{})
			return err
		}},
		{name: "Journal.SetPaused", perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewJournalClient(cc).SetPaused(ctx, &pb.SetPausedRequest{Paused: true})
			return err
		}},
		{name: "Journal.RemoveConsumer", perm: "lacks write", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewJournalClient(cc).RemoveConsumer(ctx, &pb.RemoveConsumerRequest{Name: refusalConsumer})
			return err
		}},
		{name: "Cluster.RemoveServer " + follower, perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClusterClient(cc).RemoveServer(ctx, &pb.RemoveServerRequest{Id: follower})
			return err
		}},
		{name: "Cluster.TransferLeadership " + follower, perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClusterClient(cc).TransferLeadership(ctx, &pb.TransferLeadershipRequest{Id: follower})
			return err
		}},
		{name: "Cluster.ShutdownNode " + holder, perm: "lacks admin", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewClusterClient(cc).ShutdownNode(ctx, &pb.ClusterShutdownNodeRequest{NodeId: holder})
			return err
		}},
		{name: "Namespace.Delete /refusals", perm: "lacks write", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewNamespaceClient(cc).Delete(ctx, &pb.DeleteRequest{Session: sess, Path: "/refusals", Recursive: true})
			return err
		}},
		{name: "Namespace.ReportBadBlocks", readerMay: "read level: any reading client reports what fails its checksums", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := pb.NewNamespaceClient(cc).ReportBadBlocks(ctx, &pb.ReportBadBlocksRequest{Reporter: "e2e-intruder", Replicas: bad})
			return err
		}},
		{name: "NodeLink.IncrementalReport (deleted)", perm: "not a storage node", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeLinkClient(cc).IncrementalReport(ctx, &clusterpb.NodeIncrementalReportRequest{NodeId: holder, Changes: []*clusterpb.IncrementalChange{{
				Change: clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED, StorageId: storage,
				Replica: &pb.ReportedReplica{BlockId: blk.Id, Gs: blk.Gs, NumBytes: int64(blk.NumBytes), State: pb.ReplicaState_REPLICA_STATE_FINALIZED},
			}}})
			return err
		}},
		{name: "NodeLink.ReportBadBlocks", perm: "not a storage node", call: func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := clusterpb.NewNodeLinkClient(cc).ReportBadBlocks(ctx, &pb.ReportBadBlocksRequest{Reporter: holder, Replicas: bad})
			return err
		}},
	}
}

// nodeKind is what a storage node wants of a caller of a call.
type nodeKind int

const (
	// blockWrite, blockRead: a block access token (of a mode that covers
	// the call), or a node or coordinator certificate.
	blockWrite nodeKind = iota
	blockRead
	// peerOnly: a node or coordinator certificate (recovery, shutdown).
	peerOnly
)

// nodeCaller is a caller of node calls: the code it gets per kind of
// call (none: not tried) and the block token it sends.
type nodeCaller struct {
	caller
	blockToken []byte
	codes      map[nodeKind]codes.Code
}

func nodeStrangers(cs []caller) []nodeCaller {
	out := make([]nodeCaller, len(cs))
	for i, c := range cs {
		out[i] = nodeCaller{caller: c, codes: map[nodeKind]codes.Code{blockWrite: c.node(), blockRead: c.node(), peerOnly: c.node()}}
	}
	return out
}

// nodeOp is a call on a storage node's DataNode service.
type nodeOp struct {
	name string
	kind nodeKind
	call func(ctx context.Context, dn pb.DataNodeClient, token []byte) error
}

// madeUp is added to the block's GS for the generation stamps and
// recovery ids the node calls make up.
const madeUp = 1000

func refusalNodeOps(blk *pb.BlockStatus, spare string) []nodeOp {
	id, gs, n := blk.Id, blk.Gs, int64(blk.NumBytes)
	garbage := bytes.Repeat([]byte("intruder"), 512)
	write := func(setup *pb.WriteSetup, data []byte) func(context.Context, pb.DataNodeClient, []byte) error {
		return func(ctx context.Context, dn pb.DataNodeClient, token []byte) error {
			s := proto.CloneOf(setup)
			s.Pool, s.BlockToken = pool, token
			return writeBlockOnce(ctx, dn, s, data)
		}
	}
	return []nodeOp{
		{"WriteBlock APPEND (reopen)", blockWrite, write(&pb.WriteSetup{BlockId: id, Gs: gs, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, NewGs: gs + madeUp, MinBytesRcvd: n}, nil)},
		{"WriteBlock TRANSFER_FINALIZED (replace)", blockWrite, write(&pb.WriteSetup{BlockId: id, Gs: gs + madeUp, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, ExpectedLength: int64(len(garbage))}, garbage)},
		{"WriteBlock CLOSE_RECOVERY (truncate)", blockWrite, write(&pb.WriteSetup{BlockId: id, Gs: gs, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY, NewGs: gs + madeUp}, nil)},
		{"WriteBlock CREATE (made-up block)", blockWrite, write(&pb.WriteSetup{BlockId: id + madeUp, Gs: 1, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE}, garbage)},
		{"TransferBlock to " + spare, blockWrite, func(ctx context.Context, dn pb.DataNodeClient, token []byte) error {
			_, err := dn.TransferBlock(ctx, &pb.TransferBlockRequest{Pool: pool, BlockId: id, Gs: gs, Targets: []string{fmt.Sprintf("%s:%d", spare, nodePort)},
				Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED, BlockToken: token})
			return err
		}},
		{"ReadBlock", blockRead, func(ctx context.Context, dn pb.DataNodeClient, token []byte) error {
			s, err := dn.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: pool, BlockId: id, Gs: gs, BlockToken: token})
			if err != nil {
				return err
			}
			c, err := s.Recv()
			if err != nil {
				return err
			}
			return fmt.Errorf("read %d bytes at offset %d", len(c.Data), c.Offset)
		}},
		{"GetReplicaVisibleLength", blockRead, func(ctx context.Context, dn pb.DataNodeClient, token []byte) error {
			r, err := dn.GetReplicaVisibleLength(ctx, &pb.GetReplicaVisibleLengthRequest{Pool: pool, BlockId: id, Gs: gs, BlockToken: token})
			if err == nil {
				err = fmt.Errorf("answered %d", r.VisibleLength)
			}
			return err
		}},
		{"InitReplicaRecovery (made-up id)", peerOnly, func(ctx context.Context, dn pb.DataNodeClient, _ []byte) error {
			_, err := dn.InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{Pool: pool, BlockId: id, Gs: gs, NumBytes: n, RecoveryId: gs + madeUp})
			return err
		}},
		{"UpdateReplicaUnderRecovery (made-up id)", peerOnly, func(ctx context.Context, dn pb.DataNodeClient, _ []byte) error {
			_, err := dn.UpdateReplicaUnderRecovery(ctx, &pb.UpdateReplicaUnderRecoveryRequest{Pool: pool, BlockId: id, Gs: gs, NumBytes: n, RecoveryId: gs + madeUp, NewBlockId: id})
			return err
		}},
		{"ShutdownNode", peerOnly, func(ctx context.Context, dn pb.DataNodeClient, _ []byte) error {
			_, err := dn.ShutdownNode(ctx, &pb.ShutdownNodeRequest{})
			return err
		}},
	}
}

// writeBlockOnce opens a WriteBlock stream, sends setup and, when data is
// set, one last packet of it, and returns the stream's error; a setup
// ack is an error of its own (code Unknown).
func writeBlockOnce(ctx context.Context, dn pb.DataNodeClient, setup *pb.WriteSetup, data []byte) error {
	s, err := dn.WriteBlock(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&pb.WritePacket{Msg: &pb.WritePacket_Setup{Setup: setup}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if data != nil {
		pkt := &pb.Packet{Data: data, Checksums: blockio.Checksums(data), LastPacketInBlock: true}
		if err := s.Send(&pb.WritePacket{Msg: &pb.WritePacket_Packet{Packet: pkt}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	ack, err := s.Recv()
	if err != nil {
		return err
	}
	_ = s.CloseSend()
	return fmt.Errorf("the node acked the setup: %v", ack)
}

// refuse makes one call as c on every one of services (coordinators or
// nodes) and checks each is refused with want (and, for
// PermissionDenied, a message with perm), in one log line per call.
func (fc *fsCluster) refuse(ctx context.Context, t *testing.T, c caller, op, perm string, want codes.Code, services []string, call func(context.Context, *grpc.ClientConn) error) {
	t.Helper()
	var seen []string
	for _, s := range services {
		addr := fc.addr(s)
		if slices.Contains(fc.nodes, s) {
			addr = fc.nodeAddrMap()[s]
		}
		conn, err := c.dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err = call(cctx, conn)
		ccancel()
		conn.Close()
		st := status.Convert(err)
		switch {
		case st.Code() != want:
			t.Errorf("%s | %s on %s: %v (code %s), want %s", c.name, op, s, err, st.Code(), want)
		case want == codes.PermissionDenied && perm != "" && !strings.Contains(st.Message(), perm):
			t.Errorf("%s | %s on %s: %q does not name the permission (%q)", c.name, op, s, st.Message(), perm)
		}
		why := reasonOf(st)
		if st.Code() == codes.PermissionDenied {
			why += fmt.Sprintf(" (%q)", st.Message())
		}
		seen = append(seen, why)
	}
	where := strings.Join(services, ", ")
	if len(slices.Compact(slices.Clone(seen))) == 1 {
		where += ": " + seen[0]
	} else {
		parts := make([]string, len(services))
		for i, s := range services {
			parts[i] = s + ": " + seen[i]
		}
		where = strings.Join(parts, ", ")
	}
	fc.logf("%-46s | %-40s: %s on %s", c.name, op, want, where)
}

// reasonOf is a refusal's ErrorInfo reason, or its message when it has
// none (a failed handshake).
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	m := st.Message()
	if i := strings.LastIndex(m, "error reading server preface: "); i >= 0 {
		m = m[i:] // a failed handshake: what the client saw of it
	}
	return fmt.Sprintf("%q", m)
}

// storageOf is a registered node's first storage id.
func (fc *fsCluster) storageOf(ctx context.Context, t *testing.T, c *client.Client, node string) string {
	t.Helper()
	r, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Nodes {
		if n.ID == node && len(n.StorageIDs) > 0 {
			return n.StorageIDs[0]
		}
	}
	t.Fatalf("node %s: no storage in %s", node, describeNodes(r))
	return ""
}

// readerBlockToken is the block access token of path's last block a
// Stat as the reader (a token, no certificate) gets: mode read.
func (fc *fsCluster) readerBlockToken(ctx context.Context, t *testing.T, reader, path string) []byte {
	t.Helper()
	cfg, _ := fc.fsConfig()
	caOnly, err := client.LoadTLS("", "", fc.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS, cfg.Token = caOnly, reader
	rc, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	info, err := rc.FS().Stat(ctx, path)
	if err != nil || len(info.Blocks) == 0 || len(info.Blocks[len(info.Blocks)-1].Token) == 0 {
		t.Fatalf("stat %s as the reader: %+v, %v", path, info, err)
	}
	return info.Blocks[len(info.Blocks)-1].Token
}

// auditEvents decodes the events of type typ after seq (their payload is
// an AclCommand).
func auditEvents(t *testing.T, evs []client.StoredEvent, after uint64, typ string) []*fsmpb.AclCommand {
	t.Helper()
	var out []*fsmpb.AclCommand
	for _, e := range evs {
		if e.Seq <= after || e.Type != typ {
			continue
		}
		cmd := &fsmpb.AclCommand{}
		if err := proto.Unmarshal(e.Payload, cmd); err != nil {
			t.Fatalf("%s event at seq %d: %v", typ, e.Seq, err)
		}
		out = append(out, cmd)
	}
	return out
}
