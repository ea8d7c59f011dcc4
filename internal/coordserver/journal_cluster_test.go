package coordserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	"google.golang.org/protobuf/proto"
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

// TestSessionExpiredStartsNewSession: once the cluster no longer holds a
// client's session (here a forced import replaces every session; eviction
// over fsm.MaxSessions is the other way), a request marked
// session_established is refused with FailedPrecondition SESSION_EXPIRED
// (through a follower's forward too) and applies nothing — the first
// request of an opened session included. The SDK's next Append, refused at
// its first attempt, is sent again in a newly opened session and applied
// once; a Submit future fails with ErrSessionExpired and the next Submit
// works.
func TestSessionExpiredStartsNewSession(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := tc.waitLeader()
	eventually(t, 20*time.Second, "the newest log format", func() bool {
		return tc.server(tc.waitLeader()).logFormat() == fsm.CommandVersion
	})
	follower := tc.followers(leader)[0]
	c, err := client.New(ctx, client.Config{Endpoints: []string{tc.cfgs[follower].GRPCAddr}, AttemptTimeout: 2 * time.Second, ClientID: "expiring"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j := c.Journal()
	forceImport := func() {
		t.Helper()
		if _, err := j.ImportChunk(ctx, []client.StoredEvent{{Seq: 1, Type: "imported"}}, true, true, ""); err != nil {
			t.Fatal(err)
		}
	}
	nextSeq := func() uint64 {
		p, err := j.Positions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p.SafePos + 1
	}
	var first []uint64
	for i := range 2 {
		seqs, err := j.Append(ctx, client.Event{Type: "before", Payload: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, seqs...)
	}
	evs, _, err := j.Read(ctx, first[0], 2)
	if err != nil || len(evs) != 2 || !strings.HasPrefix(evs[0].ClientID, "expiring@") || evs[1].ClientID != evs[0].ClientID {
		t.Fatalf("the SDK's opened session: %+v, %v", evs, err)
	}
	session := evs[0].ClientID
	raw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[follower].GRPCAddr))
	opened, err := raw.OpenSession(ctx, &pb.OpenSessionRequest{ClientId: "raw"})
	if err != nil || opened.SessionId != fmt.Sprintf("raw@%d", opened.Index) {
		t.Fatalf("open through a follower: %+v, %v", opened, err)
	}
	forceImport()
	next := nextSeq()
	_, err = raw.Append(ctx, &pb.AppendRequest{ClientId: session, RequestSeq: 3, AckedSeq: 2, SessionEstablished: true, Events: []*pb.Event{{Type: "lost"}}})
	wantCode(t, "append of an expired session through a follower", err, codes.FailedPrecondition, pb.ReasonSessionExpired)
	_, err = raw.Append(ctx, &pb.AppendRequest{ClientId: opened.SessionId, RequestSeq: 1, SessionEstablished: true, Events: []*pb.Event{{Type: "lost"}}})
	wantCode(t, "first append of an opened session that expired", err, codes.FailedPrecondition, pb.ReasonSessionExpired)
	if n := nextSeq(); n != next {
		t.Fatalf("a refused append was applied (next seq %d, was %d)", n, next)
	}
	seqs, err := j.Append(ctx, client.Event{Type: "after"})
	if err != nil {
		t.Fatalf("the SDK's first append after the expiry: %v", err)
	}
	evs, _, err = j.Read(ctx, next, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != seqs[0] || evs[0].Type != "after" || !strings.HasPrefix(evs[0].ClientID, "expiring@") || evs[0].ClientID == session {
		t.Fatalf("the journal after the expiry (first session %s): %+v, %v", session, evs, err)
	}

	// The streaming path (leader only) answers the same way.
	sc := tc.client(ctx)
	sj := sc.Journal()
	if _, err := sj.Submit(client.Event{Type: "s1"}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	forceImport()
	if _, err := sj.Submit(client.Event{Type: "s-lost"}).Wait(ctx); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("submit of an expired session: %v", err)
	}
	if _, err := sj.Submit(client.Event{Type: "s2"}).Wait(ctx); err != nil {
		t.Fatalf("submit after: %v", err)
	}
}

// TestOpenSessionWaitsForLogFormat7: while a voter runs a build before log
// format 7, OpenSession fails with FailedPrecondition LOG_FORMAT and the
// SDK uses its client id as the session, as before; once every voter reads
// format 7 the SDK opens sessions, so a client restarted with the same
// ClientID — whose first request the old session would have answered with
// its previous run's result, dropping the new events — gets a session of
// its own. Bad client ids get InvalidArgument and change nothing.
func TestOpenSessionWaitsForLogFormat7(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		if i == 2 {
			c.maxLogFormat = fsm.SessionExpiryFormat
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	format := func() uint32 { return tc.server(tc.waitLeader()).logFormat() }
	eventually(t, 20*time.Second, "format 6", func() bool { return format() == fsm.SessionExpiryFormat })
	appendAs := func(typ string) client.StoredEvent {
		t.Helper()
		c, err := client.New(ctx, client.Config{Endpoints: tc.endpoints(), AttemptTimeout: 2 * time.Second, ClientID: "fixed"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		seqs, err := c.Journal().Append(ctx, client.Event{Type: typ})
		if err != nil {
			t.Fatalf("append %s: %v", typ, err)
		}
		evs, _, err := c.Journal().Read(ctx, seqs[0], 1)
		if err != nil || len(evs) != 1 || evs[0].Type != typ {
			t.Fatalf("read back %s: %+v, %v", typ, evs, err)
		}
		return evs[0]
	}
	if e := appendAs("old-cluster"); e.ClientID != "fixed" {
		t.Fatalf("at format 6 the session is the client id: %+v", e)
	}
	raw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[tc.waitLeader()].GRPCAddr))
	_, err := raw.OpenSession(ctx, &pb.OpenSessionRequest{ClientId: "x"})
	wantCode(t, "open at format 6", err, codes.FailedPrecondition, ReasonLogFormat)

	tc.cfgs[2].maxLogFormat = 0
	tc.restart(2)
	eventually(t, 30*time.Second, "format 7", func() bool { return format() == fsm.CommandVersion })
	raw = pb.NewJournalClient(dataNodeConn(t, tc.cfgs[tc.waitLeader()].GRPCAddr))
	var sessions int
	tc.server(tc.waitLeader()).fsm.View(func(st *fsm.State) { sessions = st.SessionCount() })
	for _, bad := range []string{"", strings.Repeat("x", fsm.MaxSessionBaseBytes+1)} {
		_, err := raw.OpenSession(ctx, &pb.OpenSessionRequest{ClientId: bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("open of a %d-byte client id: %v, want InvalidArgument", len(bad), err)
		}
	}
	tc.server(tc.waitLeader()).fsm.View(func(st *fsm.State) {
		if st.SessionCount() != sessions {
			t.Errorf("refused opens changed the sessions: %d -> %d", sessions, st.SessionCount())
		}
	})

	first := appendAs("first-run")
	second := appendAs("second-run")
	if !strings.HasPrefix(first.ClientID, "fixed@") || !strings.HasPrefix(second.ClientID, "fixed@") || first.ClientID == second.ClientID || second.Seq != first.Seq+1 {
		t.Fatalf("two runs of client fixed: %+v, %+v", first, second)
	}
}

// TestCloseSessionWaitsForLogFormat8: the SDK's Close ends its session on
// the cluster. While a voter runs a build before log format 8, CloseSession
// fails with FailedPrecondition LOG_FORMAT and Close still succeeds (the
// session stays until evicted); once every voter reads format 8, Close —
// through a follower too — makes every member forget the session, and a
// request of it is then refused with SESSION_EXPIRED and applies nothing.
// A second close answers closed=false; bad ids get InvalidArgument and
// change nothing.
func TestCloseSessionWaitsForLogFormat8(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		if i == 2 {
			c.maxLogFormat = fsm.SessionOpenFormat
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	format := func() uint32 { return tc.server(tc.waitLeader()).logFormat() }
	eventually(t, 20*time.Second, "format 7", func() bool { return format() == fsm.SessionOpenFormat })
	held := func(id string) int { return membersHolding(tc, id) }
	// appendAndClose appends through endpoint and closes the client,
	// returning the session its append carried.
	appendAndClose := func(endpoint string) string {
		t.Helper()
		c, err := client.New(ctx, client.Config{Endpoints: []string{endpoint}, AttemptTimeout: 2 * time.Second, ClientID: "closing"})
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "e"})
		if err != nil {
			t.Fatal(err)
		}
		id := sessionAt(t, ctx, c, seqs[0])
		if !strings.HasPrefix(id, "closing@") {
			t.Fatalf("appended in session %q", id)
		}
		eventually(t, 10*time.Second, "every member holds the session", func() bool { return held(id) == len(tc.cfgs) })
		if err := c.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		return id
	}

	old := appendAndClose(tc.cfgs[tc.waitLeader()].GRPCAddr)
	if n := held(old); n != len(tc.cfgs) {
		t.Fatalf("at format 7 a closed client's session stays: held by %d members", n)
	}
	leaderRaw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[tc.waitLeader()].GRPCAddr))
	_, err := leaderRaw.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: old})
	wantCode(t, "close at format 7", err, codes.FailedPrecondition, ReasonLogFormat)

	tc.cfgs[2].maxLogFormat = 0
	tc.restart(2)
	eventually(t, 30*time.Second, "format 8 or later", func() bool { return format() >= fsm.SessionCloseFormat })
	leader := tc.waitLeader()
	follower := (leader + 1) % len(tc.cfgs)
	id := appendAndClose(tc.cfgs[follower].GRPCAddr)
	eventually(t, 10*time.Second, "no member holds the closed session", func() bool { return held(id) == 0 })

	raw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[follower].GRPCAddr))
	var next uint64
	tc.server(leader).fsm.View(func(st *fsm.State) { next = st.NextSeq() })
	_, err = raw.Append(ctx, &pb.AppendRequest{ClientId: id, RequestSeq: 2, AckedSeq: 1, SessionEstablished: true, Events: []*pb.Event{{Type: "late"}}})
	wantCode(t, "append of a closed session", err, codes.FailedPrecondition, pb.ReasonSessionExpired)
	resp, err := raw.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: id})
	if err != nil || resp.Closed || resp.Index == 0 {
		t.Fatalf("second close: %+v, %v", resp, err)
	}
	// The old session, left at format 7, can be closed now.
	if resp, err := raw.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: old}); err != nil || !resp.Closed {
		t.Fatalf("close of the session left at format 7: %+v, %v", resp, err)
	}
	var sessions int
	tc.server(leader).fsm.View(func(st *fsm.State) { sessions = st.SessionCount() })
	for _, bad := range []string{"", strings.Repeat("x", fsm.MaxClientIDBytes+1)} {
		_, err := raw.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("close of a bad %d-byte id: %v, want InvalidArgument", len(bad), err)
		}
	}
	tc.server(leader).fsm.View(func(st *fsm.State) {
		if st.SessionCount() != sessions || st.NextSeq() != next {
			t.Errorf("refused requests changed the state: sessions %d -> %d, next seq %d -> %d", sessions, st.SessionCount(), next, st.NextSeq())
		}
	})
}

