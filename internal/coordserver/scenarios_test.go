package coordserver

// docs/design.md §R7, acceptance scenarios 1–34, and the cluster
// tests (real coordinators; real storage nodes unless "faked": node reports
// and heartbeats sent by the test over the real NodeLink API) covering them.
// New tests are in this file and in client/fs_scenarios_test.go (the
// writer-side ones, 19–26); the oracle is docs/design.md's invariants read from
// the nodes and the FSM (GS, length, bytes and CRCs of every replica; GS
// only grows; refused ops change nothing and write no journal event).
//
//	 #  covered by
//	 1  TestScenario01ClientDiesBeforeData: locations-no-replica (real nodes:
//	    this design always records the pipeline as expected locations, §R9.9,
//	    so the block is deleted by a recovery that finds no replica) and
//	    no-locations (faked: the rule-4b state, reached through a
//	    close_file=false commit; the hard limit removes the block, no GS)
//	 2  TestScenario02ZeroBytesWritten
//	 3  TestScenario03AllBlocksCompleteFileOpen
//	 4  TestScenario04LastBlockCommitted
//	 5  TestScenario05ThreeRBWDifferentLengths
//	 6  TestScenario06InconsistentFinalizedLengths
//	 7  TestScenario07OnlyRWRReplicas
//	 8  TestScenario08StaleReplica
//	 9  TestScenario09LateOlderRecovery (preempted recovery id, real nodes)
//	10  TestScenario10PrimaryDiesAfterInit
//	11  TestScenario11CommitRetriedAfterSuccess
//	12  TestScenario12DeleteCommitForGoneBlock
//	13  TestScenario13WriterFencedAfterRecoveryStarts (also
//	    TestFSLeaseHardLimitStartsRecovery: complete fenced, faked nodes)
//	14  TestScenario14RecoverLeaseTwice (also TestFSLeaseHardLimitStartsRecovery)
//	15  TestScenario15CompetingWriter
//	16  TestScenario16StaleNodeFiltering (faked: the command's locations are
//	    only visible in a heartbeat reply)
//	17  TestScenario17PrimaryRotation (faked: the test alone orders the
//	    heartbeats the choice depends on); the first attempt with no live
//	    location: TestScenario17NoLiveLocationFirstAttempt
//	18  not a cluster test: the node refuses to grow a replica or to update
//	    one whose bytes on disk changed (replica/replicatest
//	    UpdateReplicaUnderRecovery; nodeserver TestBlockRecoveryRPCs over the
//	    RPC, CANNOT_GROW), and a conforming primary never asks it to
//	    (leaserecovery TestPlanRecovery: the length is the FINALIZED one or
//	    the participants' minimum). A cluster could only replay the same
//	    hand-made RPC.
//	19  client TestScenario19StreamingFailureNoHflush; the hflush variant is
//	    client TestWriterReplacesFailedNode
//	20  client TestScenario20RecoverRbwTruncatesUnacked
//	21  client TestScenario21RecoverRbwUnmatchedLength
//	22  client TestWriterReplacesFailedNode (hflush at 300 000 bytes, not
//	    chunk-aligned; the replacement is filled by TRANSFER_RBW and writing
//	    resumes; every replica read back byte-identical with every chunk's
//	    CRC verified), plus replicatest TransferPartialChunk
//	23  client TestWriterCloseRecovery
//	24  client TestScenario24PipelineRecoveryLimit
//	25  client TestScenario25AllPipelineNodesFail
//	26  client TestScenario26RollingRestart (each pipeline position shut down
//	    for a restart through ShutdownNode: OOB NODE_RESTARTING, the writer
//	    waits bumping the GS, the node comes back with its replica RBW from
//	    the restart marker, same three nodes, byte-identical); not back in
//	    time: client TestWriterDropsNodeNotBackInTime; the node side:
//	    nodeserver TestShutdownForRestartResumesPipeline and
//	    TestShutdownForRestartMarkerExpiry, replica TestLoadRestartMarker;
//	    with containers: e2e TestFSRecovery/NodeRollingRestart
//	27  TestScenario27RestartDropsTemporary
//	28  TestScenario28ReportsOfUCBlock
//	29  TestScenario29ReportOfUnknownBlock (also TestScenario02ZeroBytesWritten)
//	30  TestScenario30ScannerLengthMismatch
//	31  TestScenario31ExpiredLeasesInBulk (coordinators only: no node takes
//	    part in releasing leases of files without blocks)
//	32  TestScenario32ReportAheadOfMetadata (faked, with a leader failover)
//	33  TestScenario33FailoverMidRecovery (also TestLeaseRecoveryWithRealNodes
//	    leader-killed-during-recovery, TestFSLeaderChangeResumesRecovery)
//	34  TestScenario34AppendRecoveryInterleavingReplays
//
// Several scenarios pin a recovery between its initialisations and its
// updates with the storage node's test failpoint
// (nodeserver.Config.FailpointRecoveryPause, see pauseAt).

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Harness for the §R7 scenarios: real coordinators (newFSEnv) and real
// storage nodes (nodeserver.New), with replicas staged through each node's
// own dataset (Server.Store) where a scenario needs a replica state no
// client would produce on cue, and the oracle read back from the nodes
// directly (ListReplicas, ReadBlock with every chunk's CRC verified).

// scen is one scenario's cluster: 3 coordinators and real storage nodes.
type scen struct {
	*fsEnv
	t     *testing.T
	ctx   context.Context
	nodes []*nodeserver.Server
	dns   map[string]pb.DataNodeClient // DataNode clients by node id
}

// startScen starts the coordinators (opts) and n nodes (mod adjusts node
// i's config) and waits until the leader sees every node live with a full
// report, out of safe mode.
func startScen(t *testing.T, n int, mod func(i int, c *nodeserver.Config), opts ...clusterOpt) *scen {
	t.Helper()
	e := newFSEnv(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	s := &scen{fsEnv: e, t: t, ctx: ctx, dns: map[string]pb.DataNodeClient{}}
	for i := 0; i < n; i++ {
		s.nodes = append(s.nodes, e.tc.addNode(func(cfg *nodeserver.Config) {
			cfg.ID = fmt.Sprintf("dn%d", i+1)
			if mod != nil {
				mod(i, cfg)
			}
		}))
	}
	s.waitNodes()
	return s
}

// waitNodes waits until the leader lists every node of s live with a full
// report and has left safe mode.
func (s *scen) waitNodes() {
	s.t.Helper()
	eventually(s.t, 30*time.Second, "every node live with a full report", func() bool {
		r, err := s.ns.ListNodes(s.ctx, &pb.ListNodesRequest{})
		if err != nil || len(r.Nodes) != len(s.nodes) || r.SafeMode {
			return false
		}
		for _, st := range r.Nodes {
			if !st.Live || !st.FullReport {
				return false
			}
		}
		return true
	})
}

// node returns the running node with id.
func (s *scen) node(id string) *nodeserver.Server {
	s.t.Helper()
	for _, n := range s.nodes {
		if n.ID() == id {
			return n
		}
	}
	s.t.Fatalf("no node %s", id)
	return nil
}

func (s *scen) index(id string) int {
	for i, n := range s.nodes {
		if n.ID() == id {
			return i
		}
	}
	s.t.Fatalf("no node %s", id)
	return -1
}

// restart stops node id and starts it again on the same addresses and data
// directory (RBW replicas come back RWR, TEMPORARY ones are gone), then
// waits until the leader has its new registration and full report.
func (s *scen) restart(id string) {
	s.t.Helper()
	i := s.index(id)
	old := s.instanceOf(id)
	delete(s.dns, id)
	s.nodes[i] = s.tc.restartNode(s.nodes[i])
	eventually(s.t, 30*time.Second, id+" registered again with a full report", func() bool {
		r, err := s.ns.ListNodes(s.ctx, &pb.ListNodesRequest{})
		if err != nil {
			return false
		}
		for _, st := range r.Nodes {
			if st.Node.GetId() == id {
				return st.Node.GetInstanceId() != old && st.Live && st.FullReport
			}
		}
		return false
	})
}

func (s *scen) instanceOf(id string) string {
	r, err := s.ns.ListNodes(s.ctx, &pb.ListNodesRequest{})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, st := range r.Nodes {
		if st.Node.GetId() == id {
			return st.Node.GetInstanceId()
		}
	}
	return ""
}

// kill stops node id for good (a graceful close: its streams and its
// recovery tasks end at once).
func (s *scen) kill(id string) {
	s.t.Helper()
	s.node(id).Close()
}

// dn is node id's DataNode client (one connection per node incarnation).
func (s *scen) dn(id string) pb.DataNodeClient {
	if c, ok := s.dns[id]; ok {
		return c
	}
	c := dataNode(s.t, s.node(id))
	s.dns[id] = c
	return c
}

// openFile creates path for client w1 and allocates its first block.
func (s *scen) openFile(path string, repl uint32) (*pb.BlockRecord, []*pb.NodeLocation) {
	s.t.Helper()
	if _, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: path, Replication: repl, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		s.t.Fatalf("create %s: %v", path, err)
	}
	ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1"})
	if err != nil {
		s.t.Fatalf("add block to %s: %v", path, err)
	}
	if len(ab.Locations) != int(repl) {
		s.t.Fatalf("add block to %s: %d locations, want %d", path, len(ab.Locations), repl)
	}
	return ab.Result.Block, ab.Locations
}

// stage writes data as a replica of block id at gs straight into node id's
// dataset, every byte acked and synced: FINALIZED, or RBW without a writer
// (the state a dead writer's pipeline leaves).
func (s *scen) stage(id string, blk, gs uint64, data []byte, finalize bool) {
	s.t.Helper()
	if err := s.stageErr(id, blk, gs, data, finalize); err != nil {
		s.t.Fatal(err)
	}
}

// stageUnknown is stage for a block id the coordinators never allocated:
// the node reports the replica as soon as it exists, and the leader may
// have it deleted before staging ends — the outcome under test — which
// stops the writer; that is not a failure here.
func (s *scen) stageUnknown(id string, blk uint64, data []byte, finalize bool) {
	s.t.Helper()
	if err := s.stageErr(id, blk, 1, data, finalize); err != nil && replica.KindOf(err) != replica.KindAborted {
		s.t.Fatal(err)
	}
}

func (s *scen) stageErr(id string, blk, gs uint64, data []byte, finalize bool) error {
	st := s.node(id).Store()
	w, err := st.CreateRbw(s.ctx, "BP-1", replica.Block{ID: blk, GS: gs}, replica.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: create rbw %d: %w", id, blk, err)
	}
	for off := 0; off < len(data); off += 64 << 10 {
		p := data[off:min(len(data), off+64<<10)]
		if err := w.WritePacket(s.ctx, int64(off), p, blockio.Checksums(p)); err != nil {
			w.Close()
			return fmt.Errorf("%s: write %d: %w", id, blk, err)
		}
	}
	if err := w.SetBytesAcked(int64(len(data))); err != nil {
		w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	if finalize {
		_, err := w.Finalize(s.ctx)
		return err
	}
	return w.Close()
}

// replicaOn returns node id's replica of block blk, read from the node.
func (s *scen) replicaOn(id string, blk uint64) (*pb.Replica, bool) {
	s.t.Helper()
	reps, err := s.dn(id).ListReplicas(s.ctx, &pb.ListReplicasRequest{Pool: "BP-1"})
	if err != nil {
		s.t.Fatalf("%s: list replicas: %v", id, err)
	}
	for _, r := range reps.Replicas {
		if r.BlockId == blk {
			return r, true
		}
	}
	return nil, false
}

// waitReported waits until every node in ids has reported block blk in
// state st at gs with n bytes (the leader's soft state).
func (s *scen) waitReported(path string, blk uint64, ids []string, st pb.ReplicaState, gs uint64, n int64) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, fmt.Sprintf("%v reporting block %d %v", ids, blk, st), func() bool {
		stat, err := s.ns.Stat(s.ctx, &pb.StatRequest{Path: path})
		if err != nil {
			return false
		}
		for _, b := range stat.Blocks {
			if b.Id != blk {
				continue
			}
			got := 0
			for _, r := range b.ReportedLocations {
				if slices.Contains(ids, r.NodeId) && r.State == st && r.Gs == gs && r.NumBytes == n {
					got++
				}
			}
			return got == len(ids)
		}
		return false
	})
}

func (s *scen) recoverLease(path, client string) bool {
	s.t.Helper()
	r, err := s.ns.RecoverLease(s.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: client})
	if err != nil {
		s.t.Fatalf("recover lease %s by %s: %v", path, client, err)
	}
	return r.Closed
}

