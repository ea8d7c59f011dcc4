package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// fillSessions gives n sessions (h0..h<n-1>, least recently used first)
// MaxResultsPerSession unacked results each, straight into the table.
func fillSessions(s *State, n int, index *uint64) {
	for i := range n {
		*index++
		sess := s.session(fmt.Sprintf("h%d", i), *index)
		for seq := uint64(1); seq <= MaxResultsPerSession; seq++ {
			s.keep(sess, keptResult{requestSeq: seq, firstSeq: seq, count: 1}, 0, s.LogFormat())
		}
	}
}

// roundTrip writes a snapshot of s and reads it back: the restored state
// and the snapshot's bytes.
func roundTrip(t *testing.T, s *State) (*State, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := captureSnapshot(s).write(&buf); err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(buf.Bytes())
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return r, data
}

// applyNext applies the entry l builds at the next index to s.
func applyNext(t *testing.T, s *State, idx *uint64, l func(index uint64) *raft.Log) any {
	t.Helper()
	*idx++
	cmd, err := DecodeCommand(l(*idx).Data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Apply(*idx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKeptResultsBounded: under log format 4 the sessions keep what they
// kept before (no total bound, no dropped_through: replay of old entries
// must not change); from the SET_FORMAT to 5 on, all sessions together
// keep at most MaxKeptResults, the least recently used session holding
// results loses its oldest first, and a retry of a result dropped that way
// is refused although its session is not full — by appends and namespace
// ops alike — while a kept one is still answered.
func TestKeptResultsBounded(t *testing.T) {
	s := NewState()
	s.logFormat = CacheFormat
	idx := uint64(0)
	fillSessions(s, MaxKeptResults/MaxResultsPerSession, &idx)
	apply := func(l func(index uint64) *raft.Log) any { t.Helper(); return applyNext(t, s, &idx, l) }
	appendOp := func(o *pb.AppendOp) Result {
		t.Helper()
		return apply(func(i uint64) *raft.Log { return appendEntry(t, i, o) }).([]Result)[0]
	}
	if r := appendOp(op("late", 1, 0, "e")); r.Err != nil || s.keptResults != MaxKeptResults+1 {
		t.Fatalf("format 4: %+v, %d kept", r, s.keptResults)
	}
	checkSessions(t, &s.sessionTable)

	apply(func(i uint64) *raft.Log {
		return cmdEntry(t, i, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionFloorFormat})
	})
	if r := appendOp(op("late", 2, 0, "e")); r.Err != nil {
		t.Fatal(r.Err)
	}
	h0 := s.sessions["h0"]
	if s.keptResults != MaxKeptResults || len(h0.kept) != MaxResultsPerSession-2 || h0.droppedThrough != 2 {
		t.Fatalf("format 5: %d kept in all, h0 keeps %d, dropped through %d", s.keptResults, len(h0.kept), h0.droppedThrough)
	}
	checkSessions(t, &s.sessionTable)
	for seq := uint64(1); seq <= 2; seq++ {
		if r := appendOp(op("h0", seq, 0, "e")); !errors.Is(r.Err, ErrSessionResultExpired) {
			t.Fatalf("retry of dropped request %d: %+v", seq, r)
		}
		nr := apply(func(i uint64) *raft.Log {
			return nsEntry(t, i, 1, &pb.NamespaceCommand{ClientId: "h0", RequestSeq: seq, Op: opCreate("/x", "w", false)})
		}).(NamespaceResult)
		if !errors.Is(nr.Err, ErrSessionResultExpired) {
			t.Fatalf("namespace retry of dropped request %d: %+v", seq, nr)
		}
	}
	if r := appendOp(op("h0", 3, 0, "e")); !r.Duplicate || r.FirstSeq != 3 {
		t.Fatalf("retry of a kept request: %+v", r)
	}

	// Random clients, seqs and acks: the bound and the table's order hold
	// throughout, and a state restored from a snapshot taken here drops
	// the same results as the one that wrote it (holders rebuilt in the
	// same order).
	restored, _ := roundTrip(t, s)
	rng := rand.New(rand.NewSource(5))
	next := map[string]uint64{}
	for i := range 3000 {
		id := fmt.Sprintf("h%d", rng.Intn(300))
		if next[id] == 0 {
			next[id] = MaxResultsPerSession + 1
		}
		var acked uint64
		if rng.Intn(10) == 0 {
			acked = next[id] - uint64(rng.Intn(200))
		}
		if sess, ok := s.sessions[id]; ok {
			acked = max(acked, sess.ackedSeq)
		}
		o := op(id, next[id], acked, "e")
		want := appendOp(o)
		cmd, err := DecodeCommand(appendEntry(t, idx, o).Data)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := restored.Apply(idx, cmd); err != nil || got.([]Result)[0] != want {
			t.Fatalf("step %d: restored state answers %+v, %v; want %+v", i, got, err, want)
		}
		next[id]++
		if s.keptResults > MaxKeptResults {
			t.Fatalf("step %d: %d results kept", i, s.keptResults)
		}
		if i%500 == 0 {
			checkSessions(t, &s.sessionTable)
		}
	}
	checkSessions(t, &s.sessionTable)
	checkSessions(t, &restored.sessionTable)
	if restored.Hash() != s.Hash() {
		t.Fatal("the state restored midway diverged")
	}

	// The snapshot keeps dropped_through; the restored state is the same.
	r, data := roundTrip(t, s)
	if v := binary.BigEndian.Uint32(data[8:12]); v != aclSnapshotFormat-1 {
		t.Fatalf("snapshot format %d", v)
	}
	checkSessions(t, &r.sessionTable)
	if r.Hash() != s.Hash() || r.sessions["h0"].droppedThrough != s.sessions["h0"].droppedThrough || r.keptResults != s.keptResults {
		t.Fatal("restored sessions differ")
	}
}

// TestSessionEvictionKeepsCount: a session evicted over MaxSessions takes
// its results out of the total and out of the holders.
func TestSessionEvictionKeepsCount(t *testing.T) {
	s := NewState()
	for i := range MaxSessions + 10 {
		sess := s.session(fmt.Sprintf("c%d", i), uint64(i+1))
		s.keep(sess, keptResult{requestSeq: 1, firstSeq: uint64(i + 1), count: 1}, 0, SessionFloorFormat)
		s.keep(sess, keptResult{requestSeq: 2, firstSeq: uint64(i + 1), count: 1}, 0, SessionFloorFormat)
	}
	if s.keptResults != 2*MaxSessions || s.holders.Len() != MaxSessions {
		t.Fatalf("%d results in %d holders", s.keptResults, s.holders.Len())
	}
	checkSessions(t, &s.sessionTable)
}

// TestRestoreFormat4Fixture reads a snapshot written by format 4 (the
// build before the sessions' dropped_through): it restores to the state
// that produced it, with no dropped_through anywhere, is rewritten as the
// current format; after a SET_FORMAT to 5 the session that never acked
// still refuses retries of the results it dropped before, and records
// those it drops from then on.
func TestRestoreFormat4Fixture(t *testing.T) {
	old := restoreFixture(t, 4, format4FixtureLogs(t), func(s *State) {
		if s.AppliedIndex() != 672 || s.LogFormat() != 4 || len(s.CacheDirectives()) != 3 || s.EventCount() != 5 || s.NextSeq() != 4769 {
			t.Fatalf("fixture restored wrong: applied %d format %d, %d directives, %d events, next %d", s.AppliedIndex(), s.LogFormat(), len(s.CacheDirectives()), s.EventCount(), s.NextSeq())
		}
		sess := s.sessions["fixture-noack"]
		if sess == nil || len(sess.kept) != MaxResultsPerSession || sess.minResultSeq() != 5 {
			t.Fatal("fixture's session that never acks restored wrong")
		}
		for _, sess := range s.sessions {
			if sess.droppedThrough != 0 {
				t.Fatalf("%s: dropped through %d in a format-4 state", sess.id, sess.droppedThrough)
			}
		}
		checkSessions(t, &s.sessionTable)
	})
	apply := func(l *raft.Log) any {
		t.Helper()
		return old.Apply(l)
	}
	apply(cmdEntry(t, 673, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionFloorFormat}))
	if r := apply(appendEntry(t, 674, op("fixture-noack", 4, 0, "again"))).([]Result)[0]; !errors.Is(r.Err, ErrSessionResultExpired) {
		t.Fatalf("retry of a result dropped under format 4: %+v", r)
	}
	if r := apply(appendEntry(t, 675, op("fixture-noack", MaxResultsPerSession+5, 0, "new"))).([]Result)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	old.View(func(s *State) {
		if sess := s.sessions["fixture-noack"]; sess.droppedThrough != 5 || sess.minResultSeq() != 6 {
			t.Fatalf("after the upgrade: dropped through %d, oldest kept %d", sess.droppedThrough, sess.minResultSeq())
		}
	})
}

// BenchmarkKeptResultMemory: the worst case of the sessions' memory under
// log format 5 — 300 clients that never ack, each sending 4,096 requests
// round robin, so all sessions together hold MaxKeptResults results: heap
// bytes per kept result and in all.
func BenchmarkKeptResultMemory(b *testing.B) {
	const clients = 300
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := NewState()
		s.logFormat = SessionFloorFormat
		idx := uint64(0)
		for seq := uint64(1); seq <= MaxResultsPerSession; seq++ {
			for c := range clients {
				idx++
				sess := s.session(fmt.Sprintf("client-%03d", c), idx)
				s.keep(sess, keptResult{requestSeq: seq, firstSeq: idx, count: 1}, 0, s.LogFormat())
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.keptResults != MaxKeptResults {
			b.Fatalf("%d results kept", s.keptResults)
		}
		heap := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(heap/float64(s.keptResults), "heap-bytes/result")
		b.ReportMetric(heap/(1<<20), "heap-MiB")
		runtime.KeepAlive(s)
	}
}

// TestSessionExpiry: from log format 6 on, a request saying its client had
// an answer in the session (session_established) is refused with
// ErrSessionExpired when the state machine no longer holds the session —
// evicted over MaxSessions, or dropped by a forced import — and changes
// nothing; before format 6 it starts a new session as it always did. A
// request of a held session, or one not marked established, is unaffected.
func TestSessionExpiry(t *testing.T) {
	s := NewState()
	s.logFormat = SessionFloorFormat
	idx := uint64(0)
	apply := func(l func(index uint64) *raft.Log) any { t.Helper(); return applyNext(t, s, &idx, l) }
	established := func(client string, seq uint64) *pb.AppendOp {
		o := op(client, seq, seq-1, "e")
		o.SessionEstablished = true
		return o
	}
	appendOp := func(o *pb.AppendOp) Result {
		t.Helper()
		return apply(func(i uint64) *raft.Log { return appendEntry(t, i, o) }).([]Result)[0]
	}
	if r := appendOp(established("old-rules", 5)); r.Err != nil || s.sessions["old-rules"] == nil {
		t.Fatalf("format 5: %+v", r)
	}
	apply(func(i uint64) *raft.Log {
		return cmdEntry(t, i, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionExpiryFormat})
	})
	if r := appendOp(op("c0", 1, 0, "e")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := appendOp(established("c0", 2)); r.Err != nil || r.Duplicate {
		t.Fatalf("a held session: %+v", r)
	}
	// Evict c0: MaxSessions newer sessions.
	for i := range MaxSessions {
		s.session(fmt.Sprintf("n%d", i), idx)
	}
	if _, ok := s.sessions["c0"]; ok {
		t.Fatal("c0 not evicted")
	}
	next, sessions := s.NextSeq(), s.SessionCount()
	if r := appendOp(established("c0", 2)); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("retry after the eviction: %+v", r)
	}
	nr := apply(func(i uint64) *raft.Log {
		return nsEntry(t, i, 1, &pb.NamespaceCommand{ClientId: "c0", RequestSeq: 3, AckedSeq: 2, SessionEstablished: true, Op: opCreate("/f", "w", false)})
	}).(NamespaceResult)
	if !errors.Is(nr.Err, ErrSessionExpired) {
		t.Fatalf("namespace op after the eviction: %+v", nr)
	}
	if s.NextSeq() != next || s.SessionCount() != sessions || s.FileCount() != 0 {
		t.Fatal("a refused request changed the state")
	}
	// Not marked established: a new session, as before format 6.
	if r := appendOp(op("c0", 4, 3, "e")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := appendOp(established("c0", 5)); r.Err != nil {
		t.Fatalf("the new session: %+v", r)
	}
	// A forced import replaces every session.
	apply(func(i uint64) *raft.Log {
		return cmdEntry(t, i, pb.CommandType_COMMAND_TYPE_IMPORT, &pb.ImportCommand{FirstChunk: true, Force: true, Events: []*pb.StoredEvent{{Seq: 1, Type: "t"}}})
	})
	if r := appendOp(established("c0", 6)); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("after a forced import: %+v", r)
	}
}

func openEntry(t *testing.T, version uint32, client string) func(index uint64) *raft.Log {
	return commandEntry(t, version, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: client})
}