// TestSessionIdleExpiryWaitsForLogFormat9: with a voter on a build that
// writes at most log format 8, no session expires by time and the idle
// timeout is not replicated, however long a session sits unused; once
// that voter is upgraded the leader raises the format to 9 and replicates
// the timeout, and every member forgets the sessions left unused past it
// (one opened before the upgrade and one after), while a session in use
// stays; an open answers the timeout. A late request of an expired
// session, marked established, is refused with SESSION_EXPIRED and
// applies nothing; the SDK clients whose sessions expired append again
// without an error, in new sessions — a Submit too, which could not be
// resent after a refusal: the SDK opens a new session once its own sat
// unused for half the timeout. The members converge to the same state.
func TestSessionIdleExpiryWaitsForLogFormat9(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		c.Journal.SessionIdleTimeout = idle
		if i == 2 {
			c.maxLogFormat = fsm.SessionCloseFormat
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	format := func() uint32 { return tc.server(tc.waitLeader()).logFormat() }
	eventually(t, 20*time.Second, "format 8", func() bool { return format() == fsm.SessionCloseFormat })
	held := func(id string) int { return membersHolding(tc, id) }
	// sessionOf appends once through c and returns the session it carried.
	sessionOf := func(c *client.Client) string {
		t.Helper()
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "e"})
		if err != nil {
			t.Fatal(err)
		}
		return sessionAt(t, ctx, c, seqs[0])
	}
	newClient := func(name string) *client.Client { return namedClient(t, ctx, tc, name) }
	busy := newClient("busy")
	// appendFor keeps busy appending (the log's entries carry the time)
	// until d has passed.
	appendFor := func(d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			sessionOf(busy)
		}
	}

	old := sessionOf(newClient("before"))
	eventually(t, 10*time.Second, "every member holds the session", func() bool { return held(old) == len(tc.cfgs) })
	appendFor(2 * idle)
	if n := held(old); n != len(tc.cfgs) {
		t.Fatalf("at format 8 a session unused for %s is held by %d members", 2*idle, n)
	}
	tc.server(tc.waitLeader()).fsm.View(func(st *fsm.State) {
		if st.JournalConfig().SessionIdleTimeoutSeconds != 0 || st.SessionClock() != 0 {
			t.Errorf("format 8: idle timeout %d s, clock %d", st.JournalConfig().SessionIdleTimeoutSeconds, st.SessionClock())
		}
	})

	tc.cfgs[2].maxLogFormat = 0
	tc.restart(2)
	eventually(t, 30*time.Second, "format 9 and the idle timeout on every member", func() bool {
		if format() < fsm.SessionIdleFormat {
			return false
		}
		n := 0
		for i := range tc.cfgs {
			tc.server(i).fsm.View(func(st *fsm.State) {
				if st.SessionIdleTimeout() == idle {
					n++
				}
			})
		}
		return n == len(tc.cfgs)
	})
	idler := newClient("idler")
	opened := sessionOf(idler)
	inUse := sessionOf(busy)
	streamer := newClient("streamer")
	// submitted submits one event through streamer and returns the
	// session it went in.
	submitted := func() string {
		t.Helper()
		seqs, err := streamer.Journal().Submit(client.Event{Type: "s"}).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return sessionAt(t, ctx, streamer, seqs[0])
	}
	streamed := submitted()
	eventually(t, 10*time.Second, "every member holds the new sessions", func() bool {
		return held(opened) == len(tc.cfgs) && held(streamed) == len(tc.cfgs)
	})
	eventually(t, 30*time.Second, "no member holds the idle sessions", func() bool {
		sessionOf(busy) // entries move the clock
		return held(old) == 0 && held(opened) == 0 && held(streamed) == 0
	})
	if n := held(inUse); n != len(tc.cfgs) {
		t.Fatalf("the session in use is held by %d members", n)
	}

	leader := tc.waitLeader()
	var next uint64
	tc.server(leader).fsm.View(func(st *fsm.State) { next = st.NextSeq() })
	raw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[leader].GRPCAddr))
	_, err := raw.Append(ctx, &pb.AppendRequest{ClientId: opened, RequestSeq: 2, AckedSeq: 1, SessionEstablished: true, Events: []*pb.Event{{Type: "late"}}})
	wantCode(t, "append of an expired session", err, codes.FailedPrecondition, pb.ReasonSessionExpired)
	tc.server(leader).fsm.View(func(st *fsm.State) {
		if st.NextSeq() != next {
			t.Errorf("the refused append applied: next seq %d -> %d", next, st.NextSeq())
		}
	})
	if again := sessionOf(idler); again == opened || !strings.HasPrefix(again, "idler") {
		t.Fatalf("after the expiry the client appended in session %q (expired: %q)", again, opened)
	}
	if again := submitted(); again == streamed || !strings.HasPrefix(again, "streamer") {
		t.Fatalf("after the expiry the client submitted in session %q (expired: %q)", again, streamed)
	}
	resp, err := raw.OpenSession(ctx, &pb.OpenSessionRequest{ClientId: "raw"})
	if err != nil || resp.IdleTimeoutSeconds != uint64(idle/time.Second) {
		t.Fatalf("open: %+v, %v; want the idle timeout, %s", resp, err, idle)
	}
	tc.waitConverged()
}