// waitClosed waits until path is closed and returns its status.
func (s *scen) waitClosed(path string, d time.Duration) *pb.StatResponse {
	s.t.Helper()
	var st *pb.StatResponse
	eventually(s.t, d, path+" closed", func() bool {
		var err error
		st, err = s.ns.Stat(s.ctx, &pb.StatRequest{Path: path})
		return err == nil && !st.File.UnderConstruction
	})
	return st
}

// nextGS is the leader's GS counter (every GS allocation advances it).
// nextGS is the next GS the current leader hands out. It reads the
// leader's state machine, which has applied every op answered so far: the
// member the test dialled may no longer lead (an election under load), and
// a follower may not have applied the last op yet.
func (e *fsEnv) nextGS() uint64 {
	var gs uint64
	e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) { gs = st.NextGS() })
	return gs
}

// events returns the leader's journal events of type typ, decoded.
func (e *fsEnv) journalEvents(typ string) []*fsmpb.NamespaceEvent {
	e.t.Helper()
	var out []*fsmpb.NamespaceEvent
	e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) {
		for from := st.FirstSeq(); from < st.NextSeq(); {
			batch := st.Read(from, 1000)
			if len(batch) == 0 {
				break
			}
			for _, se := range batch {
				if se.Type != typ {
					continue
				}
				var ev fsmpb.NamespaceEvent
				if err := proto.Unmarshal(se.Payload, &ev); err != nil {
					e.t.Fatalf("event %d: %v", se.Seq, err)
				}
				out = append(out, &ev)
			}
			from = batch[len(batch)-1].Seq + 1
		}
	})
	return out
}

// recoveriesOf lists the recovery ids started for block blk, in order.
func (e *fsEnv) recoveriesOf(blk uint64) []uint64 {
	var out []uint64
	for _, ev := range e.journalEvents(fsm.EventRecoveryStarted) {
		if b := ev.Result.GetBlock(); b.GetId() == blk {
			out = append(out, b.GetRecovery().GetRecoveryId())
		}
	}
	return out
}

// commitsOf lists the accepted recovery commits of block blk.
func (e *fsEnv) commitsOf(blk uint64) []*fsmpb.CommitBlockSyncOp {
	var out []*fsmpb.CommitBlockSyncOp
	for _, ev := range e.journalEvents(fsm.EventRecoveryCommitted) {
		if c := ev.Op.GetCommitBlockSync(); c.GetBlockId() == blk {
			out = append(out, c)
		}
	}
	return out
}

// checkSynchronised is invariant 4 read from the nodes: the block is
// COMPLETE at length want with its expected locations exactly ids, and on
// each of them the replica is FINALIZED at the block's GS and length with
// the bytes data[:want], every chunk verifying.
func (s *scen) checkSynchronised(path string, blk uint64, ids []string, data []byte, want int) *pb.BlockStatus {
	s.t.Helper()
	st := s.stat(path)
	var b *pb.BlockStatus
	for _, x := range st.Blocks {
		if x.Id == blk {
			b = x
		}
	}
	if b == nil {
		s.t.Fatalf("%s: no block %d in %v", path, blk, st)
	}
	if b.State != pb.BlockState_BLOCK_STATE_COMPLETE || b.NumBytes != uint64(want) {
		s.t.Fatalf("block %d: %v with %d bytes, want COMPLETE with %d", blk, b.State, b.NumBytes, want)
	}
	got := slices.Clone(b.ExpectedLocations)
	slices.Sort(got)
	ids = slices.Clone(ids)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		s.t.Fatalf("block %d: locations %v, want %v", blk, got, ids)
	}
	for _, id := range ids {
		r, ok := s.replicaOn(id, blk)
		if !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != b.Gs || r.NumBytes != int64(want) {
			s.t.Fatalf("%s: replica %v, want FINALIZED at GS %d with %d bytes", id, r, b.Gs, want)
		}
		if got := readReplica(s.ctx, s.t, s.dn(id), b); !bytes.Equal(got, data[:want]) {
			s.t.Fatalf("%s: the replica's %d bytes differ from the first %d written", id, len(got), want)
		}
	}
	return b
}

func serverIDs(nodes []*nodeserver.Server) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID())
	}
	return out
}

func randData(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func locIDs(locs []*pb.NodeLocation) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.NodeId)
	}
	return out
}

// stays checks that cond holds for the whole of d (polled): an observation
// window for "nothing happens", never a wait for something to happen.
func stays(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// writeBlock streams data through a create pipeline on locs; with last
// the replicas are finalized, else they stay RBW with every byte acked
// (the stream is aborted as a dying writer's).
func (s *scen) writeBlock(blk *pb.BlockRecord, locs []*pb.NodeLocation, data []byte, last bool) {
	s.t.Helper()
	pl := openPipeline(s.ctx, s.t, blk, locs, "w1")
	for _, p := range blockio.SplitPackets(data, 0, 64<<10) {
		p.Last = last && p.End() == int64(len(data))
		if _, err := pl.Send(s.ctx, p); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := pl.Flush(s.ctx); err != nil {
		s.t.Fatal(err)
	}
	if last {
		if err := pl.Close(); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	pl.Abort()
}

func grpcCode(err error) codes.Code { return status.Code(err) }

// pauseAt makes every node, as a recovery primary of a file under prefix,
// sleep d once initReplicaRecovery succeeded everywhere and before
// updateReplicaUnderRecovery and the commit (nodeserver's test failpoint).
func pauseAt(d time.Duration, prefix string) func(int, *nodeserver.Config) {
	return func(_ int, c *nodeserver.Config) { c.FailpointRecoveryPause = d.String() + "@" + prefix }
}

// waitRUR waits until every node in ids holds block blk as RUR under
// recovery id rid: the primary initialised them all and is paused.
func (s *scen) waitRUR(blk, rid uint64, ids []string) {
	s.t.Helper()
	eventually(s.t, 20*time.Second, fmt.Sprintf("%v RUR under recovery %d", ids, rid), func() bool {
		for _, id := range ids {
			r, ok := s.replicaOn(id, blk)
			if !ok || r.State != pb.ReplicaState_REPLICA_STATE_RUR || r.RecoveryId != rid {
				return false
			}
		}
		return true
	})
}

// deadPrimary is a recovery whose first primary died after initialising
// every replica, re-driven by a second attempt that is now paused between
// its own initialisation and its updates.
type deadPrimary struct {
	*scen
	blk     *pb.BlockRecord
	nodes   []string // expected locations
	lengths map[string]int
	data    []byte
	gs0     uint64 // next GS before the first attempt
	r1, r2  *pb.BlockRecovery
}

func stageDeadPrimary(t *testing.T, path string) *deadPrimary {
	s := startScen(t, 3, pauseAt(2*time.Second, path), func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 6*time.Second, 100*time.Millisecond
	})
	d := &deadPrimary{scen: s, lengths: map[string]int{}, data: randData(10, 3000)}
	var locs []*pb.NodeLocation
	d.blk, locs = s.openFile(path, 3)
	d.nodes = locIDs(locs)
	for i, id := range d.nodes {
		d.lengths[id] = []int{3000, 2600, 2900}[i]
		s.stage(id, d.blk.Id, d.blk.Gs, d.data[:d.lengths[id]], false)
	}
	d.gs0 = s.nextGS()
	if s.recoverLease(path, "w2") {
		t.Fatal("closed at once")
	}
	d.r1 = s.stat(path).Blocks[0].Recovery
	if d.r1.GetRecoveryId() != d.gs0 || d.r1.Attempt != 1 || d.r1.Primary == "" {
		t.Fatalf("first attempt %v (next GS was %d)", d.r1, d.gs0)
	}
	s.waitRUR(d.blk.Id, d.r1.RecoveryId, d.nodes)
	s.kill(d.r1.Primary)
	return d
}

// waitSecondAttempt waits for the re-drive and for its primary to have
// initialised the live replicas.
func (d *deadPrimary) waitSecondAttempt(path string) {
	d.t.Helper()
	eventually(d.t, 30*time.Second, "the second attempt", func() bool {
		d.r2 = d.stat(path).Blocks[0].Recovery
		return d.r2.GetRecoveryId() != d.r1.RecoveryId
	})
	d.waitRUR(d.blk.Id, d.r2.RecoveryId, d.survivors())
}

func (d *deadPrimary) survivors() []string {
	return slices.DeleteFunc(slices.Clone(d.nodes), func(id string) bool { return id == d.r1.Primary })
}

func (d *deadPrimary) shortest() int {
	n := len(d.data)
	for _, id := range d.survivors() {
		n = min(n, d.lengths[id])
	}
	return n
}

// recovered stages RBW replicas of the given lengths of one block of path
// on 3 nodes and runs a real recovery to its end; it returns the block as
// the writer had it, the data, and the accepted commit.
func (s *scen) recovered(path string, lengths [3]int) (*pb.BlockRecord, []string, []byte, *fsmpb.CommitBlockSyncOp) {
	s.t.Helper()
	blk, locs := s.openFile(path, 3)
	data := randData(int64(len(path)), slices.Max(lengths[:]))
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:lengths[i]], false)
	}
	s.recoverLease(path, "w2")
	s.waitClosed(path, 30*time.Second)
	c := s.commitsOf(blk.Id)
	if len(c) != 1 {
		s.t.Fatalf("commits %v", c)
	}
	return blk, locIDs(locs), data, c[0]
}

func dataNodeConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func addrsOf(locs []*pb.NodeLocation) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.GrpcAddr)
	}
	return out
}

// heartbeat sends one heartbeat of a faked node and returns its commands.
func (e *fsEnv) fakeHeartbeat(node string) []*clusterpb.NodeCommand {
	e.t.Helper()
	hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: node, Storages: []*pb.StorageReport{{StorageId: "s1", Capacity: 1000, Free: 100}}})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", node, err)
	}
	return hb.Commands
}

// heartbeatAnswering heartbeats as node and, when the leader asks for a
// full block report (a new leader asks every node, after an election),
// sends one listing reps, as a real node would. A test's fake node that
// never answers keeps a leader elected during the test in safe mode until
// its timeout, and a safe-mode leader re-drives no recovery.
func (e *fsEnv) heartbeatAnswering(node string, reps ...*pb.ReportedReplica) []*clusterpb.NodeCommand {
	e.t.Helper()
	cmds := e.fakeHeartbeat(node)
	if hasFullReportCmd(cmds) {
		if _, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: node, Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}}); err != nil {
			e.t.Fatalf("full report of %s: %v", node, err)
		}
	}
	return cmds
}

// nodeDead reports whether the leader lists node as dead (false when
// ListNodes fails, for polling).
func (e *fsEnv) nodeDead(node string) bool {
	r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
	if err != nil {
		return false
	}
	for _, n := range r.Nodes {
		if n.Node.GetId() == node {
			return n.Dead
		}
	}
	return false
}

func (e *fsEnv) nodeLive(node string) bool {
	e.t.Helper()
	r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range r.Nodes {
		if n.Node.GetId() == node {
			return n.Live
		}
	}
	return false
}

// blockData finds the FINALIZED data file of block id under dir.
func blockData(t *testing.T, dir string, id uint64) string {
	t.Helper()
	var found string
	name := fmt.Sprintf("blk_%d", id)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name && strings.Contains(p, "finalized") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no finalized data file of block %d under %s", id, dir)
	}
	return found
}

// appendTo appends all[from:] to path, whose content is all[:from], as
// client w1 (Append, an append pipeline on the reopened block, Complete)
// and returns the block's new GS. It first waits until every node has
// reported the last block finalized at its GS with from bytes: Complete
// needs only the minimum replication reported, and an append goes only to
// the replicas the coordinator has heard of (as HDFS's NameNode does), so
// an append right after a completion could leave a slow reporter out.
func (s *scen) appendTo(path string, all []byte, from int) uint64 {
	s.t.Helper()
	st := s.stat(path)
	last := st.Blocks[len(st.Blocks)-1]
	s.waitReported(path, last.Id, serverIDs(s.nodes), pb.ReplicaState_REPLICA_STATE_FINALIZED, last.Gs, int64(from))
	r, err := s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: "w1"})
	if err != nil {
		s.t.Fatalf("append %s: %v", path, err)
	}
	nb, locs := r.Result.Block, r.Locations
	pl := s.openAppend(path, nb, locs, int64(from))
	for _, p := range blockio.SplitPackets(all, int64(from), 64<<10) {
		p.Last = p.End() == int64(len(all))
		if _, err := pl.Send(s.ctx, p); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.complete(path, &pb.BlockRef{Id: nb.Id, Gs: nb.Gs, NumBytes: uint64(len(all))})
	return nb.Gs
}

