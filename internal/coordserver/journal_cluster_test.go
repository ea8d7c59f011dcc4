package coordserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func smallSegments(eps uint64, maxSegs int) clusterOpt {
	return func(i int, c *Config) {
		c.Journal.EventsPerSegment = eps
		c.Journal.MaxSegments = maxSegs
	}
}

// waitJournalConfig waits until every member rolls segments at eps events
// (the leader replicates its configuration shortly after election).
func waitJournalConfig(t *testing.T, tc *testCluster, eps uint64) {
	eventually(t, 10*time.Second, "the journal config to replicate", func() bool {
		for i := range tc.servers {
			var got uint64
			tc.server(i).fsm.View(func(st *fsm.State) { got = st.JournalConfig().EventsPerSegment })
			if got != eps {
				return false
			}
		}
		return true
	})
}

// checkPositions asserts trimmed_pos <= expire_pos <= safe_pos+1 and that
// no consumer's needs were trimmed, on one member.
func checkPositions(t *testing.T, s *Server) {
	t.Helper()
	covered := s.snapshotIndex()
	s.fsm.View(func(st *fsm.State) {
		trimmed, expire, safe := st.FirstSeq(), st.ExpirePos(covered), st.NextSeq()-1
		if trimmed > expire || expire > safe+1 {
			t.Fatalf("%s: positions out of order: trimmed %d expire %d safe %d", s.ID(), trimmed, expire, safe)
		}
		for _, c := range st.Consumers() {
			if c.AckedSeq+1 < trimmed {
				t.Fatalf("%s: trimmed to %d past consumer %s at %d", s.ID(), trimmed, c.Name, c.AckedSeq)
			}
		}
		if n := len(st.Segments()); n > 0 && st.Segments()[0].FirstSeq != trimmed {
			t.Fatalf("%s: oldest segment starts at %d, trimmed_pos %d", s.ID(), st.Segments()[0].FirstSeq, trimmed)
		}
	})
}