// TestSessionClockIgnoresLeadersWallClocks: at log format 10 the sessions'
// clock moves by what each leader's monotonic clock measured, not by its
// wall clock. The three members' wall clocks are an hour apart and each
// leads in turn while a client appends: a session left unused meanwhile is
// still held by every member (at format 9 the first entry of a leader an
// hour ahead would have expired it), and the applied clock moved by no
// more than the time that passed. Kept unused past the idle timeout, the
// session is then forgotten by every member — not before the timeout had
// passed since its last use. The members converge.
func TestSessionClockIgnoresLeadersWallClocks(t *testing.T) {
	t.Parallel()
	const idle = 20 * time.Second
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		c.Journal.SessionIdleTimeout = idle
		skew := time.Duration(i) * time.Hour
		c.wallClock = func() time.Time { return time.Now().Add(skew) }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	eventually(t, 30*time.Second, "the newest log format and the idle timeout on every member", func() bool {
		n := 0
		for i := range tc.cfgs {
			tc.server(i).fsm.View(func(st *fsm.State) {
				if st.LogFormat() == fsm.CommandVersion && st.SessionIdleTimeout() == idle {
					n++
				}
			})
		}
		return n == len(tc.cfgs)
	})
	newClient := func(name string) *client.Client { return namedClient(t, ctx, tc, name) }
	appendOnce := func(c *client.Client) uint64 {
		t.Helper()
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "e"})
		if err != nil {
			t.Fatal(err)
		}
		return seqs[0]
	}
	busy := newClient("busy")
	idler := newClient("idler")
	session := sessionAt(t, ctx, idler, appendOnce(idler))
	lastUse := time.Now()
	clock := func() int64 { return tc.server(tc.waitLeader()).fsm.SessionClock() }
	eventually(t, 10*time.Second, "every member holds the session", func() bool { return membersHolding(tc, session) == len(tc.cfgs) })
	before := clock()

	first := tc.waitLeader()
	for k := 1; k <= len(tc.cfgs); k++ {
		next := (first + k) % len(tc.cfgs)
		if err := tc.server(tc.waitLeader()).raft.LeadershipTransferToServer(raft.ServerID(tc.cfgs[next].ID), raft.ServerAddress(tc.cfgs[next].RaftAddr)).Error(); err != nil {
			t.Logf("transfer to %s: %v", tc.cfgs[next].ID, err)
		}
		eventually(t, 20*time.Second, "member "+tc.cfgs[next].ID+" leads", func() bool {
			if tc.waitLeader() == next {
				return true
			}
			tc.server(tc.waitLeader()).raft.LeadershipTransferToServer(raft.ServerID(tc.cfgs[next].ID), raft.ServerAddress(tc.cfgs[next].RaftAddr))
			return false
		})
		for range 5 {
			appendOnce(busy)
		}
		if since := time.Since(lastUse); since >= idle-2*time.Second {
			t.Fatalf("the leader changes took %s, too close to the idle timeout %s to tell", since, idle)
		}
		if n := membersHolding(tc, session); n != len(tc.cfgs) {
			t.Fatalf("under %s (wall clock %d h ahead), %s after its last use, the session is held by %d members", tc.cfgs[next].ID, next, time.Since(lastUse), n)
		}
	}
	if moved, passed := time.Duration(clock()-before), time.Since(lastUse); moved > passed {
		t.Fatalf("the clock moved %s in %s", moved, passed)
	}

	eventually(t, 2*idle+20*time.Second, "no member holds the idle session", func() bool {
		appendOnce(busy)
		return membersHolding(tc, session) == 0
	})
	if since := time.Since(lastUse); since < idle {
		t.Fatalf("the session expired %s after its last use, before the idle timeout %s", since, idle)
	}
	tc.waitConverged()
}