// openAppend opens the append pipeline of nb (from the replicas' GS before
// the append, looked up on the first node).
func (s *scen) openAppend(path string, nb *pb.BlockRecord, locs []*pb.NodeLocation, length int64) *blockio.Pipeline {
	s.t.Helper()
	r, ok := s.replicaOn(locs[0].NodeId, nb.Id)
	if !ok {
		s.t.Fatalf("%s holds no replica of %d", locs[0].NodeId, nb.Id)
	}
	pl, err := blockio.Open(s.ctx, dataNodeConn(s.t, locs[0].GrpcAddr), &pb.WriteSetup{Pool: "BP-1", BlockId: nb.Id, Gs: r.Gs, NewGs: nb.Gs,
		Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, MinBytesRcvd: length, MaxBytesRcvd: length, ClientName: "w1", Targets: addrsOf(locs[1:])},
		blockio.Options{Address: locs[0].GrpcAddr})
	if err != nil {
		s.t.Fatalf("append pipeline of %s: %v", path, err)
	}
	return pl
}

// complete completes path with last, retrying until the replicas are
// reported.
func (s *scen) complete(path string, last *pb.BlockRef) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, path+" completed", func() bool {
		c, err := s.ns.Complete(s.ctx, &pb.CompleteRequest{Path: path, ClientName: "w1", Last: last})
		if err != nil && grpcCode(err) != codes.Unavailable {
			s.t.Fatalf("complete %s: %v", path, err)
		}
		return err == nil && c.Result.GetClosed()
	})
}

// ---------------------------------------------------------------------------
// The scenarios, in the order of §R7.

// TestScenario01ClientDiesBeforeData — §R7 scenario 1: "Client dies before
// any DN got data. Last block UC, no expected locations known, NN length
// 0. Hard limit expires → last block removed, file closed, file length =
// sum of earlier blocks; no recovery command sent."
//
// In this design AddBlock always records the pipeline as the block's
// expected locations (FSM state, design §R9.9), so a writer dying right after
// AddBlock leaves a block WITH locations: its recovery finds no replica
// anywhere and deletes the block ("locations-no-replica", real nodes).
// The rule-4b state itself, no expected location at all, is reachable only
// through a close_file=false commit naming unregistered targets; from there
// the hard limit removes the block with no recovery ("no-locations", faked
// node reports).
func TestScenario01ClientDiesBeforeData(t *testing.T) {
	t.Parallel()
	t.Run("locations-no-replica", func(t *testing.T) {
		s := startScen(t, 3, nil)
		b1, locs := s.openFile("/s01", 3)
		data := randData(1, 70_000)
		s.writeBlock(b1, locs, data, true)
		s.waitReported("/s01", b1.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b1.Gs, int64(len(data)))
		ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s01", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
		if err != nil {
			t.Fatal(err)
		}
		b2 := ab.Result.Block
		// The writer dies before it opens b2's pipeline.
		if s.recoverLease("/s01", "w2") {
			t.Fatal("closed at once although the last block has locations")
		}
		st := s.waitClosed("/s01", 30*time.Second)
		if len(st.Blocks) != 1 || st.Blocks[0].Id != b1.Id || st.File.Length != uint64(len(data)) || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE {
			t.Fatalf("after recovery: %v, want only block %d (%d bytes)", st, b1.Id, len(data))
		}
		if c := s.commitsOf(b2.Id); len(c) != 1 || !c[0].DeleteBlock || len(c[0].Targets) != 0 {
			t.Fatalf("commits of the empty block: %v, want one delete", c)
		}
		for _, id := range locIDs(ab.Locations) {
			if r, ok := s.replicaOn(id, b2.Id); ok {
				t.Fatalf("%s holds a replica of the never-written block: %v", id, r)
			}
		}
		s.checkSynchronised("/s01", b1.Id, locIDs(locs), data, len(data))
	})
	t.Run("no-locations", func(t *testing.T) {
		e := newFSEnv(t, shortLeases)
		e.registerNodes(3)
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s01b", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
			t.Fatal(err)
		}
		ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s01b", ClientName: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		b1 := ab.Result.Block
		for _, n := range b1.ExpectedLocations {
			e.report(n, b1, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
		}
		ab, err = e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s01b", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: 100}})
		if err != nil {
			t.Fatal(err)
		}
		b2 := ab.Result.Block
		if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/s01b", ClientName: "w2"}); err != nil {
			t.Fatal(err)
		}
		primary, cmd := e.waitRecoverCmd(b2.Id, 0)
		// A commit that keeps the file open and names no registered node
		// leaves the last block with no expected location and length 0.
		res, err := e.nl.CommitBlockSynchronization(e.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: primary, BlockId: b2.Id, RecoveryId: cmd.RecoveryId,
			NewGs: cmd.RecoveryId, OldGs: cmd.Gs, NewLength: 0, CloseFile: false, Targets: []string{"ghost"}})
		if err != nil {
			t.Fatal(err)
		}
		gs := e.nextGS()
		if l, f := res.Result.GetBlock(), res.Result.GetFile(); !f.GetUnderConstruction() || l.GetState() != fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION ||
			len(l.GetExpectedLocations()) != 0 || l.GetNumBytes() != 0 {
			t.Fatalf("staging: %v", res.Result)
		}
		// The hard limit (2 s) passes: the block is removed, no recovery.
		eventually(t, 30*time.Second, "/s01b closed", func() bool { return !e.stat("/s01b").File.UnderConstruction })
		st := e.stat("/s01b")
		if len(st.Blocks) != 1 || st.Blocks[0].Id != b1.Id || st.File.Length != 100 {
			t.Fatalf("after the hard limit: %v, want block %d only, length 100", st, b1.Id)
		}
		if got := e.nextGS(); got != gs {
			t.Fatalf("a GS was allocated (next GS %d -> %d): a recovery was started", gs, got)
		}
		if r := e.recoveriesOf(b2.Id); len(r) != 1 {
			t.Fatalf("recoveries of block %d: %v, want only the staging one", b2.Id, r)
		}
		for i := 1; i <= 3; i++ {
			hb, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: nodeID(i), Storages: []*pb.StorageReport{{StorageId: "s1", Free: uint64(i * 100)}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := recoverCmds(hb.Commands); len(r) != 0 {
				t.Fatalf("%s got recovery commands %v", nodeID(i), r)
			}
		}
	})
}

// TestScenario02ZeroBytesWritten — §R7 scenario 2: "Pipeline set up but zero
// bytes written. Expected locations = 3 DNs, each has a 0-byte RBW. →
// recovery starts; primary sees no candidate (len 0) → commit with
// deleteBlock=true → block removed, file closed."
func TestScenario02ZeroBytesWritten(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s02", 3)
	pl := openPipeline(s.ctx, t, blk, locs, "w1")
	for _, id := range locIDs(locs) {
		if r, ok := s.replicaOn(id, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.NumBytes != 0 {
			t.Fatalf("%s: %v, want a 0-byte RBW", id, r)
		}
	}
	pl.Abort()
	if s.recoverLease("/s02", "w2") {
		t.Fatal("closed at once: no recovery ran")
	}
	st := s.waitClosed("/s02", 30*time.Second)
	if len(st.Blocks) != 0 || st.File.Length != 0 {
		t.Fatalf("after recovery: %v, want no block", st)
	}
	if r := s.recoveriesOf(blk.Id); len(r) != 1 {
		t.Fatalf("recoveries %v, want one", r)
	}
	c := s.commitsOf(blk.Id)
	if len(c) != 1 || !c[0].DeleteBlock || !c[0].CloseFile || c[0].NewLength != 0 || len(c[0].Targets) != 0 {
		t.Fatalf("commits %v, want one delete_block commit", c)
	}
	// The empty replicas now belong to no block: the nodes are told to
	// delete them.
	for _, id := range locIDs(locs) {
		eventually(t, 30*time.Second, id+" dropping the deleted block's replica", func() bool {
			_, ok := s.replicaOn(id, blk.Id)
			return !ok
		})
	}
}

// TestScenario03AllBlocksCompleteFileOpen — §R7 scenario 3: "All blocks
// COMPLETE but file still open (... or a file with zero blocks) →
// internalReleaseLease closes immediately, recoverLease returns true, no
// GS allocated." Staged with real nodes: a finalized, reported block whose
// successor was abandoned; a file without blocks; and one more without
// blocks left to the hard limit.
func TestScenario03AllBlocksCompleteFileOpen(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit, c.FS.LeaseCheckInterval = time.Second, 3*time.Second, 100*time.Millisecond
	})
	b1, locs := s.openFile("/s03", 3)
	data := randData(3, 20_000)
	s.writeBlock(b1, locs, data, true)
	s.waitReported("/s03", b1.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b1.Gs, int64(len(data)))
	ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s03", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: "/s03", ClientName: "w1", BlockId: ab.Result.Block.Id}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/s03z", "/s03h"} {
		if _, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: "w9"}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.stat("/s03"); !st.File.UnderConstruction || len(st.Blocks) != 1 || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE {
		t.Fatalf("staging: %v", st)
	}
	gs := s.nextGS()
	for _, p := range []string{"/s03", "/s03z"} {
		if !s.recoverLease(p, "w2") {
			t.Fatalf("recover lease of %s: false, want closed at once", p)
		}
		if st := s.stat(p); st.File.UnderConstruction {
			t.Fatalf("%s still open after recover lease answered true", p)
		}
	}
	s.waitClosed("/s03h", 30*time.Second) // the hard limit
	if got := s.nextGS(); got != gs {
		t.Fatalf("next GS %d -> %d: a GS was allocated", gs, got)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 0 {
		t.Fatalf("recoveries started: %v", ev)
	}
	if st := s.stat("/s03"); st.File.Length != uint64(len(data)) || st.Blocks[0].Gs != b1.Gs {
		t.Fatalf("after close: %v", st)
	}
}

// TestScenario04LastBlockCommitted — §R7 scenario 4: "Last block COMMITTED,
// ≥1 FINALIZED replica known → closed immediately. COMMITTED, 0 replicas
// known → AlreadyBeingCreated; no recoveryId allocated; monitor retries
// each cycle it is due; file closes as soon as one RECEIVED IBR arrives and
// the next attempt runs." Real nodes hold the block RBW, every byte acked;
// the writer committed it (AddBlock of the next, then abandoned) and died.
func TestScenario04LastBlockCommitted(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit, c.FS.LeaseCheckInterval = time.Second, 2*time.Second, 100*time.Millisecond
	})
	b1, locs := s.openFile("/s04", 3)
	data := randData(4, 30_000)
	s.writeBlock(b1, locs, data, false)
	for _, id := range locIDs(locs) {
		if r, ok := s.replicaOn(id, b1.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.BytesAcked != int64(len(data)) {
			t.Fatalf("%s: %v, want RBW with every byte acked", id, r)
		}
	}
	ab, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: "/s04", ClientName: "w1", Previous: &pb.BlockRef{Id: b1.Id, Gs: b1.Gs, NumBytes: uint64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: "/s04", ClientName: "w1", BlockId: ab.Result.Block.Id}); err != nil {
		t.Fatal(err)
	}
	if st := s.stat("/s04"); len(st.Blocks) != 1 || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMMITTED {
		t.Fatalf("staging: %v, want the last block COMMITTED", st)
	}
	gs := s.nextGS()
	_, err = s.ns.RecoverLease(s.ctx, &pb.RecoverLeaseRequest{Path: "/s04", ClientName: "w2"})
	wantCode(t, "recover lease of a committed, unreplicated block", err, codes.Unavailable, "committed-not-replicated")
	// Past the hard limit the monitor retries every cycle: nothing changes.
	stays(t, 3*time.Second, "COMMITTED, open, no GS allocated", func() bool {
		st := s.stat("/s04")
		return st.File.UnderConstruction && st.File.LeaseHolder == "w1" && st.Blocks[0].State == pb.BlockState_BLOCK_STATE_COMMITTED && s.nextGS() == gs
	})
	// One node finalizes its replica (a RECEIVED report): the next cycle
	// closes the file.
	id := locIDs(locs)[1]
	if _, err := s.node(id).Store().FinalizeBlock(s.ctx, "BP-1", replica.Block{ID: b1.Id, GS: b1.Gs}); err != nil {
		t.Fatal(err)
	}
	st := s.waitClosed("/s04", 30*time.Second)
	if st.Blocks[0].State != pb.BlockState_BLOCK_STATE_COMPLETE || st.Blocks[0].Gs != b1.Gs || st.File.Length != uint64(len(data)) {
		t.Fatalf("after close: %v", st)
	}
	if got := s.nextGS(); got != gs {
		t.Fatalf("next GS %d -> %d: a recovery id was allocated", gs, got)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 0 {
		t.Fatalf("recoveries started: %v", ev)
	}
	if !s.recoverLease("/s04", "w2") {
		t.Fatal("recover lease of the closed file: false")
	}
}

