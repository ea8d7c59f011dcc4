package coordserver

// docs/design.md §R7, acceptance scenarios 1–34, and the cluster
// tests (real coordinators; real storage nodes unless "faked": node reports
// and heartbeats sent by the test over the real NodeLink API) covering them.
// The tests are in the scen_*_test.go files and in
// client/fs_scenarios_test.go (the writer-side ones, 19–26); the oracle is
// docs/design.md's invariants read from the nodes and the FSM (GS, length,
// bytes and CRCs of every replica; GS only grows; refused ops change
// nothing and write no journal event).
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