// namedClient is an SDK client of tc with client id name, closed at the
// end of the test.
func namedClient(t *testing.T, ctx context.Context, tc *testCluster, name string) *client.Client {
	t.Helper()
	c, err := client.New(ctx, client.Config{Endpoints: tc.endpoints(), AttemptTimeout: 2 * time.Second, ClientID: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// membersHolding is how many members' state machines hold session id.
func membersHolding(tc *testCluster, id string) (n int) {
	for i := range tc.cfgs {
		tc.server(i).fsm.View(func(st *fsm.State) {
			if st.HasSession(id) {
				n++
			}
		})
	}
	return n
}

// sessionAt reads back the event at seq and returns the session (client
// id) it was appended in.
func sessionAt(t *testing.T, ctx context.Context, c *client.Client, seq uint64) string {
	t.Helper()
	evs, _, err := c.Journal().Read(ctx, seq, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("read back %d: %+v, %v", seq, evs, err)
	}
	return evs[0].ClientID
}

// TestJournalConfigMismatchWarning: before log format 11 (a cluster whose
// members read up to 10), a coordinator whose journal flags differ from
// the ones the leader replicated says so in every member's Status (and its
// own /metrics gauge); when it leads, its flags replace the replicated ones
// and the others say so instead.
func TestJournalConfigMismatchWarning(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		c.maxLogFormat = fsm.LeaderClockFormat
		if i == 2 {
			c.Journal.EventsPerSegment = 512
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	expect := func(leader int, want ...string) {
		t.Helper()
		waitConfigWarnedBy(ctx, t, tc, fmt.Sprintf(" (leader %s)", tc.cfgs[leader].ID), want...)
		for i, c := range tc.cfgs {
			if w := tc.server(i).configWarning(); (w != "") != slices.Contains(want, c.ID) {
				t.Fatalf("%s's own warning %q, want one: %v", c.ID, w, slices.Contains(want, c.ID))
			}
		}
	}
	leader := tc.waitLeader()
	if leader == 2 {
		expect(leader, "c1", "c2")
	} else {
		expect(leader, "c3")
	}
	next := 2
	if leader == 2 {
		next = 0
	}
	tc.transferLeadership(leader, next)
	if next == 2 {
		expect(next, "c1", "c2")
	} else {
		expect(next, "c3")
	}
	var eps uint64
	tc.server(next).fsm.View(func(st *fsm.State) { eps = st.JournalConfig().GetEventsPerSegment() })
	if eps != tc.cfgs[next].Journal.EventsPerSegment {
		t.Fatalf("replicated events per segment %d, want the new leader's %d", eps, tc.cfgs[next].Journal.EventsPerSegment)
	}
}

// configWarnedBy is, for every member, the members its Status names as
// having journal settings that differ from the cluster's.
func configWarnedBy(ctx context.Context, tc *testCluster) (map[string][]string, error) {
	out := map[string][]string{}
	for i := range tc.cfgs {
		st, err := (&clusterService{s: tc.server(i)}).Status(ctx, &pb.StatusRequest{})
		if err != nil {
			return nil, err
		}
		for _, w := range st.Warnings {
			if id, _, ok := strings.Cut(w, ": journal settings differ"); ok {
				out[tc.cfgs[i].ID] = append(out[tc.cfgs[i].ID], id)
			}
		}
		slices.Sort(out[tc.cfgs[i].ID])
	}
	return out, nil
}

// waitConfigWarnedBy waits until every member's Status names exactly want
// (sorted) as having journal settings that differ from the cluster's.
func waitConfigWarnedBy(ctx context.Context, t *testing.T, tc *testCluster, when string, want ...string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("every member's status names %v%s", want, when), func() bool {
		got, err := configWarnedBy(ctx, tc)
		if err != nil {
			return false
		}
		for _, c := range tc.cfgs {
			if !slices.Equal(got[c.ID], want) {
				return false
			}
		}
		return true
	})
}

// TestJournalConfigHeld: from log format 11 the cluster holds its journal
// settings. The first leader seeds them from its flags, once; SetConfig
// (sent to a follower, which forwards it) changes only the fields given,
// on every member, and the automatic trim follows the held bounds; a
// leadership transfer to a member configured otherwise changes nothing,
// and that member, whose flag was given explicitly, warns in every
// member's Status that its flag is not used. Bad input (no field, a field
// out of bounds) gets InvalidArgument and changes nothing; a cluster at
// log format 10 refuses SetConfig with FailedPrecondition LOG_FORMAT.
func TestJournalConfigHeld(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		c.Journal.MaxSegments = 0
		if i == 2 {
			c.Journal.EventsPerSegment = 512
			c.Journal.Given.EventsPerSegment = true
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	configs := func() []*fsmpb.JournalConfig {
		var out []*fsmpb.JournalConfig
		for i := range tc.cfgs {
			tc.server(i).fsm.View(func(st *fsm.State) { out = append(out, proto.CloneOf(st.JournalConfig())) })
		}
		return out
	}
	allEqual := func(want *fsmpb.JournalConfig) bool {
		for _, c := range configs() {
			if !proto.Equal(c, want) {
				return false
			}
		}
		return true
	}
	leader := tc.waitLeader()
	eventually(t, 30*time.Second, "every member holds the seeded settings", func() bool {
		cs := configs()
		return cs[0].GetHeld() && allEqual(cs[0])
	})
	seeded := configs()[0]
	if eps := seeded.EventsPerSegment; eps != 1024 && eps != 512 {
		t.Fatalf("seeded events per segment %d, want a member's flag", eps)
	}
	if seeded.MaxSegments != 0 || seeded.SegmentBytes != DefaultConfig().Journal.SegmentBytes || seeded.SessionIdleTimeoutSeconds != 3600 {
		t.Fatalf("seeded %v, want the flags", seeded)
	}

	conn, err := grpc.NewClient(tc.cfgs[tc.followers(leader)[0]].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc := pb.NewJournalClient(conn)
	u := func(v uint64) *uint64 { return &v }
	for name, req := range map[string]*pb.SetJournalConfigRequest{
		"no field":                    {},
		"zero events per segment":     {EventsPerSegment: u(0)},
		"events per segment too big":  {EventsPerSegment: u(fsm.MaxEventsPerSegment + 1)},
		"zero segment bytes":          {SegmentBytes: u(0), MaxEvents: u(5)},
		"idle timeout over 30 days":   {SessionIdleTimeoutSeconds: u(31 * 24 * 3600)},
		"max segments over the bound": {MaxSegments: u(fsm.MaxTrimSegments + 1)},
	} {
		_, err := jc.SetConfig(ctx, req)
		wantCode(t, name, err, codes.InvalidArgument, "")
	}
	if !allEqual(seeded) {
		t.Fatalf("refused changes changed the settings: %v", configs())
	}

	resp, err := jc.SetConfig(ctx, &pb.SetJournalConfigRequest{EventsPerSegment: u(4), MaxSegments: u(3)})
	if err != nil {
		t.Fatal(err)
	}
	changed := proto.CloneOf(seeded)
	changed.EventsPerSegment, changed.MaxSegments = 4, 3
	if !proto.Equal(resp.Config, apiJournalConfig(changed)) || resp.LogFormat != fsm.HeldConfigFormat {
		t.Fatalf("SetConfig answered %v at format %d, want %v at %d", resp.Config, resp.LogFormat, changed, fsm.HeldConfigFormat)
	}
	eventually(t, 10*time.Second, "every member holds the change", func() bool { return allEqual(changed) })
	got, err := (&journalService{s: tc.server(tc.followers(leader)[1])}).GetConfig(ctx, &pb.GetJournalConfigRequest{})
	if err != nil || !proto.Equal(got.Config, apiJournalConfig(changed)) {
		t.Fatalf("GetConfig on a follower: %v, %v", got, err)
	}

	// The held bounds drive the automatic trim: 40 events in 4-event
	// segments, at most 3 kept once a consumer-free journal expires them.
	c := tc.client(ctx)
	for i := range 40 {
		if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "automatic trim to the held bound", func() bool {
		n := 0
		tc.server(tc.waitLeader()).fsm.View(func(st *fsm.State) { n = len(st.Segments()) })
		return n <= 3
	})

	expect := func(want ...string) {
		t.Helper()
		waitConfigWarnedBy(ctx, t, tc, "", want...)
	}
	expect("c3") // its given 512 is not the held 4, whether it leads or not

	next := 2
	if leader == 2 {
		next = 0
	}
	tc.transferLeadership(tc.waitLeader(), next)
	// Two upkeep rounds of the new leader: it would have replaced the
	// settings with its flags in the first.
	from := tc.server(next).journalUpkeeps.Load()
	eventually(t, 20*time.Second, "two upkeep rounds of the new leader", func() bool { return tc.server(next).journalUpkeeps.Load() >= from+2 })
	if !allEqual(changed) {
		t.Fatalf("after a leader change: %v, want every member at %v", configs(), changed)
	}
	expect("c3")
}

// TestJournalConfigBeforeFormat11: a cluster whose members read up to log
// format 10 refuses SetConfig with FailedPrecondition LOG_FORMAT, and its
// settings stay the leader's flags, not held.
func TestJournalConfigBeforeFormat11(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) { c.maxLogFormat = fsm.LeaderClockFormat })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := tc.waitLeader()
	eventually(t, 30*time.Second, "log format 10", func() bool { return tc.server(leader).logFormat() == fsm.LeaderClockFormat })
	u := func(v uint64) *uint64 { return &v }
	_, err := (&journalService{s: tc.server(leader)}).SetConfig(ctx, &pb.SetJournalConfigRequest{EventsPerSegment: u(4)})
	wantCode(t, "SetConfig at format 10", err, codes.FailedPrecondition, ReasonLogFormat)
	from := tc.server(leader).journalUpkeeps.Load()
	eventually(t, 20*time.Second, "two upkeep rounds", func() bool { return tc.server(leader).journalUpkeeps.Load() >= from+2 })
	tc.server(leader).fsm.View(func(st *fsm.State) {
		if c := st.JournalConfig(); c.Held || c.EventsPerSegment != tc.cfgs[leader].Journal.EventsPerSegment || c.MaxSegments != 0 {
			t.Fatalf("settings at format 10: %v", c)
		}
	})
}

// TestJournalSeedWith: a change asked for before the cluster holds its
// settings seeds the rest from the leader's flags; a field given as 0 is
// given (no trim bound), not left out.
func TestJournalSeedWith(t *testing.T) {
	t.Parallel()
	j := DefaultConfig().Journal
	u := func(v uint64) *uint64 { return &v }
	got := j.seedWith(&fsmpb.SetJournalConfigCommand{EventsPerSegment: u(7), MaxSegments: u(0)})
	want := &fsmpb.SetJournalConfigCommand{EventsPerSegment: u(7), SegmentBytes: u(j.SegmentBytes), SessionIdleTimeoutSeconds: u(3600), MaxSegments: u(0), MaxEvents: u(0)}
	if !proto.Equal(got, want) {
		t.Fatalf("seedWith: %v, want %v", got, want)
	}
	if j.MaxSegments == 0 {
		t.Fatal("the default max segments is 0: the test shows nothing")
	}
}

// TestJournalRetentionQuota: once the sealed segments reach the retention
// quota (Journal.MaxRetainedBytes) the leader refuses new appends with
// ResourceExhausted JOURNAL_FULL naming the consumer that holds trim back,
// from its own clients and forwarded from a follower's, and applies none
// of them; a retry of an applied request still gets its result. Status
// and Positions warn. Once the consumer acks and trim brings the journal
// under the quota (the automatic trim goes below its two-segment history
// bound if need be), appends are taken again.
func TestJournalRetentionQuota(t *testing.T) {
	t.Parallel()
	const quota = 2048
	tc := newTestCluster(t, 3, smallSegments(8, 2), func(i int, c *Config) { c.Journal.MaxRetainedBytes = quota })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitJournalConfig(t, tc, 8)
	c := tc.client(ctx)
	j := c.Journal()
	if _, err := j.Consumers().Register(ctx, "slow", 1); err != nil {
		t.Fatal(err)
	}
	leader := tc.waitLeader()
	ls := tc.server(leader)
	eventually(t, 10*time.Second, "the log format raised", func() bool {
		var f uint32
		ls.fsm.View(func(st *fsm.State) { f = st.LogFormat() })
		return f == fsm.CommandVersion
	})
	raw := pb.NewJournalClient(dataNodeConn(t, tc.cfgs[tc.followers(leader)[0]].GRPCAddr))
	opened, err := raw.OpenSession(ctx, &pb.OpenSessionRequest{ClientId: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	kept := &pb.AppendRequest{ClientId: opened.SessionId, RequestSeq: 1, SessionEstablished: true, Events: []*pb.Event{{Type: "kept"}}}
	first, err := raw.Append(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	// 100-byte payloads count 1 + 100 + 32 bytes each: two sealed segments
	// of eight reach the quota.
	payload := make([]byte, 100)
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		_, full = j.Append(ctx, client.Event{Type: "t", Payload: payload})
	}
	if !errors.Is(full, client.ErrJournalFull) || !errors.Is(full, client.ErrTooLarge) || !strings.Contains(full.Error(), `consumer "slow" acked seq 0`) {
		t.Fatalf("appends past the quota: %v", full)
	}
	var next uint64
	ls.fsm.View(func(st *fsm.State) {
		next = st.NextSeq()
		if st.SealedBytes() < quota {
			t.Fatalf("refused at %d bytes sealed, under the quota", st.SealedBytes())
		}
	})
	_, err = raw.Append(ctx, &pb.AppendRequest{ClientId: opened.SessionId, RequestSeq: 2, SessionEstablished: true, Events: []*pb.Event{{Type: "refused"}}})
	wantCode(t, "an append forwarded by a follower past the quota", err, codes.ResourceExhausted, pb.ReasonJournalFull)
	again, err := raw.Append(ctx, kept)
	if err != nil || again.FirstSeq != first.FirstSeq {
		t.Fatalf("a retry of an applied request past the quota: %+v, %v (first answer %+v)", again, err, first)
	}
	ls.fsm.View(func(st *fsm.State) {
		if st.NextSeq() != next {
			t.Fatalf("refused appends were applied: next seq %d, was %d", st.NextSeq(), next)
		}
	})
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.HasPrefix(w, "journal full: ") }) {
		t.Fatalf("status warnings past the quota: %q", st.Warnings)
	}
	if p, err := j.Positions(ctx); err != nil || !strings.Contains(p.Warning, "journal full: ") {
		t.Fatalf("positions past the quota: %+v, %v", p, err)
	}

	// The consumer catches up; automatic trim (two segments) follows.
	if _, err := j.Consumers().Ack(ctx, "slow", next-1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "appends taken again after trim", func() bool {
		_, err := j.Append(ctx, client.Event{Type: "t", Payload: payload})
		if err != nil && !errors.Is(err, client.ErrJournalFull) {
			t.Fatalf("append while trim catches up: %v", err)
		}
		return err == nil
	})
	ls.fsm.View(func(st *fsm.State) {
		if w := ls.quotaWarning(st); w != "" || st.FirstSeq() == 1 || st.SealedBytes() >= quota {
			t.Fatalf("after trim: warning %q, trimmed pos %d, %d bytes sealed", w, st.FirstSeq(), st.SealedBytes())
		}
	})
}