// TestScenario05ThreeRBWDifferentLengths — §R7 scenario 5: "Three RBW
// replicas with bytesOnDisk 100/120/150, NN GS g → newLength = 100, all
// three truncated to 100, GS = recoveryId, FINALIZED; NN block COMPLETE,
// len 100, 3 locations."
func TestScenario05ThreeRBWDifferentLengths(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s05", 3)
	data := randData(5, 150)
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:[]int{100, 120, 150}[i]], false)
	}
	gs0 := s.nextGS()
	if s.recoverLease("/s05", "w2") {
		t.Fatal("recover lease closed a file whose last block needs a recovery")
	}
	st := s.waitClosed("/s05", 30*time.Second)
	rids := s.recoveriesOf(blk.Id)
	if len(rids) != 1 || rids[0] != gs0 {
		t.Fatalf("recovery ids %v, want one, %d (the next GS when it started)", rids, gs0)
	}
	b := s.checkSynchronised("/s05", blk.Id, locIDs(locs), data, 100)
	if b.Gs != rids[0] || b.Gs <= blk.Gs {
		t.Fatalf("block GS %d: want the recovery id %d (> the writer's %d)", b.Gs, rids[0], blk.Gs)
	}
	if st.File.Length != 100 || len(st.Blocks) != 1 {
		t.Fatalf("file after recovery: %v", st)
	}
	// The nodes report the synchronised replicas: 3 locations.
	s.waitReported("/s05", blk.Id, locIDs(locs), pb.ReplicaState_REPLICA_STATE_FINALIZED, b.Gs, 100)
	if c := s.commitsOf(blk.Id); len(c) != 1 || c[0].NewLength != 100 || len(c[0].Targets) != 3 || c[0].DeleteBlock {
		t.Fatalf("commits %v", c)
	}
}

// TestScenario06InconsistentFinalizedLengths — §R7 scenario 6: "Two
// FINALIZED replicas with different lengths (150 vs 140) → primary fails
// with 'Inconsistent size'; no commit; file remains UNDER_RECOVERY; every
// later attempt fails the same way (needs operator action). Test that the
// NN keeps retrying without crashing and without closing."
func TestScenario06InconsistentFinalizedLengths(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = time.Second, 100*time.Millisecond
	})
	blk, locs := s.openFile("/s06", 3)
	data := randData(6, 150)
	lengths := []int{150, 140, 150}
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:lengths[i]], true)
	}
	s.recoverLease("/s06", "w2")
	var seen []*pb.BlockRecovery
	eventually(t, 60*time.Second, "4 recovery attempts", func() bool {
		st := s.stat("/s06")
		if !st.File.UnderConstruction || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
			t.Fatalf("the file left recovery: %v", st)
		}
		r := st.Blocks[0].Recovery
		if n := len(seen); n == 0 || seen[n-1].RecoveryId != r.RecoveryId {
			seen = append(seen, r)
		}
		return r.Attempt >= 4
	})
	for i := 1; i < len(seen); i++ {
		if seen[i].RecoveryId <= seen[i-1].RecoveryId || seen[i].Attempt <= seen[i-1].Attempt {
			t.Fatalf("attempts %v: ids and attempts must grow", seen)
		}
	}
	if c := s.commitsOf(blk.Id); len(c) != 0 {
		t.Fatalf("commits %v: an inconsistent recovery committed", c)
	}
	for i, id := range locIDs(locs) {
		r, ok := s.replicaOn(id, blk.Id)
		if !ok || r.Gs != blk.Gs || r.NumBytes != int64(lengths[i]) ||
			(r.State != pb.ReplicaState_REPLICA_STATE_RUR && r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED) {
			t.Fatalf("%s: %v, want its FINALIZED %d bytes at GS %d untouched", id, r, lengths[i], blk.Gs)
		}
	}
	for i := range s.tc.servers {
		if s.tc.server(i) == nil {
			t.Fatalf("coordinator %d stopped", i)
		}
	}
	s.tc.waitConverged()
}

// TestScenario07OnlyRWRReplicas — §R7 scenario 7: "Only RWR replicas (all
// DNs restarted), lengths 512/1024/1000. → all participate, length 512."
func TestScenario07OnlyRWRReplicas(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s07", 3)
	data := randData(7, 1024)
	lengths := []int{512, 1024, 1000}
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:lengths[i]], false)
	}
	for i, id := range locIDs(locs) {
		s.restart(id)
		if r, ok := s.replicaOn(id, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RWR || r.NumBytes != int64(lengths[i]) {
			t.Fatalf("%s after restart: %v, want RWR with %d bytes", id, r, lengths[i])
		}
	}
	s.waitNodes()
	s.recoverLease("/s07", "w2")
	s.waitClosed("/s07", 30*time.Second)
	b := s.checkSynchronised("/s07", blk.Id, locIDs(locs), data, 512)
	if rids := s.recoveriesOf(blk.Id); len(rids) != 1 || b.Gs != rids[0] {
		t.Fatalf("GS %d, recoveries %v", b.Gs, rids)
	}
}

// TestScenario08StaleReplica — §R7 scenario 8: "Stale replica: one DN has GS
// g−1 (missed a pipeline recovery). → its initReplicaRecovery fails
// (replica GS < block GS) → counted as error; others proceed. If it is the
// only location → 'All datanodes failed', no commit." The stale replica is
// then replaced: invalidated once the block is COMPLETE, and re-replicated.
func TestScenario08StaleReplica(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, fastReplication, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 2*time.Second, 100*time.Millisecond
	})
	// A pipeline recovery bumped two replicas to g2; the third node lost
	// the bump (it acknowledged it, then crashed before it was durable),
	// so the pipeline update still names it.
	stale := func(path string, repl uint32, n int, keep []int) (*pb.BlockRecord, []string, []byte) {
		blk, locs := s.openFile(path, repl)
		data := randData(int64(n), n)
		for _, id := range locIDs(locs) {
			s.stage(id, blk.Id, blk.Gs, data, false)
		}
		r, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
		if err != nil {
			t.Fatal(err)
		}
		g2 := r.Result.NewGs
		for _, i := range keep {
			w, err := s.node(locs[i].NodeId).Store().RecoverRbw(s.ctx, "BP-1", replica.Block{ID: blk.Id, GS: blk.Gs}, g2, int64(n), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		if _, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g2,
			NewLength: uint64(n), NewNodes: locIDs(locs)}); err != nil {
			t.Fatal(err)
		}
		return blk, locIDs(locs), data
	}

	blk, nodes, data := stale("/s08", 3, 1000, []int{0, 1})
	s.recoverLease("/s08", "w2")
	s.waitClosed("/s08", 30*time.Second)
	b := s.checkSynchronised("/s08", blk.Id, nodes[:2], data, 1000)
	if c := s.commitsOf(blk.Id); len(c) != 1 || len(c[0].Targets) != 2 || slices.Contains(c[0].Targets, nodes[2]) {
		t.Fatalf("commits %v: want the two fresh replicas only", c)
	}
	eventually(t, 30*time.Second, nodes[2]+"'s stale replica replaced by a copy", func() bool {
		r, ok := s.replicaOn(nodes[2], blk.Id)
		return ok && r.Gs == b.Gs && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED
	})
	if got := readReplica(s.ctx, t, s.dn(nodes[2]), b); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", nodes[2])
	}

	// The only location is stale: every attempt fails, nothing commits.
	blk, nodes, _ = stale("/s08b", 1, 700, nil)
	s.recoverLease("/s08b", "w2")
	eventually(t, 30*time.Second, "a second attempt", func() bool {
		st := s.stat("/s08b")
		return st.Blocks[0].Recovery.GetAttempt() >= 2
	})
	st := s.stat("/s08b")
	if !st.File.UnderConstruction || st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || len(s.commitsOf(blk.Id)) != 0 {
		t.Fatalf("only a stale location: %v, commits %v", st, s.commitsOf(blk.Id))
	}
	if r, ok := s.replicaOn(nodes[0], blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_RBW || r.Gs != blk.Gs || r.NumBytes != 700 {
		t.Fatalf("the stale replica changed: %v", r)
	}
}

// TestScenario09LateOlderRecovery — §R7 scenario 9: "Late older recovery. B
// (1002) already initialized; A's init (1001) arrives → RecoveryInProgress
// → A's primary aborts silently, sends no commit; B unaffected." A is a
// first attempt whose primary died mid-way; B its re-drive, paused after
// initialising the replicas; A's late messages (its init on every live
// replica, then its commit) are delivered in B's window.
func TestScenario09LateOlderRecovery(t *testing.T) {
	t.Parallel()
	const path = "/s09"
	d := stageDeadPrimary(t, path)
	d.waitSecondAttempt(path)
	r1, r2 := d.r1.RecoveryId, d.r2.RecoveryId
	before := d.stat(path)
	seq, gs := d.nextSeq(), d.nextGS()
	for _, id := range d.survivors() {
		_, err := d.dn(id).InitReplicaRecovery(d.ctx, &pb.InitReplicaRecoveryRequest{Pool: "BP-1", BlockId: d.blk.Id, Gs: d.blk.Gs,
			NumBytes: int64(d.lengths[id]), RecoveryId: r1})
		wantCode(t, id+": A's late init", err, codes.Aborted, "RECOVERY_IN_PROGRESS")
		if r, _ := d.replicaOn(id, d.blk.Id); r.GetState() != pb.ReplicaState_REPLICA_STATE_RUR || r.RecoveryId != r2 || r.BytesOnDisk != int64(d.lengths[id]) || r.Gs != d.blk.Gs {
			t.Fatalf("%s after A's late init: %v, want B's RUR unchanged", id, r)
		}
	}
	// Had A's primary not aborted, its commit would carry A's id: refused,
	// and nothing changes.
	_, err := d.nl.CommitBlockSynchronization(d.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: d.r1.Primary, BlockId: d.blk.Id, RecoveryId: r1, NewGs: r1,
		OldGs: d.blk.Gs, NewLength: uint64(d.shortest()), CloseFile: true, Targets: d.survivors()})
	wantCode(t, "A's commit", err, codes.Aborted, "recovery-id-mismatch")
	after := d.stat(path)
	if !proto.Equal(before.File, after.File) || after.Blocks[0].Gs != before.Blocks[0].Gs || !proto.Equal(before.Blocks[0].Recovery, after.Blocks[0].Recovery) {
		t.Fatalf("A's refused messages changed the file:\n%v\n%v", before, after)
	}
	if d.nextSeq() != seq || d.nextGS() != gs {
		t.Fatal("A's refused commit wrote a journal event or allocated a GS")
	}
	// B goes on as if nothing happened.
	d.waitClosed(path, 30*time.Second)
	b := d.checkSynchronised(path, d.blk.Id, d.survivors(), d.data, d.shortest())
	if b.Gs != r2 {
		t.Fatalf("block GS %d, want B's id %d", b.Gs, r2)
	}
	if c := d.commitsOf(d.blk.Id); len(c) != 1 || c[0].RecoveryId != r2 {
		t.Fatalf("commits %v, want B's only", c)
	}
}

// TestScenario10PrimaryDiesAfterInit — §R7 scenario 10: "Primary dies after
// init, before commit. NN stays UNDER_RECOVERY; no new attempt within 90 s
// (recoverLease returns false without a new id); after 90 s the next
// trigger allocates a new id and picks a different alive primary (not
// previously chosen); replicas still in RUR are re-initialized with the
// higher id and recovery completes." (The attempt timeout is 6 s here.)
func TestScenario10PrimaryDiesAfterInit(t *testing.T) {
	t.Parallel()
	const path = "/s10"
	d := stageDeadPrimary(t, path)
	// Within the attempt's timeout: no new attempt, no new id.
	if d.recoverLease(path, "w3") {
		t.Fatal("recover lease closed the file")
	}
	st := d.stat(path)
	if got := st.Blocks[0].Recovery; st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || got.RecoveryId != d.r1.RecoveryId || got.Attempt != 1 {
		t.Fatalf("within the timeout: %v, want attempt 1 (%d) still", st.Blocks[0], d.r1.RecoveryId)
	}
	if d.nextGS() != d.gs0+1 {
		t.Fatalf("next GS %d: a second id was allocated within the timeout", d.nextGS())
	}
	d.waitSecondAttempt(path)
	if d.r2.Attempt != 2 || d.r2.RecoveryId <= d.r1.RecoveryId || d.r2.Primary == d.r1.Primary || !slices.Contains(d.survivors(), d.r2.Primary) ||
		!slices.Equal(d.r2.TriedPrimaries, []string{d.r1.Primary, d.r2.Primary}) {
		t.Fatalf("second attempt %v after %v", d.r2, d.r1)
	}
	d.waitClosed(path, 30*time.Second)
	b := d.checkSynchronised(path, d.blk.Id, d.survivors(), d.data, d.shortest())
	if b.Gs != d.r2.RecoveryId {
		t.Fatalf("block GS %d, want %d", b.Gs, d.r2.RecoveryId)
	}
	if r := d.recoveriesOf(d.blk.Id); !slices.Equal(r, []uint64{d.r1.RecoveryId, d.r2.RecoveryId}) {
		t.Fatalf("recoveries %v", r)
	}
	if c := d.commitsOf(d.blk.Id); len(c) != 1 || c[0].RecoveryId != d.r2.RecoveryId {
		t.Fatalf("commits %v", c)
	}
}

