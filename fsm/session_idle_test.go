package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// timedEntry encodes a command of type typ in log format version,
// proposed at the given time.
func timedEntry(t testing.TB, version uint32, at time.Time, typ pb.CommandType, m proto.Message) func(index uint64) *raft.Log {
	return func(index uint64) *raft.Log {
		t.Helper()
		data, err := EncodeCommandVersion(version, typ, m, at.UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
	}
}

// TestSessionIdleExpiry: before log format 9 no session expires by time,
// whatever the entries' times, and the idle timeout of a CONFIGURE_JOURNAL
// is ignored (as a build before 9 ignores it); the SET_FORMAT to 9 starts
// the clock at its proposal time and marks every session used then; from
// then on a session unused for longer than the timeout, by the clock, is
// forgotten with its results when the next entry applies, least recently
// used first; a request of it marked established is refused and applies
// nothing; an entry proposed earlier (a new leader behind) does not move
// the clock back; a timeout of 0 stops expiry by time; a timeout over the
// bound is refused and changes nothing.
func TestSessionIdleExpiry(t *testing.T) {
	s := NewState()
	s.logFormat = SessionCloseFormat
	idx := uint64(0)
	t0 := time.Unix(1_000_000, 0)
	apply := func(version uint32, at time.Duration, typ pb.CommandType, m proto.Message) any {
		t.Helper()
		return applyNext(t, s, &idx, timedEntry(t, version, t0.Add(at), typ, m))
	}
	open := func(at time.Duration, client string) string {
		t.Helper()
		r := apply(SessionCloseFormat, at, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: client}).(OpenSessionResult)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.SessionID
	}
	seqs := map[string]uint64{}
	appendIn := func(version uint32, at time.Duration, id string) Result {
		t.Helper()
		seqs[id]++
		o := op(id, seqs[id], seqs[id]-1, "e")
		o.SessionEstablished = seqs[id] > 1
		return apply(version, at, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{o}}).([]Result)[0]
	}
	configure := func(version uint32, at time.Duration, idle uint64) error {
		t.Helper()
		r := apply(version, at, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: DefaultEventsPerSegment, SegmentBytes: DefaultSegmentBytes, SessionIdleTimeoutSeconds: idle})
		err, _ := r.(error)
		return err
	}
	member := func(version uint32, at time.Duration) { // an entry of no session
		t.Helper()
		apply(version, at, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{Member: &pb.Member{Id: "m", RaftAddr: "r", GrpcAddr: "g"}})
	}

	a, b, c := open(0, "a"), open(time.Second, "b"), open(2*time.Second, "c")
	for _, id := range []string{a, b, c} {
		if r := appendIn(SessionCloseFormat, 3*time.Second, id); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := configure(SessionCloseFormat, 4*time.Second, 60); err != nil {
		t.Fatal(err)
	}
	member(SessionCloseFormat, 1000*time.Hour)
	if s.SessionCount() != 3 || s.SessionIdleTimeout() != 0 || s.SessionClock() != 0 {
		t.Fatalf("format 8: %d sessions, idle timeout %s, clock %d", s.SessionCount(), s.SessionIdleTimeout(), s.SessionClock())
	}
	for _, sess := range s.sessions {
		if sess.lastUsed != 0 {
			t.Fatalf("format 8: %s last used at %d", sess.id, sess.lastUsed)
		}
	}

	// The SET_FORMAT to 9, then the timeout again (format 9 entries).
	start := 1001 * time.Hour
	apply(SessionCloseFormat, start, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat})
	if s.SessionClock() != t0.Add(start).UnixNano() {
		t.Fatalf("clock %d after the SET_FORMAT, want its proposal time", s.SessionClock())
	}
	for _, sess := range s.sessions {
		if sess.lastUsed != s.SessionClock() {
			t.Fatalf("%s last used at %d, want the SET_FORMAT's time", sess.id, sess.lastUsed)
		}
	}
	for _, bad := range []uint64{uint64(MaxSessionIdleTimeout/time.Second) + 1, 1 << 62} {
		before := s.digest(false)
		if err := configure(SessionIdleFormat, start, bad); !errors.Is(err, ErrInvalidJournalConfig) {
			t.Fatalf("idle timeout %d s: %v", bad, err)
		}
		if s.digest(false) != before {
			t.Fatal("a refused config changed the state")
		}
	}
	if err := configure(SessionIdleFormat, start+time.Second, 60); err != nil || s.SessionIdleTimeout() != time.Minute {
		t.Fatalf("configure: %v, idle timeout %s", err, s.SessionIdleTimeout())
	}
	if r := appendIn(SessionIdleFormat, start+30*time.Second, b); r.Err != nil {
		t.Fatal(r.Err)
	}
	member(SessionIdleFormat, start+60*time.Second) // a and c: exactly 60 s, kept
	if s.SessionCount() != 3 {
		t.Fatalf("at the timeout: %d sessions", s.SessionCount())
	}
	member(SessionIdleFormat, start+61*time.Second)
	if s.SessionCount() != 1 || s.sessions[b] == nil || s.KeptResults() != 1 {
		t.Fatalf("past the timeout: %d sessions (b held: %v), %d results", s.SessionCount(), s.sessions[b] != nil, s.KeptResults())
	}
	checkSessions(t, &s.sessionTable)

	// A new leader whose clock is behind: the clock stays.
	clock := s.SessionClock()
	member(SessionIdleFormat, start)
	if s.SessionClock() != clock {
		t.Fatalf("clock moved back: %d -> %d", clock, s.SessionClock())
	}
	// An expired session's next request: refused, nothing applied. So is
	// b's once it too is idle past the timeout, the request's own entry
	// proposed after it.
	next := s.NextSeq()
	if r := appendIn(SessionIdleFormat, start+62*time.Second, a); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("request of an expired session: %+v", r)
	}
	if r := appendIn(SessionIdleFormat, start+91*time.Second, b); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("request of a session idle for 61 s: %+v", r)
	}
	if s.NextSeq() != next || s.SessionCount() != 0 || s.KeptResults() != 0 {
		t.Fatalf("refused requests applied: next %d -> %d, %d sessions, %d results", next, s.NextSeq(), s.SessionCount(), s.KeptResults())
	}

	// Timeout 0: the clock goes on, nothing expires by it.
	d := open(start+100*time.Second, "d")
	if err := configure(SessionIdleFormat, start+100*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	member(SessionIdleFormat, start+1000*time.Hour)
	if s.sessions[d] == nil || s.SessionClock() != t0.Add(start+1000*time.Hour).UnixNano() {
		t.Fatalf("timeout 0: session held %v, clock %d", s.sessions[d] != nil, s.SessionClock())
	}
	checkSessions(t, &s.sessionTable)
}