func TestTrimWhileAppendingNeverPassesConsumer(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, smallSegments(16, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitJournalConfig(t, tc, 16)
	c := tc.client(ctx)
	if _, err := c.Journal().Consumers().Register(ctx, "indexer", 1); err != nil {
		t.Fatal(err)
	}
	a := startAppenders(t, tc, 4)
	// The consumer acks in steps, lagging behind; trim follows it.
	var acked uint64
	for step := 0; step < 6; step++ {
		eventually(t, 20*time.Second, "more appends", func() bool { return a.count() >= (step+1)*60 })
		p, err := c.Journal().Positions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked = p.SafePos - 20
		if _, err := c.Journal().Consumers().Ack(ctx, "indexer", acked); err != nil {
			t.Fatal(err)
		}
		for i := range tc.servers {
			checkPositions(t, tc.server(i))
		}
	}
	// Automatic trim catches up with the consumer (over the 3-segment limit).
	eventually(t, 20*time.Second, "automatic trim", func() bool {
		var first uint64
		ls := tc.server(tc.waitLeader())
		ls.fsm.View(func(st *fsm.State) {
			first = st.FirstSeq()
		})
		return first > 1 && first+16 > acked-16
	})
	a.halt()
	tc.waitConverged()
	for i := range tc.servers {
		checkPositions(t, tc.server(i))
	}
	// Reads below trimmed_pos are refused with the earliest retained seq.
	_, _, err := c.Journal().Read(ctx, 1, 10)
	if !errors.Is(err, client.ErrOutOfRange) {
		t.Fatalf("read below trimmed_pos: %v", err)
	}
}

// TestAutomaticTrimKeepsTheLimit: over --journal-max-segments the leader
// trims the oldest segments back to the limit, as MDLog does, not every
// expired one: the journal keeps max-segments segments of history on every
// member, and reads start at the new trimmed_pos.
func TestAutomaticTrimKeepsTheLimit(t *testing.T) {
	t.Parallel()
	const eps, maxSegs, events = 8, 4, 100 // 12 sealed segments and an open one
	tc := newTestCluster(t, 3, smallSegments(eps, maxSegs))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitJournalConfig(t, tc, eps)
	c := tc.client(ctx)
	var last uint64
	for i := 0; i < events; i += 10 {
		evs := make([]client.Event, 10)
		for k := range evs {
			evs[k] = client.Event{Type: "t", Payload: []byte(fmt.Sprintf("e%03d", i+k))}
		}
		seqs, err := c.Journal().Append(ctx, evs...)
		if err != nil {
			t.Fatal(err)
		}
		last = seqs[len(seqs)-1]
	}
	// The open segment holds seqs 97..100; the three sealed ones before it
	// start at 73.
	const wantFirst = events - events%eps - (maxSegs-1)*eps + 1
	shape := func(s *Server) (first uint64, segs int) {
		s.fsm.View(func(st *fsm.State) { first, segs = st.FirstSeq(), len(st.Segments()) })
		return first, segs
	}
	eventually(t, 20*time.Second, "automatic trim to the limit", func() bool {
		first, _ := shape(tc.server(tc.waitLeader()))
		return first > 1
	})
	tc.waitConverged()
	for i := range tc.servers {
		if first, segs := shape(tc.server(i)); first != wantFirst || segs != maxSegs {
			t.Fatalf("%s: trimmed_pos %d with %d segments, want %d with %d", tc.server(i).ID(), first, segs, wantFirst, maxSegs)
		}
		checkPositions(t, tc.server(i))
	}
	// Within the limit nothing more is trimmed (three journal upkeep rounds).
	stays(t, 3500*time.Millisecond, "the journal at its limit", func() bool {
		first, segs := shape(tc.server(tc.waitLeader()))
		return first == wantFirst && segs == maxSegs
	})
	got, _, err := c.Journal().Read(ctx, wantFirst, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != int(last-wantFirst+1) || got[0].Seq != wantFirst || string(got[0].Payload) != fmt.Sprintf("e%03d", wantFirst-1) {
		t.Fatalf("read from trimmed_pos: %d events from seq %d", len(got), got[0].Seq)
	}
	if _, _, err := c.Journal().Read(ctx, wantFirst-1, 10); !errors.Is(err, client.ErrOutOfRange) {
		t.Fatalf("read below trimmed_pos: %v", err)
	}
}

// TestAutomaticTrimHeldByConsumer: over the limit with a consumer that
// still needs the oldest segment, the leader proposes no TRIM at all (not
// an empty one every second), and nothing is trimmed.
func TestAutomaticTrimHeldByConsumer(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, smallSegments(8, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitJournalConfig(t, tc, 8)
	c := tc.client(ctx)
	if _, err := c.Journal().Consumers().Register(ctx, "slow", 1); err != nil {
		t.Fatal(err)
	}
	evs := make([]client.Event, 50)
	for i := range evs {
		evs[i] = client.Event{Type: "t"}
	}
	if _, err := c.Journal().Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	ls := tc.server(tc.waitLeader())
	// The leader's one-off upkeep (raising the log format, then
	// replicating the session idle timeout it brings) is done first.
	eventually(t, 10*time.Second, "the log format raised and the idle timeout replicated", func() bool {
		var f uint32
		var idle time.Duration
		ls.fsm.View(func(st *fsm.State) { f, idle = st.LogFormat(), st.SessionIdleTimeout() })
		return f == fsm.CommandVersion && idle == ls.cfg.Journal.SessionIdleTimeout
	})
	tc.waitConverged()
	last := ls.raft.LastIndex()
	// No trim is proposed, by this leader or by one after it (an election
	// on a loaded machine may add its own entries, which are fine), and
	// nothing is trimmed.
	stays(t, 3500*time.Millisecond, "no trim entry while the consumer holds the journal", func() bool {
		var first uint64
		ls.fsm.View(func(st *fsm.State) { first = st.FirstSeq() })
		return first == 1 && commandsSince(t, ls, last, fsmpb.CommandType_COMMAND_TYPE_TRIM) == 0
	})
}

// commandsSince counts the command entries of type typ in s's Raft log
// after index after.
func commandsSince(t *testing.T, s *Server, after uint64, typ fsmpb.CommandType) int {
	t.Helper()
	last, err := s.node.Store().LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := after + 1; i <= last; i++ {
		var e raft.Log
		if err := s.node.Store().GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Type == typ {
			n++
		}
	}
	return n
}

func TestConsumerRegisteredOnOneLeaderAckedOnTheNext(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	if _, err := c.Journal().Append(ctx, client.Event{Type: "t"}, client.Event{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Journal().Consumers().Register(ctx, "audit", 1); err != nil {
		t.Fatal(err)
	}
	old := tc.waitLeader()
	if _, err := c.Cluster().TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if tc.waitLeader() == old {
		t.Fatal("leadership did not move")
	}
	info, err := c.Journal().Consumers().Ack(ctx, "audit", 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckedSeq != 2 || info.Lag != 0 {
		t.Fatalf("ack: %+v", info)
	}
	tc.waitConverged()
	for i := range tc.servers {
		tc.server(i).fsm.View(func(st *fsm.State) {
			cs := st.Consumers()
			if len(cs) != 1 || cs[0].Name != "audit" || cs[0].AckedSeq != 2 {
				t.Fatalf("member %d consumers %v", i, cs)
			}
		})
	}
}

func TestTailAcrossLeaderChangeNoGapNoDuplicate(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.client(ctx)
	var mu sync.Mutex
	var got []uint64
	tailCtx, stopTail := context.WithCancel(ctx)
	tailDone := make(chan error, 1)
	go func() {
		tailDone <- c.Journal().Tail(tailCtx, 1, func(e client.StoredEvent) error {
			mu.Lock()
			got = append(got, e.Seq)
			mu.Unlock()
			return nil
		})
	}()
	a := startAppenders(t, tc, 4)
	eventually(t, 20*time.Second, "appends before the kill", func() bool { return a.count() >= 100 })
	tc.kill(tc.waitLeader())
	tc.waitLeader()
	before := a.count()
	eventually(t, 20*time.Second, "appends after failover", func() bool { return a.count() >= before+100 })
	a.halt()
	var safe uint64
	s := tc.server(tc.waitLeader())
	s.fsm.View(func(st *fsm.State) { safe = st.NextSeq() - 1 })
	eventually(t, 20*time.Second, "the tail to reach safe_pos", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return uint64(len(got)) >= safe
	})
	stopTail()
	<-tailDone
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("tail delivered seq %d at position %d (gap or duplicate)", seq, i)
		}
	}
}

// TestTailCallbackErrorEndsStream: a tail the callback stops (here at seq
// 2, with the caller's context still live) ends its stream: no member goes
// on serving it. Before the fix the SDK left the stream open until the
// caller's context ended.
func TestTailCallbackErrorEndsStream(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.client(ctx)
	for range 3 {
		if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	serving := func() (n int64) {
		for i := range tc.servers {
			n += tc.server(i).tailStreams.Load()
		}
		return n
	}
	errStop := errors.New("stop here")
	for round := range 3 {
		var seen []uint64
		err := c.Journal().Tail(ctx, 1, func(e client.StoredEvent) error {
			seen = append(seen, e.Seq)
			if e.Seq == 2 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) || !slices.Equal(seen, []uint64{1, 2}) {
			t.Fatalf("round %d: tail returned %v after %v; want the callback's error after seqs 1, 2", round, err, seen)
		}
		eventually(t, 10*time.Second, "no member serving the stopped tail", func() bool { return serving() == 0 })
	}
	if ctx.Err() != nil {
		t.Fatal("the caller's context ended: the check above proves nothing")
	}
}

func TestJournalAdminBadInput(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, smallSegments(4, 0))
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	if _, err := c.Journal().Append(ctx, client.Event{Type: "t"}, client.Event{Type: "t"}, client.Event{Type: "t"}, client.Event{Type: "t"}, client.Event{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Journal().Consumers().Register(ctx, "c1", 0); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(tc.cfgs[tc.followers(leader)[0]].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc := pb.NewJournalClient(conn) // through a follower: forwarded
	// Background commands (journal config, member registration) first.
	waitJournalConfig(t, tc, 4)
	eventually(t, 10*time.Second, "every member registered", func() bool {
		n := 0
		tc.server(leader).fsm.View(func(st *fsm.State) { n = len(st.Members()) })
		return n == len(tc.servers)
	})
	tc.waitConverged()
	before := tc.server(leader).fsm.AppliedIndex()
	for _, tcase := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"ack beyond safe_pos", func() error { _, err := jc.AckConsumer(ctx, &pb.AckConsumerRequest{Name: "c1", Seq: 99}); return err }, codes.OutOfRange},
		{"ack backwards", func() error { _, err := jc.AckConsumer(ctx, &pb.AckConsumerRequest{Name: "c1", Seq: 1}); return err }, codes.FailedPrecondition},
		{"ack unknown", func() error {
			_, err := jc.AckConsumer(ctx, &pb.AckConsumerRequest{Name: "nobody", Seq: 1})
			return err
		}, codes.NotFound},
		{"remove unknown", func() error { _, err := jc.RemoveConsumer(ctx, &pb.RemoveConsumerRequest{Name: "nobody"}); return err }, codes.NotFound},
		{"register twice", func() error { _, err := jc.RegisterConsumer(ctx, &pb.RegisterConsumerRequest{Name: "c1"}); return err }, codes.AlreadyExists},
		{"bad name", func() error { _, err := jc.RegisterConsumer(ctx, &pb.RegisterConsumerRequest{Name: "a/b"}); return err }, codes.InvalidArgument},
		{"register from the future", func() error {
			_, err := jc.RegisterConsumer(ctx, &pb.RegisterConsumerRequest{Name: "c2", From: 1000})
			return err
		}, codes.OutOfRange},
		{"trim to the future", func() error { _, err := jc.Trim(ctx, &pb.TrimRequest{To: 1000}); return err }, codes.InvalidArgument},
		{"reset without confirm", func() error { _, err := jc.Reset(ctx, &pb.ResetRequest{}); return err }, codes.FailedPrecondition},
	} {
		if err := tcase.call(); status.Code(err) != tcase.code {
			t.Fatalf("%s: got %v, want %v", tcase.name, err, tcase.code)
		}
	}
	if after := tc.server(leader).fsm.AppliedIndex(); after != before {
		t.Fatalf("refused journal commands reached the log (applied index %d -> %d)", before, after)
	}
	// Reset: events gone, seqs continue, tail from a trimmed seq refused.
	if _, err := c.Journal().Reset(ctx, true); err != nil {
		t.Fatal(err)
	}
	seqs, err := c.Journal().Append(ctx, client.Event{Type: "after"})
	if err != nil || seqs[0] != 6 {
		t.Fatalf("append after reset: %v %v", seqs, err)
	}
	err = c.Journal().Tail(ctx, 1, func(client.StoredEvent) error { return nil })
	if !errors.Is(err, client.ErrOutOfRange) {
		t.Fatalf("tail from a trimmed seq: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	if err := c.Journal().SetPaused(ctx, true); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var done sync.Map
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs, err := c.Journal().Append(ctx, client.Event{Type: "paused", Payload: []byte{byte(i)}})
			if err != nil {
				t.Error(err)
				return
			}
			done.Store(i, seqs[0])
		}()
	}
	// While paused nothing reaches the log (observed for a bounded window).
	leader := tc.server(tc.waitLeader())
	eventually(t, 10*time.Second, "appends queued behind the pause", func() bool {
		return leader.leaderB.Paused()
	})
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		var next uint64
		leader.fsm.View(func(st *fsm.State) { next = st.NextSeq() })
		if next != 1 {
			t.Fatalf("an append committed while paused (next seq %d)", next)
		}
		time.Sleep(10 * time.Millisecond) // polling interval of the observation window
	}
	p, err := c.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Paused && p.MemberID == leader.ID() {
		t.Fatal("positions on the leader do not show the pause")
	}
	if err := c.Journal().SetPaused(ctx, false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	seen := map[uint64]bool{}
	done.Range(func(_, v any) bool { seen[v.(uint64)] = true; return true })
	for s := uint64(1); s <= 20; s++ {
		if !seen[s] {
			t.Fatalf("seq %d missing after resume (%d appends done)", s, len(seen))
		}
	}
}

func TestStreamingSubmitExactlyOnceAcrossFailover(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.client(ctx)
	const n = 3000
	futures := make([]*client.Future, n)
	for i := 0; i < n; i++ {
		futures[i] = c.Journal().Submit(client.Event{Type: "stream", Payload: []byte(fmt.Sprint(i))})
		if i == n/3 {
			// Kill the leader with many submissions in flight.
			tc.kill(tc.waitLeader())
		}
	}
	if err := c.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Journal().WaitForSafe(ctx); err != nil {
		t.Fatal(err)
	}
	prev := uint64(0)
	acked := map[uint64]string{}
	for i, f := range futures {
		seqs, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
		// One client's submissions keep their order.
		if seqs[0] <= prev {
			t.Fatalf("submission %d got seq %d after %d", i, seqs[0], prev)
		}
		prev = seqs[0]
		acked[seqs[0]] = fmt.Sprint(i)
	}
	verifyJournal(t, tc, acked)
}

func TestVerifyDigestsAgree(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	a := startAppenders(t, tc, 4)
	eventually(t, 20*time.Second, "some appends", func() bool { return a.count() >= 200 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	// Under load: the digests compare one index, not whatever each member
	// applied last.
	r, err := c.Cluster().Verify(ctx)
	a.halt()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Consistent || len(r.Members) != 3 || r.Members[0].Digest == "" {
		t.Fatalf("verify: %+v", r)
	}
}