// TestScenario11CommitRetriedAfterSuccess — §R7 scenario 11: "Commit retried
// after success (RPC retry / DN re-send) → file already closed with
// COMPLETE last block → success, no second CLOSE journaled."
func TestScenario11CommitRetriedAfterSuccess(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, nodes, data, c := s.recovered("/s11", [3]int{4000, 3500, 4000})
	before, seq := s.stat("/s11"), s.nextSeq()
	req := &clusterpb.CommitBlockSyncRequest{NodeId: nodes[0], BlockId: c.BlockId, RecoveryId: c.RecoveryId, NewGs: c.NewGs, OldGs: c.OldGs,
		NewLength: c.NewLength, CloseFile: c.CloseFile, Targets: c.Targets}
	res, err := s.nl.CommitBlockSynchronization(s.ctx, req)
	if err != nil || !res.Result.GetClosed() || !res.Result.GetUnchanged() {
		t.Fatalf("retried commit: %v, %v; want an unchanged success", res, err)
	}
	// A "retry" that disagrees with what was applied is refused.
	bad := proto.Clone(req).(*clusterpb.CommitBlockSyncRequest)
	bad.NewLength--
	_, err = s.nl.CommitBlockSynchronization(s.ctx, bad)
	wantCode(t, "a retry with another length", err, codes.FailedPrecondition, "length-mismatch")
	after := s.stat("/s11")
	if !proto.Equal(before.File, after.File) || !slices.Equal(before.Blocks[0].ExpectedLocations, after.Blocks[0].ExpectedLocations) ||
		after.Blocks[0].Gs != c.NewGs || after.Blocks[0].NumBytes != c.NewLength {
		t.Fatalf("the retries changed the file:\n%v\n%v", before, after)
	}
	if s.nextSeq() != seq || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatal("a retried commit was journaled")
	}
	s.checkSynchronised("/s11", blk.Id, nodes, data, 3500)
}

// TestScenario12DeleteCommitForGoneBlock — §R7 scenario 12: "deleteBlock
// commit for a block that is already gone → silent success."
func TestScenario12DeleteCommitForGoneBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	blk, locs := s.openFile("/s12", 3)
	openPipeline(s.ctx, t, blk, locs, "w1").Abort() // 0-byte RBW replicas
	s.recoverLease("/s12", "w2")
	if st := s.waitClosed("/s12", 30*time.Second); len(st.Blocks) != 0 {
		t.Fatalf("%v: the empty block was not deleted", st)
	}
	c := s.commitsOf(blk.Id)
	if len(c) != 1 || !c[0].DeleteBlock {
		t.Fatalf("commits %v", c)
	}
	seq := s.nextSeq()
	for _, id := range []uint64{blk.Id, blk.Id + 1000} { // the re-sent commit; a block that never was
		res, err := s.nl.CommitBlockSynchronization(s.ctx, &clusterpb.CommitBlockSyncRequest{NodeId: locs[0].NodeId, BlockId: id, RecoveryId: c[0].RecoveryId,
			NewGs: c[0].NewGs, OldGs: c[0].OldGs, CloseFile: true, DeleteBlock: true})
		if err != nil || !res.Result.GetUnchanged() {
			t.Fatalf("delete commit for gone block %d: %v, %v", id, res, err)
		}
	}
	if s.nextSeq() != seq || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatal("a delete commit for a gone block was journaled")
	}
	if st := s.stat("/s12"); st.File.UnderConstruction || len(st.Blocks) != 0 {
		t.Fatalf("after the retries: %v", st)
	}
}

// TestScenario13WriterFencedAfterRecoveryStarts — §R7 scenario 13:
// "Original writer after recovery starts: updateBlockForPipeline →
// 'Unexpected BlockUCState'; complete → 'under recovery'; any lease-checked
// op → lease mismatch. The writer can never revive the block at its old
// GS." The writer has a live pipeline to real nodes and a pipeline GS it
// obtained before the recovery started.
func TestScenario13WriterFencedAfterRecoveryStarts(t *testing.T) {
	t.Parallel()
	const path = "/s13"
	s := startScen(t, 3, pauseAt(3*time.Second, path))
	blk, locs := s.openFile(path, 3)
	data := randData(13, 160_000)
	pl := openPipeline(s.ctx, t, blk, locs, "w1")
	for _, p := range blockio.SplitPackets(data[:100_000], 0, 64<<10) {
		p.Sync = p.End() == 100_000
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(s.ctx); err != nil {
		t.Fatal(err)
	}
	ub, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
	if err != nil {
		t.Fatal(err)
	}
	g2 := ub.Result.NewGs
	s.recoverLease(path, "w2")
	rec := s.stat(path).Blocks[0].Recovery
	s.waitRUR(blk.Id, rec.RecoveryId, locIDs(locs))

	writerOps := func() int {
		n := 0
		for _, typ := range []string{fsm.EventUpdateBlockForPipeline, fsm.EventUpdatePipeline, fsm.EventComplete, fsm.EventAddBlock, fsm.EventAbandonBlock} {
			n += len(s.journalEvents(typ))
		}
		return n
	}
	ops, gs := writerOps(), s.nextGS()
	ref := &pb.BlockRef{Id: blk.Id, Gs: blk.Gs, NumBytes: 100_000}
	fenced := func(when string) {
		t.Helper()
		for what, call := range map[string]func() error{
			"update block for pipeline": func() error {
				_, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
				return err
			},
			"update pipeline to its own new GS": func() error {
				_, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: path, ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g2,
					NewLength: 100_000, NewNodes: locIDs(locs)})
				return err
			},
			"complete": func() error {
				_, err := s.ns.Complete(s.ctx, &pb.CompleteRequest{Path: path, ClientName: "w1", Last: ref})
				return err
			},
			"add block": func() error {
				_, err := s.ns.AddBlock(s.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1", Previous: ref})
				return err
			},
			"abandon block": func() error {
				_, err := s.ns.AbandonBlock(s.ctx, &pb.AbandonBlockRequest{Path: path, ClientName: "w1", BlockId: blk.Id})
				return err
			},
		} {
			if err := call(); grpcCode(err) == codes.OK || grpcCode(err) == codes.Unavailable {
				t.Fatalf("%s, %s by the old writer: %v", when, what, err)
			}
		}
	}
	fenced("under recovery")
	// Its pipeline is dead too: the replicas' writers were stopped.
	_, err = pl.Send(s.ctx, blockio.Packet{Offset: 99_840, Data: data[99_840:160_000], Sync: true})
	if err == nil {
		err = pl.Flush(s.ctx)
	}
	if err == nil {
		t.Fatal("the old writer's pipeline still takes data")
	}
	if writerOps() != ops || s.nextGS() != gs {
		t.Fatal("a refused writer op was journaled or allocated a GS")
	}
	st := s.waitClosed(path, 30*time.Second)
	b := s.checkSynchronised(path, blk.Id, locIDs(locs), data, 100_000)
	if b.Gs != rec.RecoveryId || !(blk.Gs < g2 && g2 < b.Gs) {
		t.Fatalf("GS %d -> pipeline %d -> recovered %d: must only grow", blk.Gs, g2, b.Gs)
	}
	fenced("after the recovery")
	// Nor can it reopen the replicas at its old GS.
	conn := dataNodeConn(t, locs[0].GrpcAddr)
	_, err = blockio.Open(s.ctx, conn, &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: blk.Gs, NewGs: g2, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		MinBytesRcvd: 100_000, MaxBytesRcvd: 160_000, ClientName: "w1", Targets: addrsOf(locs[1:])}, blockio.Options{Address: locs[0].GrpcAddr})
	if err == nil {
		t.Fatal("the old writer reopened a recovered replica at its old GS")
	}
	if after := s.stat(path); !proto.Equal(st.File, after.File) || after.Blocks[0].Gs != b.Gs {
		t.Fatalf("the fenced writer changed the file: %v", after)
	}
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, 100_000)
}

// TestScenario14RecoverLeaseTwice — §R7 scenario 14: "recoverLease twice
// within 90 s → second returns false, no new GS allocated, no second
// command. recoverLease on a closed file → true."
func TestScenario14RecoverLeaseTwice(t *testing.T) {
	t.Parallel()
	const path = "/s14"
	s := startScen(t, 3, pauseAt(1500*time.Millisecond, path))
	blk, locs := s.openFile(path, 3)
	data := randData(14, 2000)
	for _, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data, false)
	}
	gs := s.nextGS()
	if s.recoverLease(path, "w2") {
		t.Fatal("first recover lease closed the file")
	}
	rec := s.stat(path).Blocks[0].Recovery
	for _, c := range []string{"w2", "w3"} {
		if s.recoverLease(path, c) {
			t.Fatalf("recover lease by %s during the recovery: true", c)
		}
	}
	if got := s.stat(path).Blocks[0].Recovery; s.nextGS() != gs+1 || !proto.Equal(got, rec) {
		t.Fatalf("a repeated recover lease started another attempt: %v after %v (next GS %d, was %d)", got, rec, s.nextGS(), gs)
	}
	s.waitClosed(path, 30*time.Second)
	for _, c := range []string{"w2", "w4"} {
		if !s.recoverLease(path, c) {
			t.Fatalf("recover lease of the closed file by %s: false", c)
		}
	}
	if s.nextGS() != gs+1 || len(s.recoveriesOf(blk.Id)) != 1 || len(s.commitsOf(blk.Id)) != 1 {
		t.Fatalf("next GS %d (was %d), recoveries %v, commits %v", s.nextGS(), gs, s.recoveriesOf(blk.Id), s.commitsOf(blk.Id))
	}
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, len(data))
}

// TestScenario15CompetingWriter — §R7 scenario 15: "Another client
// create(overwrite)/append while holder's lease < 60 s old →
// AlreadyBeingCreated; after 60 s → RecoveryInProgress (or success if the
// file could be closed synchronously)." (Soft limit 1 s here.)
func TestScenario15CompetingWriter(t *testing.T) {
	t.Parallel()
	const path = "/s15"
	s := startScen(t, 3, pauseAt(1500*time.Millisecond, path), func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit = time.Second, time.Minute
	})
	blk, locs := s.openFile(path, 3)
	data := randData(15, 5000)
	s.writeBlock(blk, locs, data, false)
	if _, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: "/s15b", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	seq := s.nextSeq()
	appendBy := func(c string) error {
		_, err := s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: c})
		return err
	}
	overwriteBy := func(p, c string) error {
		_, err := s.ns.Create(s.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: c, Overwrite: true})
		return err
	}
	wantCode(t, "append while the lease is fresh", appendBy("w2"), codes.FailedPrecondition, "lease-held")
	wantCode(t, "overwrite while the lease is fresh", overwriteBy(path, "w2"), codes.FailedPrecondition, "lease-held")
	if s.nextSeq() != seq {
		t.Fatal("a refused takeover was journaled")
	}
	// Past the soft limit the takeover starts a recovery and is told to
	// come back.
	eventually(t, 20*time.Second, "the soft limit to pass", func() bool {
		err := appendBy("w2")
		switch grpcCode(err) {
		case codes.FailedPrecondition:
			return false
		case codes.Unavailable:
			wantCode(t, "append after the soft limit", err, codes.Unavailable, "recovery-in-progress")
			return true
		}
		t.Fatalf("append after the soft limit: %v", err)
		return false
	})
	if st := s.stat(path); st.Blocks[0].State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
		t.Fatalf("after the takeover: %v", st.Blocks[0])
	}
	wantCode(t, "overwrite during the recovery", overwriteBy(path, "w3"), codes.Unavailable, "recovery-in-progress")
	s.waitClosed(path, 30*time.Second)
	s.checkSynchronised(path, blk.Id, locIDs(locs), data, len(data))
	if err := appendBy("w2"); err != nil {
		t.Fatalf("append once recovered: %v", err)
	}
	if st := s.stat(path); !st.File.UnderConstruction || st.File.LeaseHolder != "w2" {
		t.Fatalf("after the append: %v", st.File)
	}
	// A file that can be closed at once is taken over at once.
	if err := overwriteBy("/s15b", "w3"); err != nil {
		t.Fatalf("overwrite of an expired empty file: %v", err)
	}
	if st := s.stat("/s15b"); st.File.LeaseHolder != "w3" {
		t.Fatalf("after the overwrite: %v", st.File)
	}
	if ev := s.journalEvents(fsm.EventRecoveryStarted); len(ev) != 1 {
		t.Fatalf("%d recoveries started, want 1 (/s15 only)", len(ev))
	}
}