// TestSessionIdleSnapshot: a format-9 state's clock, the sessions' last
// uses and the idle timeout survive a snapshot (the restored state
// expires the same sessions at the same entries as the original) and are
// in its digest; a snapshot whose sessions' last uses are out of order,
// past the clock, or present before log format 9 is refused as corrupt,
// and one of a log format this build does not read as too new.
func TestSessionIdleSnapshot(t *testing.T) {
	f := New(nil)
	idx := uint64(0)
	t0 := time.Unix(2_000_000, 0)
	var logs []*raft.Log
	add := func(at time.Duration, typ pb.CommandType, m proto.Message) {
		idx++
		l := timedEntry(t, SessionIdleFormat, t0.Add(at), typ, m)(idx)
		logs = append(logs, l)
		f.Apply(l)
	}
	add(0, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat})
	add(0, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: 8, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 10})
	for i, c := range []string{"a", "b", "c"} {
		add(time.Duration(i)*time.Second, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: c})
	}
	data := snapshotBytes(t, f)
	g := New(nil)
	if err := g.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	var hf, hg [32]byte
	f.View(func(s *State) { hf = s.Hash() })
	g.View(func(s *State) {
		hg = s.Hash()
		if s.SessionIdleTimeout() != 10*time.Second || s.SessionClock() != t0.Add(2*time.Second).UnixNano() || s.SessionCount() != 3 {
			t.Fatalf("restored: idle %s, clock %d, %d sessions", s.SessionIdleTimeout(), s.SessionClock(), s.SessionCount())
		}
		checkSessions(t, &s.sessionTable)
	})
	if hf != hg {
		t.Fatal("the restored state differs")
	}
	// 11.5 s: a (used at 0 s) and b (1 s) expire on both, c (2 s) stays.
	tail := timedEntry(t, SessionIdleFormat, t0.Add(11500*time.Millisecond), pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{Member: &pb.Member{Id: "m", RaftAddr: "r", GrpcAddr: "g"}})(idx + 1)
	f.Apply(tail)
	g.Apply(tail)
	f.View(func(s *State) { hf = s.Hash(); _ = s.SessionCount() })
	g.View(func(s *State) {
		hg = s.Hash()
		if s.SessionCount() != 1 {
			t.Fatalf("restored state after 11.5 s: %d sessions", s.SessionCount())
		}
	})
	if hf != hg {
		t.Fatal("the restored state expired differently")
	}

	// The digest covers the last uses and the clock.
	var base [32]byte
	g.View(func(s *State) {
		base = s.digest(false)
		for _, sess := range s.sessions {
			sess.lastUsed--
		}
		if s.digest(false) == base {
			t.Error("a session's last use is not in the digest")
		}
		for _, sess := range s.sessions {
			sess.lastUsed++
		}
		s.clock++
		if s.digest(false) == base {
			t.Error("the clock is not in the digest")
		}
		s.clock--
	})

	// Bad snapshots.
	corrupt := func(name string, mutate func(*State), want error) {
		t.Helper()
		st, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		mutate(st)
		var buf bytes.Buffer
		if err := captureSnapshot(st).write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	corrupt("last uses out of order", func(s *State) { s.lru.Front().Value.(*session).lastUsed = s.clock }, ErrSnapshotCorrupt)
	corrupt("a last use past the clock", func(s *State) { s.lru.Back().Value.(*session).lastUsed = s.clock + 1 }, ErrSnapshotCorrupt)
	corrupt("a clock before format 9", func(s *State) {
		s.logFormat = SessionCloseFormat
		s.config.SessionIdleTimeoutSeconds = 0
		for e := s.lru.Front(); e != nil; e = e.Next() {
			e.Value.(*session).lastUsed = 0
		}
	}, ErrSnapshotCorrupt)
	corrupt("an idle timeout before format 9", func(s *State) {
		s.logFormat, s.clock = SessionCloseFormat, 0
		for e := s.lru.Front(); e != nil; e = e.Next() {
			e.Value.(*session).lastUsed = 0
		}
	}, ErrSnapshotCorrupt)
	corrupt("a newer log format", func(s *State) { s.logFormat = CommandVersion + 1 }, ErrSnapshotVersion)
}

