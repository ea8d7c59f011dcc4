package coordserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