// TestScenario16StaleNodeFiltering — §R7 scenario 16: "Stale-node
// filtering. 3 expected locations, 1 DN without heartbeat for > 30 s →
// command lists 2 locations. 2 of 3 stale → all 3 listed. (Recommended per
// HDFS-17430: dead nodes never listed.)" The command's locations can only
// be seen in a heartbeat reply, so the nodes are faked (stale interval 1 s,
// dead 4 s).
func TestScenario16StaleNodeFiltering(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval, c.FS.ReplicationCheckInterval = time.Second, 4*time.Second, 100*time.Millisecond
		c.FS.RecoveryTimeout = time.Minute
	})
	e.registerNodes(3)
	var blks []*pb.BlockRecord
	for _, p := range []string{"/s16a", "/s16b", "/s16c"} {
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: p, Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
			t.Fatal(err)
		}
		ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: p, ClientName: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		b := ab.Result.Block
		if len(b.ExpectedLocations) != 3 {
			t.Fatalf("%s: %v", p, b.ExpectedLocations)
		}
		for _, n := range b.ExpectedLocations {
			e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
		}
		blks = append(blks, b)
	}
	// heartbeat heartbeats as node and answers a new leader's request for a
	// full report with the node's replicas, as a real node does: after an
	// election under load the new leader waits in safe mode for it, and
	// re-drives no recovery meanwhile.
	reps := map[string][]*pb.ReportedReplica{}
	for _, b := range blks {
		for _, n := range b.ExpectedLocations {
			reps[n] = append(reps[n], &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW})
		}
	}
	heartbeat := func(n string) []*clusterpb.NodeCommand { return e.heartbeatAnswering(n, reps[n]...) }
	// command heartbeats the given nodes until one gets the recovery of
	// blk and returns its locations.
	command := func(blk uint64, beat ...string) []string {
		t.Helper()
		var locs []string
		eventually(t, 20*time.Second, fmt.Sprintf("the recovery command of block %d", blk), func() bool {
			for _, n := range beat {
				for _, r := range recoverCmds(heartbeat(n)) {
					if r.BlockId == blk {
						locs = locIDs(r.Locations)
					}
				}
			}
			return locs != nil
		})
		slices.Sort(locs)
		return locs
	}
	recoverWhen := func(path string, beat []string, silent func() bool) {
		t.Helper()
		eventually(t, 30*time.Second, "the silent nodes to go stale", func() bool {
			for _, n := range beat {
				heartbeat(n)
			}
			return silent()
		})
		if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"}); err != nil {
			t.Fatal(err)
		}
	}

	// One stale node: left out.
	recoverWhen("/s16a", []string{"n1", "n2"}, func() bool { return !e.nodeLive("n3") })
	if got := command(blks[0].Id, "n1", "n2"); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("one of 3 locations stale: the command lists %v, want [n1 n2]", got)
	}
	// Two stale, not dead: every location is listed.
	recoverWhen("/s16b", []string{"n1"}, func() bool { return !e.nodeLive("n2") && !e.nodeLive("n3") })
	if got := command(blks[1].Id, "n1"); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("two of 3 locations stale: the command lists %v, want all 3", got)
	}
	// n3 dead (silent past the dead interval), n2 stale: the dead node is
	// never listed.
	eventually(t, 30*time.Second, "n3 dead", func() bool {
		heartbeat("n1")
		return e.nodeDead("n3")
	})
	heartbeat("n2")
	recoverWhen("/s16c", []string{"n1"}, func() bool { return !e.nodeLive("n2") })
	if got := command(blks[2].Id, "n1"); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("n3 dead, n2 stale: the command lists %v, want [n1 n2]", got)
	}
}

// TestScenario16DeadBeforeLeaderChange: a node silent since before an
// election is dead for the new leader one dead interval into its term (a
// new leader counts every node as heard from at its term's start, so it
// does not wait for a heartbeat that will never come): ListNodes says so,
// and a recovery command that lists every expected location not dead —
// the other one stale too — leaves it out (HDFS-17430), as the leader
// that had heard it would have.
func TestScenario16DeadBeforeLeaderChange(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval, c.FS.ReplicationCheckInterval = time.Second, 4*time.Second, 100*time.Millisecond
		c.FS.RecoveryTimeout = time.Minute
	})
	b := e.startAbandonedWrite() // /w: one block, RBW on n1-n3
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	// n3 is silent from here on; the leadership moves.
	old := e.tc.waitLeader()
	next := (old + 1) % 3
	e.tc.transferLeadership(old, next)
	eventually(t, 30*time.Second, "n3 dead for the new leader", func() bool {
		e.heartbeatAnswering("n1", rbw)
		e.heartbeatAnswering("n2", rbw)
		return e.nodeDead("n3") && !e.nodeDead("n1") && !e.nodeDead("n2")
	})
	// n2 goes stale, not dead: the command lists every location not dead.
	eventually(t, 20*time.Second, "n2 stale", func() bool {
		e.heartbeatAnswering("n1", rbw)
		return !e.nodeLive("n2")
	})
	if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/w", ClientName: "w2"}); err != nil {
		t.Fatal(err)
	}
	var locs []string
	eventually(t, 20*time.Second, "n1's recovery command", func() bool {
		for _, r := range recoverCmds(e.heartbeatAnswering("n1", rbw)) {
			if r.BlockId == b.Id {
				locs = locIDs(r.Locations)
			}
		}
		return locs != nil
	})
	slices.Sort(locs)
	if !slices.Equal(locs, []string{"n1", "n2"}) {
		t.Fatalf("n3 dead before the election, n2 stale: the command lists %v, want [n1 n2]", locs)
	}
}

// TestScenario17PrimaryRotation — §R7 scenario 17: "Primary rotation.
// Recovery attempts k = 1..3 on a 3-replica block with all DNs alive choose
// three different primaries (most-recent heartbeat first); attempt 4 resets
// and may reuse any. No alive replica → UNDER_RECOVERY with no command."
// Faked nodes, so that the test alone decides who heartbeats when.
func TestScenario17PrimaryRotation(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 600*time.Millisecond, 50*time.Millisecond
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval = 8*time.Second, time.Minute
	})
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s17", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s17", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
	}
	for _, n := range []string{"n1", "n2", "n3"} { // n3 heard from last
		e.fakeHeartbeat(n)
	}
	if _, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: "/s17", ClientName: "w2"}); err != nil {
		t.Fatal(err)
	}
	// Every attempt is a journal event carrying its recovery record.
	var seen []*fsmpb.BlockRecovery
	eventually(t, 20*time.Second, "4 attempts", func() bool {
		seen = nil
		for _, ev := range e.journalEvents(fsm.EventRecoveryStarted) {
			if ev.Result.GetBlock().GetId() == b.Id {
				seen = append(seen, ev.Result.Block.Recovery)
			}
		}
		return len(seen) >= 4
	})
	want := []struct {
		primary string
		tried   []string
	}{{"n3", []string{"n3"}}, {"n2", []string{"n3", "n2"}}, {"n1", []string{"n3", "n2", "n1"}}, {"n3", []string{"n3"}}}
	for i, w := range want {
		r := seen[i]
		if r.Attempt != uint32(i+1) || r.Primary != w.primary || !slices.Equal(r.TriedPrimaries, w.tried) {
			t.Fatalf("attempt %d: %v, want primary %s, tried %v (all attempts %v)", i+1, r, w.primary, w.tried, seen)
		}
	}
	// Every location goes stale: no attempt can choose a primary, so none
	// starts and no id is allocated; the block stays UNDER_RECOVERY.
	eventually(t, 30*time.Second, "every node stale", func() bool { return !e.nodeLive("n1") && !e.nodeLive("n2") && !e.nodeLive("n3") })
	// The last attempt started while a node was live runs out; from then
	// on every re-drive finds no primary.
	var cur *pb.BlockRecovery
	eventually(t, 20*time.Second, "the last attempt past its deadline", func() bool {
		cur = e.stat("/s17").Blocks[0].Recovery
		return time.Now().After(time.Unix(0, cur.DeadlineUnixNanos).Add(300 * time.Millisecond))
	})
	gs := e.nextGS()
	stays(t, 2*time.Second, "no new attempt without a live location", func() bool {
		st := e.stat("/s17").Blocks[0]
		return st.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY && st.Recovery.RecoveryId == cur.RecoveryId && e.nextGS() == gs
	})
	// n1 is heard from again: the next attempt is its, and so is the
	// command.
	var cmd *clusterpb.RecoverBlockCommand
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	eventually(t, 20*time.Second, "n1's recovery command", func() bool {
		for _, r := range recoverCmds(e.heartbeatAnswering("n1", rbw)) {
			if r.BlockId == b.Id && r.RecoveryId > cur.RecoveryId {
				cmd = r
			}
		}
		return cmd != nil
	})
	if r := e.stat("/s17").Blocks[0].Recovery; r.Primary != "n1" || r.RecoveryId != cmd.RecoveryId {
		t.Fatalf("after n1 came back: %v, command %v", r, cmd)
	}
}

// TestScenario17NoLiveLocationFirstAttempt — §R3.3 "No expected replicas
// [alive] → primary = none; nothing is sent (file stays UNDER_RECOVERY)"
// for a block's first attempt: recover-lease still allocates a recovery id,
// moves the block UNDER_RECOVERY with no primary (the old writer is fenced)
// and hands the lease over, answering "not closed"; no command goes out and
// no further id is allocated until a location is heard from, whose
// heartbeat then brings the re-driven attempt.
func TestScenario17NoLiveLocationFirstAttempt(t *testing.T) {
	t.Parallel()
	testScenario17NoLiveLocationFirstAttempt(t, false)
}

// TestScenario17NoLiveLocationAfterLeaderChange: the same, with a leader
// change before n2 is heard from again. The new leader starts in safe
// mode and leaves it once n2, the one node it hears from, has sent its
// full report (the silent two are not waited for); CI once met such an
// election under load, and the test's fake node, which did not answer the
// new leader's request for a full report, waited 20 s for a command that
// a safe-mode leader never sends.
func TestScenario17NoLiveLocationAfterLeaderChange(t *testing.T) {
	t.Parallel()
	testScenario17NoLiveLocationFirstAttempt(t, true)
}

func testScenario17NoLiveLocationFirstAttempt(t *testing.T, leaderChange bool) {
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.RecoveryTimeout, c.FS.LeaseCheckInterval = 600*time.Millisecond, 50*time.Millisecond
		c.FS.NodeStaleInterval, c.FS.NodeDeadInterval = 2*time.Second, time.Minute
	})
	e.registerNodes(3)
	const path = "/s17n"
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: path, Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	b := ab.Result.Block
	for _, n := range b.ExpectedLocations {
		e.report(n, b, 10, pb.ReplicaState_REPLICA_STATE_RBW)
	}
	eventually(t, 30*time.Second, "every node stale", func() bool { return !e.nodeLive("n1") && !e.nodeLive("n2") && !e.nodeLive("n3") })

	gs := e.nextGS()
	r, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"})
	if err != nil || r.Closed {
		t.Fatalf("recover lease with no live location: %v, %v; want not closed, no error", r, err)
	}
	st := e.stat(path)
	blk := st.Blocks[0]
	if blk.State != pb.BlockState_BLOCK_STATE_UNDER_RECOVERY || blk.Recovery.GetRecoveryId() != gs || blk.Recovery.GetPrimary() != "" || e.nextGS() != gs+1 {
		t.Fatalf("after recover lease: %v (next GS %d), want UNDER_RECOVERY, recovery id %d, no primary", blk, e.nextGS(), gs)
	}
	if st.File.LeaseHolder != "w2" {
		t.Fatalf("lease holder %q, want w2", st.File.LeaseHolder)
	}
	if _, err := e.ns.UpdateBlockForPipeline(e.ctx, &pb.UpdateBlockForPipelineRequest{Path: path, ClientName: "w1", BlockId: b.Id}); err == nil {
		t.Fatal("the old writer still got a new GS for a block under recovery")
	}
	// No location is live: no new id past the deadline, and a second
	// recover-lease answers "not closed" without allocating one.
	stays(t, 1500*time.Millisecond, "no new attempt without a live location", func() bool {
		cur := e.stat(path).Blocks[0]
		return cur.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY && cur.Recovery.GetRecoveryId() == gs && e.nextGS() == gs+1
	})
	if r, err := e.ns.RecoverLease(e.ctx, &pb.RecoverLeaseRequest{Path: path, ClientName: "w2"}); err != nil || r.Closed || e.nextGS() != gs+1 {
		t.Fatalf("second recover lease: %v, %v, next GS %d; want not closed, no new id", r, err, e.nextGS())
	}
	// n2 is heard from: the re-driven attempt is its.
	var cmd *clusterpb.RecoverBlockCommand
	rbw := &pb.ReportedReplica{BlockId: b.Id, Gs: b.Gs, NumBytes: 10, State: pb.ReplicaState_REPLICA_STATE_RBW}
	if leaderChange {
		old := e.leader
		next := (old + 1) % 3
		e.tc.transferLeadership(old, next)
	}
	eventually(t, 20*time.Second, "n2's recovery command", func() bool {
		for _, c := range recoverCmds(e.heartbeatAnswering("n2", rbw)) {
			if c.BlockId == b.Id && c.RecoveryId > gs {
				cmd = c
			}
		}
		return cmd != nil
	})
	if cur := e.stat(path).Blocks[0].Recovery; cur.Primary != "n2" || cur.RecoveryId != cmd.RecoveryId || cur.Attempt != 2 {
		t.Fatalf("re-driven attempt %v, command %v; want attempt 2 with primary n2", cur, cmd)
	}
}