// TestRestoreFormat5Fixture reads a snapshot written by the build before
// idle expiry (log format 8, snapshot format 5, no clock, no last uses):
// it restores to the state that produced it and is rewritten unchanged;
// then a SET_FORMAT to 9, an idle timeout, one session used, and an entry
// past the timeout expire the same sessions on the restored state and on
// one that replayed the whole history — the same state, digest for digest.
func TestRestoreFormat5Fixture(t *testing.T) {
	logs := format5FixtureLogs(t)
	old := restoreFixture(t, 5, logs, func(s *State) {
		if s.AppliedIndex() != 683 || s.LogFormat() != SessionCloseFormat || s.SessionCount() != 9 || s.SessionClock() != 0 || s.SessionIdleTimeout() != 0 {
			t.Fatalf("fixture restored wrong: applied %d, format %d, %d sessions, clock %d, idle %s", s.AppliedIndex(), s.LogFormat(), s.SessionCount(), s.SessionClock(), s.SessionIdleTimeout())
		}
		checkSessions(t, &s.sessionTable)
	})
	ref := New(nil)
	ref.ApplyBatch(logs)
	at := time.Unix(5_000_000, 0)
	idx := uint64(len(logs))
	var used string
	ref.View(func(s *State) {
		for id := range s.sessions {
			if len(id) > len("fixture-a@") && id[:len("fixture-a@")] == "fixture-a@" {
				used = id
			}
		}
	})
	if used == "" {
		t.Fatal("fixture-a's session is not in the fixture")
	}
	o := op(used, 3, 2, "after")
	o.SessionEstablished = true
	for _, e := range []struct {
		after time.Duration
		typ   pb.CommandType
		m     proto.Message
	}{
		{0, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat}},
		{time.Second, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: DefaultEventsPerSegment, SegmentBytes: DefaultSegmentBytes, SessionIdleTimeoutSeconds: 10}},
		{5 * time.Second, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{o}}},
		{11 * time.Second, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{Member: &pb.Member{Id: "m", RaftAddr: "r", GrpcAddr: "g"}}},
	} {
		idx++
		l := timedEntry(t, SessionIdleFormat, at.Add(e.after), e.typ, e.m)(idx)
		old.Apply(l)
		ref.Apply(l)
	}
	var ho, hr [32]byte
	old.View(func(s *State) {
		ho = s.Hash()
		if s.SessionCount() != 1 || s.sessions[used] == nil {
			t.Fatalf("after the upgrade and 11 s: %d sessions, %s held: %v", s.SessionCount(), used, s.sessions[used] != nil)
		}
	})
	ref.View(func(s *State) { hr = s.Hash() })
	if ho != hr {
		t.Fatal("the restored fixture and the replayed history disagree after the upgrade")
	}
}