// commandEntry encodes a command of type typ in log format version.
func commandEntry(t *testing.T, version uint32, typ pb.CommandType, m proto.Message) func(index uint64) *raft.Log {
	return func(index uint64) *raft.Log {
		t.Helper()
		data, err := EncodeCommandVersion(version, typ, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
	}
}

func closeEntry(t *testing.T, version uint32, id string) func(index uint64) *raft.Log {
	return commandEntry(t, version, pb.CommandType_COMMAND_TYPE_CLOSE_SESSION, &pb.CloseSessionCommand{SessionId: id})
}

// TestCloseSession: CLOSE_SESSION (log format 8) forgets the session and
// the results it kept (the total the bound counts included), and its later
// requests, marked established, are refused and apply nothing — a retry
// of one it had answered included. Closing it again, or a session never
// held, answers Closed=false and changes nothing; a close in an older
// entry, or naming a bad id, changes nothing. Other sessions are left as
// they were, and the state after a close survives a snapshot.
func TestCloseSession(t *testing.T) {
	s := NewState()
	s.logFormat = SessionCloseFormat
	idx := uint64(0)
	apply := func(l func(index uint64) *raft.Log) any { t.Helper(); return applyNext(t, s, &idx, l) }
	closeS := func(version uint32, id string) CloseSessionResult {
		t.Helper()
		return apply(closeEntry(t, version, id)).(CloseSessionResult)
	}
	appendOp := func(client string, seq uint64) Result {
		t.Helper()
		o := op(client, seq, 0, "e")
		o.SessionEstablished = true
		return apply(func(i uint64) *raft.Log { return appendEntry(t, i, o) }).([]Result)[0]
	}
	a := apply(openEntry(t, SessionOpenFormat, "a")).(OpenSessionResult)
	b := apply(openEntry(t, SessionOpenFormat, "b")).(OpenSessionResult)
	for seq := uint64(1); seq <= 3; seq++ {
		if r := appendOp(a.SessionID, seq); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := appendOp(b.SessionID, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	if s.SessionCount() != 2 || s.KeptResults() != 4 {
		t.Fatalf("before: %d sessions, %d results", s.SessionCount(), s.KeptResults())
	}

	digest := s.digest(false)
	for _, bad := range []struct {
		name    string
		version uint32
		id      string
		want    error
	}{
		{"format 7 entry", SessionOpenFormat, a.SessionID, ErrSessionCloseFormat},
		{"empty id", SessionCloseFormat, "", ErrSessionID},
		{"id too long", SessionCloseFormat, strings.Repeat("x", MaxClientIDBytes+1), ErrSessionID},
	} {
		if r := closeS(bad.version, bad.id); !errors.Is(r.Err, bad.want) || r.Closed {
			t.Errorf("%s: %+v, want %v", bad.name, r, bad.want)
		}
	}
	if s.digest(false) != digest {
		t.Fatal("a refused close changed the state")
	}

	if r := closeS(SessionCloseFormat, a.SessionID); r.Err != nil || !r.Closed || r.Index != idx {
		t.Fatalf("close: %+v", r)
	}
	if s.SessionCount() != 1 || s.KeptResults() != 1 || s.sessions[a.SessionID] != nil || s.sessions[b.SessionID] == nil {
		t.Fatalf("after the close: %d sessions, %d results", s.SessionCount(), s.KeptResults())
	}
	next := s.NextSeq()
	for _, seq := range []uint64{3, 4} { // a retry of an answered request, a new one
		if r := appendOp(a.SessionID, seq); !errors.Is(r.Err, ErrSessionExpired) {
			t.Fatalf("request %d of the closed session: %+v", seq, r)
		}
	}
	if s.NextSeq() != next || s.SessionCount() != 1 {
		t.Fatal("a request of the closed session changed the state")
	}
	digest = s.digest(false)
	for _, id := range []string{a.SessionID, "never"} {
		if r := closeS(SessionCloseFormat, id); r.Err != nil || r.Closed {
			t.Fatalf("close of %s, not held: %+v", id, r)
		}
	}
	if s.digest(false) != digest {
		t.Fatal("closing a session not held changed the state")
	}
	if r := appendOp(b.SessionID, 1); !r.Duplicate {
		t.Fatalf("the other session lost its results: %+v", r)
	}
	restored, _ := roundTrip(t, s)
	if restored.digest(false) != s.digest(false) || restored.SessionCount() != 1 || restored.KeptResults() != 1 {
		t.Fatal("the state after a close did not survive a snapshot")
	}
}

// TestOpenSession: OPEN_SESSION (log format 7) opens a new, empty session
// named after the client and the entry's index, so two opens of one client
// id (a restarted client, a retried open) get two sessions, and one
// client's requests never meet another run's results; requests marked
// established in it apply, and once it is evicted they are refused, the
// first request included (before opens, that one started a new session
// and could apply twice). An open in an older entry, or naming a bad
// client id, changes nothing. The opened sessions survive a snapshot.
func TestOpenSession(t *testing.T) {
	s := NewState()
	s.logFormat = SessionOpenFormat
	idx := uint64(0)
	apply := func(l func(index uint64) *raft.Log) any { t.Helper(); return applyNext(t, s, &idx, l) }
	open := func(version uint32, client string) OpenSessionResult {
		t.Helper()
		return apply(openEntry(t, version, client)).(OpenSessionResult)
	}
	appendOp := func(client string, seq uint64) Result {
		t.Helper()
		o := op(client, seq, seq-1, "e")
		o.SessionEstablished = true
		return apply(func(i uint64) *raft.Log { return appendEntry(t, i, o) }).([]Result)[0]
	}

	digest := s.digest(false)
	for _, bad := range []struct {
		name    string
		version uint32
		client  string
		want    error
	}{
		{"format 6 entry", SessionExpiryFormat, "c", ErrSessionOpenFormat},
		{"empty client id", SessionOpenFormat, "", ErrSessionClientID},
		{"client id too long", SessionOpenFormat, strings.Repeat("x", MaxSessionBaseBytes+1), ErrSessionClientID},
	} {
		if r := open(bad.version, bad.client); !errors.Is(r.Err, bad.want) || r.SessionID != "" {
			t.Errorf("%s: %+v, want %v", bad.name, r, bad.want)
		}
	}
	if s.SessionCount() != 0 || s.digest(false) != digest {
		t.Fatal("a refused open changed the state")
	}

	r1 := open(SessionOpenFormat, strings.Repeat("x", MaxSessionBaseBytes))
	if r1.Err != nil || len(r1.SessionID) > 128 {
		t.Fatalf("the longest client id: %+v", r1)
	}
	a := open(SessionOpenFormat, "c")
	if a.Err != nil || a.SessionID != SessionID("c", a.Index) || a.SessionID != fmt.Sprintf("c@%d", idx) {
		t.Fatalf("open: %+v", a)
	}
	if r := appendOp(a.SessionID, 1); r.Err != nil || r.Duplicate {
		t.Fatalf("first request in the opened session: %+v", r)
	}
	if r := appendOp(a.SessionID, 1); !r.Duplicate {
		t.Fatalf("its retry: %+v", r)
	}
	// The same client restarted: a session of its own, seqs from 1 again.
	b := open(SessionOpenFormat, "c")
	if b.Err != nil || b.SessionID == a.SessionID {
		t.Fatalf("second open of c: %+v (first %+v)", b, a)
	}
	if r := appendOp(b.SessionID, 1); r.Err != nil || r.Duplicate {
		t.Fatalf("first request of the second run: %+v", r)
	}
	// A session some client started without an open under the id the next
	// open will name is replaced, its results gone.
	squat := SessionID("c", idx+2)
	if r := apply(func(i uint64) *raft.Log { return appendEntry(t, i, op(squat, 1, 0, "e")) }).([]Result)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if c := open(SessionOpenFormat, "c"); c.SessionID != squat || len(s.sessions[squat].kept) != 0 {
		t.Fatalf("open over a squatted id: %+v, %d results kept", c, len(s.sessions[squat].kept))
	}
	if r := appendOp(squat, 1); r.Err != nil || r.Duplicate {
		t.Fatalf("first request after the replacing open: %+v", r)
	}
	if s.KeptResults() != 3 {
		t.Fatalf("kept results %d, want 3", s.KeptResults())
	}

	restored, _ := roundTrip(t, s)
	if restored.digest(false) != s.digest(false) || restored.sessions[b.SessionID] == nil {
		t.Fatal("opened sessions lost in a snapshot")
	}

	// Evicted before its client had any answer: its first request (a
	// retry or not) is refused, not applied in a new session.
	d := open(SessionOpenFormat, "d")
	for i := range MaxSessions {
		s.session(fmt.Sprintf("n%d", i), idx)
	}
	next, sessions := s.NextSeq(), s.SessionCount()
	if r := appendOp(d.SessionID, 1); !errors.Is(r.Err, ErrSessionExpired) {
		t.Fatalf("first request after the eviction: %+v", r)
	}
	if s.NextSeq() != next || s.SessionCount() != sessions {
		t.Fatal("the refused request changed the state")
	}
}

// TestCaptureSharesKeptResults: a capture shares the sessions' kept
// results instead of copying them, and what it read stays as it was while
// the apply goes on — results appended after it, inserted out of order
// into it, acked and dropped — with another goroutine reading the capture
// all along (go test -race flags any write into the shared results).
func TestCaptureSharesKeptResults(t *testing.T) {
	s := NewState()
	s.logFormat = SessionFloorFormat
	sess := s.session("c", 1)
	for _, seq := range []uint64{1, 2, 3, 5, 8, 13} {
		s.keep(sess, keptResult{requestSeq: seq, firstSeq: seq * 10, count: 1}, 0, s.LogFormat())
	}
	sess.kept = slices.Grow(sess.kept, 64) // room to insert in place
	c := captureSnapshot(s).sessions[0]
	if len(c.kept) == 0 || &c.kept[0] != &sess.kept[0] {
		t.Fatal("the capture copied the kept results")
	}
	want := slices.Clone(c.kept)
	for _, seq := range []uint64{4, 21, 7, 34, 6} { // into the captured range, past it, into it
		s.keep(sess, keptResult{requestSeq: seq, firstSeq: seq * 10, count: 1}, 0, s.LogFormat())
	}
	if !slices.Equal(c.kept, want) {
		t.Fatalf("inserts changed the capture: %v, want %v", c.kept, want)
	}
	// Once the session's results moved to an array of their own, inserts
	// go in place again (no copy per insert while no capture is taken).
	sess.kept = slices.Grow(sess.kept, 8)
	before := &sess.kept[0]
	s.keep(sess, keptResult{requestSeq: 22, firstSeq: 220, count: 1}, 0, s.LogFormat())
	if &sess.kept[0] != before {
		t.Fatal("an insert with no capture since the last copy copied the results")
	}
	done := make(chan struct{})
	var reads int
	go func() {
		defer close(done)
		for range 2000 {
			if !slices.Equal(c.kept, want) {
				t.Error("a capture's kept results changed")
				return
			}
			reads++
		}
	}()
	rng := rand.New(rand.NewSource(1))
	seq := uint64(36)
	for i := range 3000 {
		if i%500 == 250 {
			captureSnapshot(s) // captures the apply does not keep
		}
		switch {
		case i%7 == 3: // out of order, below the newest
			r := keptResult{requestSeq: seq - 1 - uint64(rng.Intn(3)), firstSeq: 1, count: 1}
			if _, ok := sess.result(r.requestSeq); !ok && r.requestSeq > sess.ackedSeq {
				s.keep(sess, r, sess.ackedSeq, s.LogFormat())
			}
		case i%11 == 5:
			s.keep(sess, keptResult{requestSeq: seq, firstSeq: 1, count: 1}, seq-3, s.LogFormat())
			seq += 2
		default:
			s.keep(sess, keptResult{requestSeq: seq, firstSeq: 1, count: 1}, sess.ackedSeq, s.LogFormat())
			seq += 2
		}
	}
	<-done
	if !slices.Equal(c.kept, want) {
		t.Fatalf("capture changed: %v, want %v", c.kept, want)
	}
}