// TestScenario27RestartDropsTemporary — §R7 scenario 27: "DN restart with
// TEMPORARY replica → deleted, never reported; NN re-replicates." A node
// holds an interrupted transfer's TEMPORARY copy of a complete block; it
// restarts; then a holder dies and the block is copied to it afresh.
func TestScenario27RestartDropsTemporary(t *testing.T) {
	t.Parallel()
	s := startScen(t, 4, nil, fastReplication)
	data := randData(27, 200_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s27", data)
	dns := map[string]pb.DataNodeClient{}
	for _, n := range s.nodes {
		dns[n.ID()] = dataNode(t, n)
	}
	var holders []string
	eventually(t, 20*time.Second, "3 finalized replicas", func() bool {
		holders = finalizedHolders(s.ctx, t, dns, blk, len(data))
		return len(holders) == 3
	})
	var spare string
	for _, n := range s.nodes {
		if !slices.Contains(holders, n.ID()) {
			spare = n.ID()
		}
	}
	w, err := s.node(spare).Store().CreateTemporary(s.ctx, "BP-1", replica.Block{ID: blk.Id, GS: blk.Gs, NumBytes: int64(len(data))}, true, replica.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(s.ctx, 0, data[:65536], blockio.Checksums(data[:65536])); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if r, ok := s.replicaOn(spare, blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_TEMPORARY {
		t.Fatalf("%s: %v, want TEMPORARY", spare, r)
	}
	notReported := func() bool {
		for _, r := range s.stat("/s27").Blocks[0].ReportedLocations {
			if r.NodeId == spare {
				return false
			}
		}
		return true
	}
	stays(t, time.Second, spare+"'s TEMPORARY replica never reported", notReported)
	s.restart(spare)
	if r, ok := s.replicaOn(spare, blk.Id); ok {
		t.Fatalf("%s after restart: %v, want the TEMPORARY replica gone", spare, r)
	}
	if !notReported() {
		t.Fatalf("%s reported a replica it does not hold", spare)
	}
	s.kill(holders[0])
	delete(dns, holders[0])
	dns[spare] = dataNode(t, s.node(spare))
	eventually(t, 40*time.Second, "the block copied to "+spare, func() bool {
		return slices.Contains(finalizedHolders(s.ctx, t, dns, blk, len(data)), spare)
	})
	st := s.stat("/s27")
	if got := readReplica(s.ctx, t, dns[spare], st.Blocks[0]); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", spare)
	}
}

// TestScenario28ReportsOfUCBlock — §R7 scenario 28: "FBR: FINALIZED replica
// with GS ≥ NN GS for an UNDER_CONSTRUCTION block → recorded as location
// and in the UC list; GS < NN GS → corrupt." Real pipelines leave it so: a
// first pipeline recovery (g0 → g1) dropped node c; a close recovery then
// finalized a and b at g2 and the writer died before telling the
// coordinator (block still at g1). a and c restart (full reports). a and b
// are the recovery's FINALIZED sources; c's stale replica is never used and
// is replaced once the block is complete.
func TestScenario28ReportsOfUCBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil, fastReplication)
	blk, locs := s.openFile("/s28", 3)
	data := randData(28, 50_000)
	n := uint64(len(data))
	s.writeBlock(blk, locs, data, false)
	ab := locs[:2]
	setup := func(stage pb.BlockStage, gs, newGS uint64) {
		t.Helper()
		pl, err := blockio.Open(s.ctx, dataNodeConn(t, ab[0].GrpcAddr), &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: gs, NewGs: newGS, Stage: stage,
			MinBytesRcvd: int64(n), MaxBytesRcvd: int64(n), ClientName: "w1", Targets: addrsOf(ab[1:])}, blockio.Options{Address: ab[0].GrpcAddr})
		if err != nil {
			t.Fatalf("%v setup: %v", stage, err)
		}
		pl.Abort()
	}
	newGS := func() uint64 {
		t.Helper()
		r, err := s.ns.UpdateBlockForPipeline(s.ctx, &pb.UpdateBlockForPipelineRequest{Path: "/s28", ClientName: "w1", BlockId: blk.Id})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result.NewGs
	}
	g1 := newGS()
	setup(pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY, blk.Gs, g1)
	if _, err := s.ns.UpdatePipeline(s.ctx, &pb.UpdatePipelineRequest{Path: "/s28", ClientName: "w1", BlockId: blk.Id, OldGs: blk.Gs, NewGs: g1,
		NewLength: n, NewNodes: locIDs(ab)}); err != nil {
		t.Fatal(err)
	}
	g2 := newGS()
	setup(pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY, g1, g2)
	a, b, c := locs[0].NodeId, locs[1].NodeId, locs[2].NodeId
	s.restart(a)
	s.restart(c)
	s.waitNodes()
	if st := s.stat("/s28").Blocks[0]; st.Gs != g1 || st.State != pb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION {
		t.Fatalf("staging: %v", st)
	}
	s.waitReported("/s28", blk.Id, []string{a, b}, pb.ReplicaState_REPLICA_STATE_FINALIZED, g2, int64(n))
	s.waitReported("/s28", blk.Id, []string{c}, pb.ReplicaState_REPLICA_STATE_RWR, blk.Gs, int64(n))
	// Nothing is deleted while the block is under construction.
	stays(t, time.Second, "every replica kept", func() bool {
		for id, gs := range map[string]uint64{a: g2, b: g2, c: blk.Gs} {
			if r, ok := s.replicaOn(id, blk.Id); !ok || r.Gs != gs {
				return false
			}
		}
		return true
	})
	s.recoverLease("/s28", "w2")
	s.waitClosed("/s28", 30*time.Second)
	fin := s.checkSynchronised("/s28", blk.Id, []string{a, b}, data, int(n))
	if com := s.commitsOf(blk.Id); len(com) != 1 || com[0].OldGs != g1 || !(g2 < fin.Gs) {
		t.Fatalf("commit %v: from GS %d, over replicas at %d", com, g1, g2)
	}
	eventually(t, 30*time.Second, c+"'s stale replica replaced by a copy", func() bool {
		r, ok := s.replicaOn(c, blk.Id)
		return ok && r.Gs == fin.Gs && r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && r.NumBytes == int64(n)
	})
	if got := readReplica(s.ctx, t, s.dn(c), fin); !bytes.Equal(got, data) {
		t.Fatalf("%s: the copy differs", c)
	}
}

// TestScenario29ReportOfUnknownBlock — §R7 scenario 29: "Report for an
// unknown block id → DN told to delete it." The nodes hold, besides a real
// file's replicas, replicas of ids the coordinators never allocated.
func TestScenario29ReportOfUnknownBlock(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, nil)
	data := randData(29, 10_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s29", data)
	const unknown = 1 << 40
	s.stageUnknown("dn1", unknown, data[:3000], true)
	s.stageUnknown("dn2", unknown+1, data[:2000], false)
	for id, b := range map[string]uint64{"dn1": unknown, "dn2": unknown + 1} {
		eventually(t, 30*time.Second, fmt.Sprintf("%s deleting unknown block %d", id, b), func() bool {
			_, ok := s.replicaOn(id, b)
			return !ok
		})
	}
	st := s.stat("/s29")
	for _, n := range s.nodes {
		if r, ok := s.replicaOn(n.ID(), blk.Id); !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != blk.Gs {
			t.Fatalf("%s lost a known replica: %v", n.ID(), r)
		}
		if got := readReplica(s.ctx, t, s.dn(n.ID()), st.Blocks[0]); !bytes.Equal(got, data) {
			t.Fatalf("%s: replica bytes differ", n.ID())
		}
	}
}

// TestScenario30ScannerLengthMismatch — §R7 scenario 30: "Directory scanner
// length mismatch on a FINALIZED replica → memory length corrected and
// replica reported bad → NN marks it corrupt and re-replicates. A
// concurrent append must not cause a false corrupt report (HDFS-17346)."
// The nodes scan every 100 ms.
func TestScenario30ScannerLengthMismatch(t *testing.T) {
	t.Parallel()
	s := startScen(t, 3, func(_ int, c *nodeserver.Config) { c.DirScanInterval = 100 * time.Millisecond }, fastReplication)
	data := randData(30, 100_000)
	blk := writeFile(s.ctx, t, s.fsEnv, "/s30", data)
	s.waitReported("/s30", blk.Id, serverIDs(s.nodes), pb.ReplicaState_REPLICA_STATE_FINALIZED, blk.Gs, int64(len(data)))
	victim := s.nodes[1]
	path := blockData(t, victim.Config().DataDir, blk.Id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	eventually(t, 30*time.Second, "the scanner's length fix", func() bool { return victim.Store().Stats().DirScanLenFixed >= 1 })
	// Reported bad, deleted and copied back: the node ends with the right
	// bytes, at the right length, on disk too.
	eventually(t, 40*time.Second, victim.ID()+"'s replica replaced", func() bool {
		r, ok := s.replicaOn(victim.ID(), blk.Id)
		if !ok || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.NumBytes != int64(len(data)) {
			return false
		}
		st, err := os.Stat(blockData(t, victim.Config().DataDir, blk.Id))
		return err == nil && st.Size() == int64(len(data))
	})
	st := s.stat("/s30")
	if got := readReplica(s.ctx, t, s.dn(victim.ID()), st.Blocks[0]); !bytes.Equal(got, data) {
		t.Fatalf("%s: replica bytes differ", victim.ID())
	}
	s.waitReported("/s30", blk.Id, serverIDs(s.nodes), pb.ReplicaState_REPLICA_STATE_FINALIZED, blk.Gs, int64(len(data)))

	// Appends while the scanners run: no replica is reported bad.
	bad := func() (n int64) {
		for _, nd := range s.nodes {
			st := nd.Store().Stats()
			n += st.DirScanLenFixed + st.DirScanGSFixed + st.CorruptBlocks
		}
		return n
	}
	all := randData(31, 40_000)
	ab := writeFile(s.ctx, t, s.fsEnv, "/s30a", all[:5000])
	before := bad()
	for i, from := 0, 5000; i < 5; i, from = i+1, from+7000 {
		s.appendTo("/s30a", all[:from+7000], from)
	}
	scans := victim.Store().Stats().DirScans
	eventually(t, 20*time.Second, "more scans after the appends", func() bool { return victim.Store().Stats().DirScans >= scans+3 })
	if got := bad(); got != before {
		t.Fatalf("appends under the scanners: %d replicas reported bad", got-before)
	}
	fin := s.stat("/s30a").Blocks[0]
	for _, r := range fin.ReportedLocations {
		if r.Corrupt {
			t.Fatalf("%s marked corrupt", r.NodeId)
		}
	}
	s.checkSynchronised("/s30a", ab.Id, serverIDs(s.nodes), all, len(all))
}

// TestScenario31ExpiredLeasesInBulk — §R7 scenario 31: "Expired leases in
// bulk (e.g. 100 000 files) → monitor processes at most ~25 ms worth per
// 2 s cycle; NN stays responsive (HDFS-10220)." Here the bound is
// MaxLeaseActionsPerCycle (10 per 1 s cycle) on 60 expired files; the
// coordinators alone are involved (the files have no blocks).
func TestScenario31ExpiredLeasesInBulk(t *testing.T) {
	t.Parallel()
	const files, perCycle, interval = 60, 10, time.Second
	e := newFSEnv(t, func(_ int, c *Config) {
		c.FS.LeaseSoftLimit, c.FS.LeaseHardLimit = time.Second, 2*time.Second
		c.FS.LeaseCheckInterval, c.FS.MaxLeaseActionsPerCycle = interval, perCycle
	})
	for i := 0; i < files; i++ {
		if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: fmt.Sprintf("/s31/f%03d", i), Replication: 1, BlockSize: 1 << 20, ClientName: "dead"}); err != nil {
			t.Fatal(err)
		}
	}
	open := func() int {
		n := 0
		ls, err := e.ns.List(e.ctx, &pb.ListRequest{Dir: "/s31"})
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ls.Entries {
			if en.File.UnderConstruction {
				n++
			}
		}
		return n
	}
	// While the monitor works through them, the namespace answers at once.
	var slowest time.Duration
	probes := 0
	eventually(t, 60*time.Second, "every expired lease released", func() bool {
		start := time.Now()
		if probes++; probes%5 == 1 {
			if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: fmt.Sprintf("/s31x/p%d", probes), Replication: 1, BlockSize: 1 << 20, ClientName: "live"}); err != nil {
				t.Fatal(err)
			}
		}
		n := open()
		slowest = max(slowest, time.Since(start))
		return n == 0
	})
	if slowest > 3*time.Second {
		t.Fatalf("a create and a list took %v during the releases", slowest)
	}
	// At most perCycle releases a cycle: the 60 need at least 6 cycles,
	// and the ticker starts the k-th cycle no earlier than k-1 intervals
	// after the first (a late cycle only delays the first release), so the
	// releases span at least 3 intervals. Without the bound they would all
	// go in one cycle.
	var at []int64
	for _, ev := range e.journalEvents(fsm.EventLeaseReleased) {
		if strings.HasPrefix(ev.Op.GetReleaseLease().GetPath(), "/s31/") {
			at = append(at, ev.UnixNanos)
		}
	}
	if len(at) != files {
		t.Fatalf("%d releases journaled, want %d", len(at), files)
	}
	slices.Sort(at)
	if span := time.Duration(at[len(at)-1] - at[0]); span < 3*interval {
		t.Fatalf("the %d releases took %v: fewer cycles than %d per cycle allows", files, span, perCycle)
	}
}