// TestLeaderClockFormat: under log format 9 the clock follows the entries'
// proposal times, so one entry of a leader whose wall clock runs an hour
// ahead expires every session at once; from the SET_FORMAT to 10 on it
// follows the entries' session clocks (Command.session_clock_unix_nanos),
// and a proposal time hours ahead moves nothing, while sessions unused for
// longer than the timeout by the session clocks still expire; a session
// clock behind, or 0, does not move the clock back; below format 10 an
// entry carries no session clock.
func TestLeaderClockFormat(t *testing.T) {
	s := NewState()
	s.logFormat = SessionCloseFormat
	idx := uint64(0)
	t0 := time.Unix(1_000_000, 0)
	apply := func(version uint32, proposed, clock time.Duration, typ pb.CommandType, m proto.Message) any {
		t.Helper()
		return applyNext(t, s, &idx, func(index uint64) *raft.Log {
			data, err := EncodeCommandAt(version, typ, m, t0.Add(proposed).UnixNano(), t0.Add(clock).UnixNano())
			if err != nil {
				t.Fatal(err)
			}
			return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
		})
	}
	open := func(version uint32, proposed, clock time.Duration, client string) string {
		t.Helper()
		r := apply(version, proposed, clock, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: client}).(OpenSessionResult)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.SessionID
	}
	member := func(version uint32, proposed, clock time.Duration) {
		t.Helper()
		apply(version, proposed, clock, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{Member: &pb.Member{Id: "m", RaftAddr: "r", GrpcAddr: "g"}})
	}
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }

	apply(SessionCloseFormat, 0, 0, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat})
	apply(SessionIdleFormat, 0, 0, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: DefaultEventsPerSegment, SegmentBytes: DefaultSegmentBytes, SessionIdleTimeoutSeconds: 60})
	open(SessionIdleFormat, time.Second, time.Second, "a")
	open(SessionIdleFormat, time.Second, time.Second, "b")
	// Format 9: the proposal time an hour ahead is the clock.
	member(SessionIdleFormat, time.Hour, 2*time.Second)
	if s.SessionCount() != 0 || s.SessionClock() != at(time.Hour) {
		t.Fatalf("format 9, a proposal an hour ahead: %d sessions, clock %d (want %d)", s.SessionCount(), s.SessionClock(), at(time.Hour))
	}

	// The SET_FORMAT to 10; from here the session clocks count.
	base := time.Hour
	c := open(SessionIdleFormat, base, base, "c")
	d := open(SessionIdleFormat, base, base, "d")
	apply(SessionIdleFormat, base+time.Second, base+time.Second, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: LeaderClockFormat})
	member(LeaderClockFormat, 3*time.Hour, base+10*time.Second)
	if s.SessionCount() != 2 || s.SessionClock() != at(base+10*time.Second) {
		t.Fatalf("format 10, a proposal two hours ahead: %d sessions, clock %d (want %d)", s.SessionCount(), s.SessionClock(), at(base+10*time.Second))
	}
	o := op(c, 1, 0, "e")
	o.SessionEstablished = true
	if r := apply(LeaderClockFormat, 3*time.Hour, base+30*time.Second, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{o}}).([]Result)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	member(LeaderClockFormat, 0, base+61*time.Second) // d: 61 s unused by the session clocks
	if s.SessionCount() != 1 || s.sessions[c] == nil || s.sessions[d] != nil {
		t.Fatalf("past the timeout by the session clocks: %d sessions (c held: %v, d held: %v)", s.SessionCount(), s.sessions[c] != nil, s.sessions[d] != nil)
	}
	clock := s.SessionClock()
	member(LeaderClockFormat, 4*time.Hour, 0)
	applyNext(t, s, &idx, func(index uint64) *raft.Log {
		data, err := EncodeCommandAt(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{Member: &pb.Member{Id: "m", RaftAddr: "r", GrpcAddr: "g"}}, at(5*time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
	})
	if s.SessionClock() != clock || s.SessionCount() != 1 {
		t.Fatalf("a session clock behind, then 0: clock %d -> %d, %d sessions", clock, s.SessionClock(), s.SessionCount())
	}
	checkSessions(t, &s.sessionTable)

	// Below format 10 the session clock is not written.
	data, err := EncodeCommandAt(SessionIdleFormat, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if cmd, err := DecodeCommand(data); err != nil || cmd.SessionClockUnixNanos != 0 || cmd.ProposedUnixNanos != 1 {
		t.Fatalf("format 9 envelope: %+v, %v", cmd, err)
	}
	if env, err := decodeEnvelope(data); err != nil || env.clock != 0 {
		t.Fatalf("format 9 envelope: %+v, %v", env, err)
	}
	data, _ = EncodeCommandAt(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{}, 1, 2)
	if env, err := decodeEnvelope(data); err != nil || env.clock != 2 || env.nanos != 1 {
		t.Fatalf("format 10 envelope: %+v, %v", env, err)
	}
}
