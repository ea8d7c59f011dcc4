//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
)

const (
	// Recoveries of files under pausePrefix stop for recoveryPause on
	// their primary between initReplicaRecovery and
	// updateReplicaUnderRecovery (the nodes' test-only failpoint,
	// LOGBOOK_FAILPOINT_RECOVERY_PAUSE): the window in which a subtest
	// kills the primary or the coordinator leader. Pause plus the second
	// a node's link spends on a killed coordinator stay well inside the
	// compose file's 10 s recovery timeout, so a recovery whose primary
	// survives commits under its first recovery id.
	pausePrefix   = "/pause/"
	recoveryPause = 3 * time.Second

	// The writer's bytes: synced ends inside a chunk; unsynced is more
	// than a packet, so some of it reaches the nodes unacknowledged. Both
	// fit one 1 MiB block: the writer dies mid-block.
	syncedBytes   = 300_000 + 123
	unsyncedBytes = 200_000

	closeTimeout = 90 * time.Second
)

// TestFSRecovery: 3 coordinators and 4 storage nodes (docker-compose-fs.yml,
// short lease limits). A writer process on the host creates a file
// (replication 3), writes, Syncs, writes more and is SIGKILLed mid-block;
// the leader recovers the block after the hard limit and closes the file.
// Invariant 4 is checked by reading every replica straight from its node:
// the FINALIZED replicas at the block's final GS have that GS, the block's
// length and the same bytes, the length is at least what Sync
// acknowledged, and the bytes are the writer's. Then with faults: the
// recovery primary killed after initReplicaRecovery, the coordinator
// leader killed during the recovery, a node restarted so its replica comes
// back RWR, and a node dead for good (its blocks must return to three
// replicas).
func TestFSRecovery(t *testing.T) {
	fc := startFSCluster(t, "LOGBOOK_FAILPOINT_RECOVERY_PAUSE="+recoveryPause.String()+"@"+pausePrefix)
	parent := fc.t
	var deadForGood []string
	run := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			fc.t = t // the helpers fail the subtest, not its parent
			defer func() { fc.t = parent }()
			fc.ensureUp(deadForGood...)
			fn(t)
		})
	}

	run("Plain", func(t *testing.T) {
		w := fc.startWriter(t, "/e2e/plain", 1, syncedBytes, unsyncedBytes)
		blk := fc.lastBlock(t, w.path)
		fc.logf("writer of %s ready (block %d GS %d on %v, %d acked, %d written): SIGKILL", w.path, blk.Id, blk.Gs, blk.ExpectedLocations, w.acked, w.written)
		w.kill(t)
		killed := time.Now()
		b, rec := fc.waitRecovered(t, w.path, blk.Id)
		fc.logf("closed %.1fs after the kill: %s", time.Since(killed).Seconds(), rec)
		fc.checkReplicas(t, w, b, rec)
	})

	run("PrimaryKilledAfterInit", func(t *testing.T) {
		w := fc.startWriter(t, pausePrefix+"primary-killed", 2, syncedBytes, unsyncedBytes)
		blk := fc.lastBlock(t, w.path)
		w.kill(t)
		killed := time.Now()
		first := fc.waitPaused(t, w.path, blk)
		primary := first.GetPrimary()
		fc.logf("recovery %d: every location RUR, primary %s paused %.1fs after the writer's kill: SIGKILL %s", first.GetRecoveryId(), primary, time.Since(killed).Seconds(), primary)
		if err := fc.kill(primary); err != nil {
			t.Fatal(err)
		}
		defer fc.restartNode(primary)
		b, rec := fc.waitRecovered(t, w.path, blk.Id)
		fc.logf("closed %.1fs after the writer's kill: %s", time.Since(killed).Seconds(), rec)
		c := rec.committed
		if c.RecoveryID <= first.GetRecoveryId() {
			t.Fatalf("committed recovery id %d, want a re-drive above %d (was the primary killed too late?): %s", c.RecoveryID, first.GetRecoveryId(), rec)
		}
		if by := rec.attemptOf(c.RecoveryID); by == nil || by.Primary == primary {
			t.Errorf("the committing attempt %v was not driven by another primary than %s: %s", by, primary, rec)
		}
		if slices.Contains(c.Participants, primary) {
			t.Errorf("the killed primary %s is a target of the commit: %s", primary, rec)
		}
		fc.checkReplicas(t, w, b, rec, primary)
	})

	run("LeaderKilledDuringRecovery", func(t *testing.T) {
		w := fc.startWriter(t, pausePrefix+"leader-killed", 3, syncedBytes, unsyncedBytes)
		blk := fc.lastBlock(t, w.path)
		w.kill(t)
		killed := time.Now()
		first := fc.waitPaused(t, w.path, blk)
		old := fc.leader()
		fc.logf("recovery %d: every location RUR, primary %s paused: SIGKILL coordinator leader %s", first.GetRecoveryId(), first.GetPrimary(), old)
		if err := fc.kill(old); err != nil {
			t.Fatal(err)
		}
		defer func() {
			fc.restart(old)
			fc.waitRejoined(old)
		}()
		fc.logf("new leader %s", fc.leader(fc.others(old)...))
		b, rec := fc.waitRecovered(t, w.path, blk.Id)
		fc.logf("closed %.1fs after the writer's kill: %s", time.Since(killed).Seconds(), rec)
		// The new leader resumed the recovery from FSM state and accepted
		// the primary's commit of the same recovery id.
		if got := rec.committed.RecoveryID; got != first.GetRecoveryId() || len(rec.attempts) != 1 {
			t.Errorf("committed recovery id %d after %d attempts, want the first attempt's %d committed through the new leader: %s", got, len(rec.attempts), first.GetRecoveryId(), rec)
		}
		fc.checkReplicas(t, w, b, rec)
	})

	run("NodeRestartedReplicaRWR", func(t *testing.T) {
		w := fc.startWriter(t, "/e2e/rwr", 4, syncedBytes, unsyncedBytes)
		blk := fc.lastBlock(t, w.path)
		victim := blk.ExpectedLocations[len(blk.ExpectedLocations)-1]
		w.kill(t)
		killed := time.Now()
		if err := fc.kill(victim); err != nil {
			t.Fatal(err)
		}
		if _, err := fc.exitedAt(victim); err != nil { // docker start on a dying container is a no-op
			t.Fatal(err)
		}
		if err := fc.project.start(victim); err != nil {
			t.Fatal(err)
		}
		if err := fc.refreshNodes(victim); err != nil {
			t.Fatal(err)
		}
		var back *pb.Replica
		if err := poll(60*time.Second, 50*time.Millisecond, func(ctx context.Context) (err error) {
			back, err = fc.replicaOn(ctx, victim, blk.Id)
			if err == nil && back == nil {
				err = fmt.Errorf("%s has no replica of block %d", victim, blk.Id)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := fc.rawStat(ctx, w.path)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		started := st.Blocks[0].GetRecovery() != nil || !st.File.UnderConstruction
		fc.logf("%s restarted %.1fs after the writer's kill: replica %v GS %d, %d bytes (original %v, recovery id %d); recovery started by then: %v",
			victim, time.Since(killed).Seconds(), back.State, back.Gs, back.NumBytes, back.OriginalState, back.RecoveryId, started)
		replaced := started && back.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && back.Gs > blk.Gs
		switch st := back.State; {
		case replaced:
			// The restart (docker kill, start, port lookup) outlasted the
			// hard limit and the recovery: the RWR replica was already
			// left out, invalidated and replaced by a copy at the
			// recovered GS before it could be read. The recovery checks
			// below still hold; the RWR state was not observable.
			fc.logf("%s's replica was replaced before it could be read (the restart took longer than the recovery): RWR state not observed", victim)
		case st != pb.ReplicaState_REPLICA_STATE_RWR &&
			!(st == pb.ReplicaState_REPLICA_STATE_RUR && back.OriginalState == pb.ReplicaState_REPLICA_STATE_RWR):
			t.Errorf("%s's replica came back %v (original %v), want RWR (spec §1.4)", victim, st, back.OriginalState)
		}
		if int(back.NumBytes) < w.acked {
			t.Errorf("%s's RWR replica holds %d bytes, fewer than the %d Sync acknowledged", victim, back.NumBytes, w.acked)
		}
		b, rec := fc.waitRecovered(t, w.path, blk.Id)
		fc.logf("closed %.1fs after the writer's kill: %s", time.Since(killed).Seconds(), rec)
		// RBW beats RWR (design §R4.1): the restarted replica takes no part.
		if slices.Contains(rec.committed.Participants, victim) {
			t.Errorf("the RWR replica on %s took part in the recovery: %s", victim, rec)
		}
		fc.checkReplicas(t, w, b, rec)
		fc.logf("%s's replica after the recovery: %s", victim, fc.settledReplica(victim, b))
		if holders, err := fc.replicated(w.path, 3, 30*time.Second); err != nil {
			fc.logf("block %d not back to 3 FINALIZED replicas: %v", b.ID, err)
		} else {
			fc.logf("block %d back to 3 FINALIZED replicas on %v", b.ID, holders)
		}
	})

	run("NodeRollingRestart", func(t *testing.T) {
		// Design §R7 scenario 26 with containers: a writer on the host
		// hflushes; the last node of its pipeline is shut down for a
		// restart (ShutdownNode, as coord nodes shutdown --restart does);
		// the writer goes on and waits for it; the container is started
		// again; the write completes on the same three nodes with every
		// replica FINALIZED, at one GS, byte-identical. (The last node: the
		// writer never dials it, so the new host port Docker may give the
		// restarted container does not matter to it.)
		path := "/e2e/rolling-restart"
		data := writerData(6, 900_000)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cfg, _ := fc.fsConfig()
		c, err := client.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w, err := c.FS().Create(ctx, path, client.CreateOptions{Replication: 3, BlockSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data[:400_000]); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		blk := fc.lastBlock(t, path)
		pipeline := blk.ExpectedLocations
		victim := pipeline[len(pipeline)-1]
		if err := c.ShutdownNode(ctx, victim, true); err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := w.Write(data[400_000:])
			if err == nil {
				err = w.Close(ctx)
			}
			wrote <- err
		}()
		exited, err := fc.exitedAt(victim)
		if err != nil {
			t.Fatal(err)
		}
		if err := fc.project.start(victim); err != nil {
			t.Fatal(err)
		}
		if err := fc.refreshNodes(victim); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("the write through %s's restart: %v", victim, err)
			}
		case <-ctx.Done():
			t.Fatal("the writer did not finish")
		}
		fc.logf("%s shut down for a restart, exited %s, started again; the writer finished %.1fs after the exit",
			victim, exited.Format(time.RFC3339Nano), time.Since(exited).Seconds())
		info, err := c.FS().Stat(ctx, path)
		if err != nil || info.UnderConstruction || info.Length != uint64(len(data)) || len(info.Blocks) != 1 {
			t.Fatalf("stat: %+v, %v", info, err)
		}
		b := info.Blocks[0]
		if b.GS <= blk.Gs || !slices.Equal(slices.Sorted(slices.Values(b.Expected)), slices.Sorted(slices.Values(pipeline))) {
			t.Fatalf("GS %d (was %d), expected %v: want the same pipeline %v", b.GS, blk.Gs, b.Expected, pipeline)
		}
		for _, n := range pipeline {
			var r *pb.Replica
			if err := poll(30*time.Second, 100*time.Millisecond, func(ctx context.Context) (err error) {
				r, err = fc.replicaOn(ctx, n, b.ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if r == nil || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != b.GS || r.NumBytes != int64(len(data)) {
				t.Fatalf("%s holds %v, want FINALIZED at GS %d with %d bytes", n, r, b.GS, len(data))
			}
			got, err := fc.readReplica(ctx, n, b.ID, b.GS, b.Token)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%s's replica differs from the written bytes", n)
			}
		}
		fc.logf("block %d on %v (the same pipeline): FINALIZED at GS %d (was %d), %d identical bytes", b.ID, pipeline, b.GS, blk.Gs, len(data))
	})

	run("NodeDeadForGood", func(t *testing.T) {
		path := "/e2e/dead-node"
		data := writerData(5, 700_000)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := fc.client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := c.FS().Create(ctx, path, client.CreateOptions{Replication: 3, BlockSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := fw.Close(ctx); err != nil {
			t.Fatal(err)
		}
		holders := fc.waitReplicated(t, path, 3, nil, 30*time.Second)
		victim := holders[0]
		fc.logf("%s closed, FINALIZED on %v: SIGKILL %s for good", path, holders, victim)
		if err := fc.kill(victim); err != nil {
			t.Fatal(err)
		}
		deadForGood = append(deadForGood, victim)
		killed := time.Now()
		now := fc.waitReplicated(t, path, 3, []string{victim}, 60*time.Second)
		fc.logf("back to 3 FINALIZED replicas on %v %.1fs after the kill", now, time.Since(killed).Seconds())
		b := fc.lastBlock(t, path)
		for _, n := range now {
			if slices.Contains(holders, n) {
				continue
			}
			got, err := fc.readReplica(ctx, n, b.Id, b.Gs, b.BlockToken)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("the new replica on %s: %d bytes, not the file's %d", n, len(got), len(data))
			}
		}
		fc.checkFileBytes(t, path, data)
	})
}

// attemptOf is the attempt with recovery id id.
func (r recoveryLog) attemptOf(id uint64) *client.BlockRecovery {
	for _, a := range r.attempts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// lastBlock is path's last block as the leader knows it.
func (fc *fsCluster) lastBlock(t *testing.T, path string) *pb.BlockStatus {
	t.Helper()
	var b *pb.BlockStatus
	if err := poll(30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		st, err := fc.rawStat(ctx, path)
		if err != nil {
			return err
		}
		if len(st.Blocks) == 0 {
			return fmt.Errorf("%s has no block", path)
		}
		b = st.Blocks[len(st.Blocks)-1]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitPaused waits until blk's recovery has started and every expected
// location holds the replica RUR under the recovery's id: the primary's
// initReplicaRecovery calls are done and it sleeps in the failpoint.
func (fc *fsCluster) waitPaused(t *testing.T, path string, blk *pb.BlockStatus) *pb.BlockRecovery {
	t.Helper()
	var rec *pb.BlockRecovery
	err := poll(30*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		st, err := fc.rawStat(ctx, path)
		if err != nil {
			return err
		}
		if !st.File.UnderConstruction {
			return fmt.Errorf("%s closed before the test saw its recovery paused", path) // fails at the deadline
		}
		b := st.Blocks[len(st.Blocks)-1]
		if rec = b.GetRecovery(); rec == nil {
			return fmt.Errorf("block %d not under recovery (%v)", b.Id, b.State)
		}
		for _, n := range b.ExpectedLocations {
			r, err := fc.replicaOn(ctx, n, b.Id)
			if err != nil {
				return err
			}
			if r == nil || r.State != pb.ReplicaState_REPLICA_STATE_RUR || r.RecoveryId != rec.GetRecoveryId() {
				return fmt.Errorf("%s: replica %v, want RUR under recovery %d", n, r, rec.GetRecoveryId())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitRecovered waits (SDK Stat) until path is closed with its last block
// id COMPLETE, and returns the block and its recovery from the journal.
func (fc *fsCluster) waitRecovered(t *testing.T, path string, id uint64) (client.BlockInfo, recoveryLog) {
	t.Helper()
	var b client.BlockInfo
	err := poll(closeTimeout, 200*time.Millisecond, func(ctx context.Context) error {
		c, err := fc.client(ctx)
		if err != nil {
			return err
		}
		info, err := c.FS().Stat(ctx, path)
		if err != nil {
			return err
		}
		if info.UnderConstruction || len(info.Blocks) == 0 {
			return fmt.Errorf("%s still open (%d blocks)", path, len(info.Blocks))
		}
		b = info.Blocks[len(info.Blocks)-1]
		if b.ID != id || b.State != client.BlockComplete {
			return fmt.Errorf("%s closed with last block %d %v, want block %d COMPLETE", path, b.ID, b.State, id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("file not recovered: %v", err)
	}
	var rec recoveryLog
	err = poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) (err error) {
		rec, err = fc.recoveryOf(ctx, id)
		if err == nil && rec.committed == nil {
			err = fmt.Errorf("no committed recovery of block %d in the journal: %s", id, rec)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := rec.committed; c.NewGS != b.GS || c.Length != b.Length || c.Deleted {
		t.Fatalf("block %d GS %d length %d, but the recovery committed %v", id, b.GS, b.Length, c)
	}
	return b, rec
}

// checkReplicas checks invariant 4 on the recovered block b, reading every
// replica straight from its node (but the nodes in down): every FINALIZED
// replica at b's GS has b's length and the same bytes, which are the
// writer's, at least as many as Sync acknowledged; every node the commit
// names holds one. It also reads the file through the SDK.
func (fc *fsCluster) checkReplicas(t *testing.T, w *writerProc, b client.BlockInfo, rec recoveryLog, down ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := w.data()
	if b.Length < uint64(w.acked) || b.Length > uint64(len(data)) {
		t.Errorf("recovered length %d: Sync acknowledged %d, the writer wrote %d", b.Length, w.acked, len(data))
	}
	var finalized []string
	var first []byte
	for _, n := range fc.nodes {
		if slices.Contains(down, n) {
			continue
		}
		r, err := fc.replicaOn(ctx, n, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r == nil || r.State != pb.ReplicaState_REPLICA_STATE_FINALIZED || r.Gs != b.GS {
			if slices.Contains(rec.committed.Participants, n) {
				t.Errorf("%s is a recovery target but holds %v, want FINALIZED at GS %d", n, r, b.GS)
			}
			continue
		}
		finalized = append(finalized, n)
		got, err := fc.readReplica(ctx, n, b.ID, b.GS, b.Token)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.NumBytes != int64(b.Length) || len(got) != int(b.Length):
			t.Errorf("%s: replica of %d bytes (read %d), the block has %d", n, r.NumBytes, len(got), b.Length)
		case !bytes.Equal(got, data[:len(got)]):
			t.Errorf("%s: the replica's bytes are not the writer's (first difference at %d)", n, firstDiff(got, data))
		case first != nil && !bytes.Equal(got, first):
			t.Errorf("%s: the replica differs from %s's", n, finalized[0])
		}
		if first == nil {
			first = got
		}
	}
	if len(finalized) < len(rec.committed.Participants) || len(finalized) == 0 {
		t.Errorf("FINALIZED replicas at GS %d on %v; the commit names %v", b.GS, finalized, rec.committed.Participants)
	}
	fc.logf("block %d: %d FINALIZED replicas at GS %d on %v, %d bytes each (acked %d, written %d), identical, the writer's",
		b.ID, len(finalized), b.GS, finalized, b.Length, w.acked, len(data))
	fc.checkFileBytes(t, w.path, data[:b.Length])
}

// checkFileBytes reads path through the SDK (node addresses mapped).
func (fc *fsCluster) checkFileBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := fc.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.FS().Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s through the SDK: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read %s through the SDK: %d bytes, want %d (first difference at %d)", path, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// settledReplica waits up to 30 s for node's replica of b to settle —
// gone (invalidated) or FINALIZED at b's GS (re-replicated) — and
// describes what it holds then.
func (fc *fsCluster) settledReplica(node string, b client.BlockInfo) string {
	var r *pb.Replica
	err := poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) (err error) {
		if r, err = fc.replicaOn(ctx, node, b.ID); err != nil {
			return err
		}
		if r != nil && !(r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && r.Gs == b.GS) {
			return fmt.Errorf("still %v", r.State)
		}
		return nil
	})
	switch {
	case r == nil && err == nil:
		return "gone (invalidated by the leader)"
	case r == nil:
		return "unknown: " + err.Error()
	case err == nil:
		return fmt.Sprintf("FINALIZED at the block's GS %d, %d bytes (a new copy)", r.Gs, r.NumBytes)
	}
	return fmt.Sprintf("still %v GS %d, %d bytes (original %v, recovery id %d) after 30s", r.State, r.Gs, r.NumBytes, r.OriginalState, r.RecoveryId)
}

// waitReplicated waits until path is closed and its last block is
// reported FINALIZED at its GS and length by want live nodes, none of them
// in except, and returns those nodes.
func (fc *fsCluster) waitReplicated(t *testing.T, path string, want int, except []string, timeout time.Duration) []string {
	t.Helper()
	holders, err := fc.replicated(path, want, timeout, except...)
	if err != nil {
		t.Fatal(err)
	}
	return holders
}

func (fc *fsCluster) replicated(path string, want int, timeout time.Duration, except ...string) ([]string, error) {
	var holders []string
	err := poll(timeout, 250*time.Millisecond, func(ctx context.Context) error {
		st, err := fc.rawStat(ctx, path)
		if err != nil {
			return err
		}
		if st.File.UnderConstruction || len(st.Blocks) == 0 {
			return fmt.Errorf("%s open", path)
		}
		b := st.Blocks[len(st.Blocks)-1]
		holders = holders[:0]
		for _, r := range b.ReportedLocations {
			if r.State == pb.ReplicaState_REPLICA_STATE_FINALIZED && r.Gs == b.Gs && r.NumBytes == int64(b.NumBytes) &&
				!slices.Contains(except, r.NodeId) && !slices.Contains(holders, r.NodeId) {
				holders = append(holders, r.NodeId)
			}
		}
		if len(holders) < want {
			return fmt.Errorf("block %d %v: FINALIZED at GS %d on %v (reported %v), want %d without %v", b.Id, b.State, b.Gs, holders, b.ReportedLocations, want, except)
		}
		return nil
	})
	slices.Sort(holders)
	return holders, err
}