// TestScenario32ReportAheadOfMetadata — §R7 scenario 32: "Standby/after-
// failover IBR ordering. A DN IBR with GS ahead of the applied metadata
// must be queued, not marked corrupt, and replayed once metadata catches
// up." A node reports a replica of the next block id at a GS not allocated
// yet; neither the leader nor, after a failover, the next one has it
// deleted; once AddBlock allocates that very block the early report makes
// it replicated (Complete succeeds on it alone). A replica of an unknown id
// at an old GS is deleted meanwhile (the control).
func TestScenario32ReportAheadOfMetadata(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(3)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s32o", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	ab, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s32o", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var nextID, nextGS uint64
	e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) { nextID, nextGS = st.NextBlockID(), st.NextGS() })
	// The next GS to allocate: the first one not yet allocated (the
	// boundary a "GS above the highest allocated" check must get right).
	ahead := &pb.BlockRecord{Id: nextID, Gs: nextGS}
	old := &pb.BlockRecord{Id: nextID + 50, Gs: 1}
	e.report("n1", ahead, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	e.report("n2", old, 100, pb.ReplicaState_REPLICA_STATE_FINALIZED)
	invalidates := func(node string, id uint64) bool {
		for _, c := range e.fakeHeartbeat(node) {
			for _, b := range c.GetInvalidate().GetBlocks() {
				if b.Id == id {
					return true
				}
			}
		}
		return false
	}
	eventually(t, 20*time.Second, "the old unknown replica invalidated", func() bool { return invalidates("n2", old.Id) })
	keep := func(when string) {
		t.Helper()
		for i := 0; i < 5; i++ {
			if invalidates("n1", ahead.Id) {
				t.Fatalf("%s: the replica ahead of the metadata was invalidated", when)
			}
		}
		for _, r := range e.stat("/s32o").Blocks[0].ReportedLocations {
			if r.Corrupt {
				t.Fatalf("%s: %s marked corrupt", when, r.NodeId)
			}
		}
	}
	keep("on the leader")

	// Failover: the new leader asks for full reports, then judges them.
	old0 := e.leader
	e.tc.kill(old0)
	e.connect(e.tc.waitLeader())
	e.tc.start(old0)
	for i := 1; i <= 3; i++ {
		reps := []*pb.ReportedReplica{{BlockId: ab.Result.Block.Id, Gs: ab.Result.Block.Gs, NumBytes: 0, State: pb.ReplicaState_REPLICA_STATE_RBW}}
		if i == 1 {
			reps = append(reps, &pb.ReportedReplica{BlockId: ahead.Id, Gs: ahead.Gs, NumBytes: 100, State: pb.ReplicaState_REPLICA_STATE_FINALIZED})
		}
		eventually(t, 20*time.Second, nodeID(i)+"'s full report", func() bool {
			_, err := e.nl.BlockReport(e.ctx, &clusterpb.NodeBlockReportRequest{NodeId: nodeID(i), Storages: []*pb.StorageBlockReport{{StorageId: "s1", Replicas: reps}}})
			return err == nil
		})
	}
	eventually(t, 20*time.Second, "the new leader out of safe mode", func() bool {
		r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
		return err == nil && !r.SafeMode
	})
	keep("after the failover")

	// The metadata catches up: AddBlock allocates exactly the reported
	// block (the next block id at the next GS).
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/s32", Replication: 3, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	nb, err := e.ns.AddBlock(e.ctx, &pb.AddBlockRequest{Path: "/s32", ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if b := nb.Result.Block; b.Id != ahead.Id || b.Gs != ahead.Gs {
		t.Fatalf("allocated block %d at GS %d, want the reported %d at %d", b.Id, b.Gs, ahead.Id, ahead.Gs)
	}
	keep("once caught up")
	c, err := e.ns.Complete(e.ctx, &pb.CompleteRequest{Path: "/s32", ClientName: "w1", Last: &pb.BlockRef{Id: ahead.Id, Gs: ahead.Gs, NumBytes: 100}})
	if err != nil || !c.Result.Closed {
		t.Fatalf("complete on the early report alone: %v, %v", c, err)
	}
	st := e.stat("/s32").Blocks[0]
	if st.State != pb.BlockState_BLOCK_STATE_COMPLETE || len(st.ReportedLocations) != 1 || st.ReportedLocations[0].NodeId != "n1" || st.ReportedLocations[0].Corrupt {
		t.Fatalf("after complete: %v", st)
	}
}

// TestScenario33FailoverMidRecovery — §R7 scenario 33: "Recovery across
// failover. Recovery started on leader A (id R); failover to B before
// commit. ... Our Raft design: see §R9.1 (the commit with R should be accepted
// by B if R is the replicated current id)." The primary is paused between
// its initialisations and its updates while the leader is killed.
func TestScenario33FailoverMidRecovery(t *testing.T) {
	t.Parallel()
	const path = "/s33"
	s := startScen(t, 3, pauseAt(4*time.Second, path), func(_ int, c *Config) { c.FS.RecoveryTimeout = 30 * time.Second })
	blk, locs := s.openFile(path, 3)
	data := randData(33, 6000)
	for i, id := range locIDs(locs) {
		s.stage(id, blk.Id, blk.Gs, data[:[]int{6000, 5000, 6000}[i]], false)
	}
	s.recoverLease(path, "w2")
	rec := s.stat(path).Blocks[0].Recovery
	s.waitRUR(blk.Id, rec.RecoveryId, locIDs(locs))
	old := s.leader
	s.tc.kill(old)
	s.connect(s.tc.waitLeader())
	if s.leader == old {
		t.Fatal("no new leader")
	}
	s.waitClosed(path, 60*time.Second)
	b := s.checkSynchronised(path, blk.Id, locIDs(locs), data, 5000)
	if b.Gs != rec.RecoveryId {
		t.Fatalf("block GS %d, want the first leader's recovery id %d", b.Gs, rec.RecoveryId)
	}
	if r := s.recoveriesOf(blk.Id); !slices.Equal(r, []uint64{rec.RecoveryId}) {
		t.Fatalf("recoveries %v: the new leader started another", r)
	}
	if c := s.commitsOf(blk.Id); len(c) != 1 || c[0].RecoveryId != rec.RecoveryId {
		t.Fatalf("commits %v", c)
	}
	s.tc.start(old)
	s.tc.waitConverged()
}

// TestScenario34AppendRecoveryInterleavingReplays — §R7 scenario 34: "Append
// newGS == current GS → should be rejected (HDFS-17850 direction) ... test
// that replaying the journal after any recovery/append interleaving never
// hits a GS mismatch." One block goes through write, append, append + dead
// writer + recovery, append; a node refuses an append at the current GS;
// then every coordinator is restarted in turn and replays to the same
// state.
func TestScenario34AppendRecoveryInterleavingReplays(t *testing.T) {
	t.Parallel()
	const path = "/s34"
	s := startScen(t, 3, nil)
	all := randData(34, 30_000)
	blk := writeFile(s.ctx, t, s.fsEnv, path, all[:10_000])
	gss := []uint64{blk.Gs}
	gss = append(gss, s.appendTo(path, all[:15_000], 10_000))
	// An append whose writer dies after an hflush: recovered.
	r, err := s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	gss = append(gss, r.Result.Block.Gs)
	pl := s.openAppend(path, r.Result.Block, r.Locations, 15_000)
	for _, p := range blockio.SplitPackets(all[:22_000], 15_000, 64<<10) {
		p.Sync = p.End() == 22_000
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Flush(s.ctx); err != nil {
		t.Fatal(err)
	}
	pl.Abort()
	s.recoverLease(path, "w2")
	st := s.waitClosed(path, 30*time.Second)
	gss = append(gss, st.Blocks[0].Gs)
	s.checkSynchronised(path, blk.Id, serverIDs(s.nodes), all, 22_000)
	gss = append(gss, s.appendTo(path, all[:26_000], 22_000))
	// A node refuses an append that keeps the replica's GS.
	r, err = s.ns.Append(s.ctx, &pb.AppendFileRequest{Path: path, ClientName: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	cur := gss[len(gss)-1]
	_, err = blockio.Open(s.ctx, dataNodeConn(t, r.Locations[0].GrpcAddr), &pb.WriteSetup{Pool: "BP-1", BlockId: blk.Id, Gs: cur, NewGs: cur,
		Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND, MinBytesRcvd: 26_000, MaxBytesRcvd: 26_000, ClientName: "w1"}, blockio.Options{Address: r.Locations[0].GrpcAddr})
	if err == nil {
		t.Fatal("a node accepted an append with new GS == current GS")
	}
	if rep, _ := s.replicaOn(r.Locations[0].NodeId, blk.Id); rep.GetGs() != cur || rep.GetState() != pb.ReplicaState_REPLICA_STATE_FINALIZED || rep.GetNumBytes() != 26_000 {
		t.Fatalf("the refused append changed the replica: %v", rep)
	}
	pl = s.openAppend(path, r.Result.Block, r.Locations, 26_000)
	for _, p := range blockio.SplitPackets(all, 26_000, 64<<10) {
		p.Last = p.End() == int64(len(all))
		if _, err := pl.Send(s.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	s.complete(path, &pb.BlockRef{Id: blk.Id, Gs: r.Result.Block.Gs, NumBytes: uint64(len(all))})
	gss = append(gss, r.Result.Block.Gs)
	for i := 1; i < len(gss); i++ {
		if gss[i] <= gss[i-1] {
			t.Fatalf("GS history %v: must only grow", gss)
		}
	}
	s.checkSynchronised(path, blk.Id, serverIDs(s.nodes), all, len(all))
	s.tc.waitConverged()
	want := s.stat(path)
	// Replay: every member restarts (the leader last) and comes back to
	// the same state.
	for _, i := range append(s.tc.followers(s.leader), s.leader) {
		s.tc.restart(i)
		s.connect(s.tc.waitLeader())
		s.tc.waitConverged()
	}
	if got := s.stat(path); !proto.Equal(got.File, want.File) || got.Blocks[0].Gs != want.Blocks[0].Gs || got.Blocks[0].NumBytes != want.Blocks[0].NumBytes {
		t.Fatalf("after replay: %v, want %v", got, want)
	}
}
