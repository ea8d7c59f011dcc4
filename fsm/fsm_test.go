package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

func appendEntry(t testing.TB, index uint64, ops ...*pb.AppendOp) *raft.Log {
	t.Helper()
	data, err := EncodeCommand(pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: ops}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func op(client string, seq, acked uint64, types ...string) *pb.AppendOp {
	o := &pb.AppendOp{ClientId: client, RequestSeq: seq, AckedSeq: acked}
	for _, ty := range types {
		o.Events = append(o.Events, &pb.JournalEvent{Type: ty, Payload: []byte("p-" + ty)})
	}
	return o
}

// randomLogs builds a deterministic pseudo-random history with retries,
// acks, several clients, anonymous appends, members and configuration entries.
func randomLogs(t testing.TB, seed int64, n int) []*raft.Log {
	r := rand.New(rand.NewSource(seed))
	seqs := map[string]uint64{}
	var logs []*raft.Log
	for i := 1; i <= n; i++ {
		idx := uint64(i)
		switch r.Intn(10) {
		case 0:
			logs = append(logs, &raft.Log{Index: idx, Type: raft.LogConfiguration})
		case 1:
			data, _ := EncodeCommand(pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{
				Member: &pb.Member{Id: fmt.Sprintf("c%d", r.Intn(3)), RaftAddr: "r", GrpcAddr: fmt.Sprintf("g%d", i)}}, 0)
			logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
		default:
			var ops []*pb.AppendOp
			for k := 0; k < 1+r.Intn(4); k++ {
				c := fmt.Sprintf("client-%d", r.Intn(4))
				if r.Intn(5) == 0 {
					ops = append(ops, op("", 0, 0, "anon"))
					continue
				}
				seq := seqs[c]
				if seq == 0 || r.Intn(4) != 0 { // else: a retry of the last seq
					seq++
					seqs[c] = seq
				}
				var acked uint64
				if seq > 2 {
					acked = seq - 2
				}
				ops = append(ops, op(c, seq, acked, "a", "b"))
			}
			logs = append(logs, appendEntry(t, idx, ops...))
		}
	}
	return logs
}

func TestDeterminism(t *testing.T) {
	for seed := int64(0); seed < 5; seed++ {
		logs := randomLogs(t, seed, 500)
		a, b := New(nil), New(nil)
		for _, l := range logs {
			a.Apply(l)
		}
		// b applies the same entries in batches of varying size.
		for i := 0; i < len(logs); {
			j := i + 1 + int(seed)*7%13
			if j > len(logs) {
				j = len(logs)
			}
			b.ApplyBatch(logs[i:j])
			i = j
		}
		var ha, hb [32]byte
		a.View(func(s *State) { ha = s.Hash() })
		b.View(func(s *State) { hb = s.Hash() })
		if ha != hb {
			t.Fatalf("seed %d: state hashes differ", seed)
		}
	}
}

func TestSeqsContiguousAndDedupe(t *testing.T) {
	f := New(nil)
	r1 := f.Apply(appendEntry(t, 1, op("c", 1, 0, "x", "y"), op("", 0, 0, "z"))).([]Result)
	if r1[0].FirstSeq != 1 || r1[0].Count != 2 || r1[1].FirstSeq != 3 || r1[1].Count != 1 {
		t.Fatalf("results %+v", r1)
	}
	// A retry of (c,1) in a later entry returns the original seqs, appends nothing.
	r2 := f.Apply(appendEntry(t, 2, op("c", 1, 0, "x", "y"))).([]Result)
	if !r2[0].Duplicate || r2[0].FirstSeq != 1 || r2[0].Count != 2 {
		t.Fatalf("retry result %+v", r2[0])
	}
	// Anonymous appends are never deduplicated.
	r3 := f.Apply(appendEntry(t, 3, op("", 0, 0, "z"))).([]Result)
	if r3[0].FirstSeq != 4 {
		t.Fatalf("anonymous result %+v", r3[0])
	}
	// Ack 1, then a replay of seq 1 is refused rather than re-applied.
	f.Apply(appendEntry(t, 4, op("c", 2, 1, "w")))
	r5 := f.Apply(appendEntry(t, 5, op("c", 1, 0, "x"))).([]Result)
	if !errors.Is(r5[0].Err, ErrSessionAcked) {
		t.Fatalf("acked replay: %+v", r5[0])
	}
	f.View(func(s *State) {
		if s.NextSeq() != 6 {
			t.Fatalf("next seq %d, want 6", s.NextSeq())
		}
		evs := s.Read(1, 100)
		for i, e := range evs {
			if e.Seq != uint64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
	})
}

func TestInvalidOps(t *testing.T) {
	f := New(nil)
	res := f.Apply(appendEntry(t, 1, &pb.AppendOp{}, &pb.AppendOp{Events: []*pb.JournalEvent{{Type: ""}}}, op("", 0, 0, "ok"))).([]Result)
	if !errors.Is(res[0].Err, ErrEmptyAppend) || !errors.Is(res[1].Err, ErrInvalidEvent) || res[2].Err != nil || res[2].FirstSeq != 1 {
		t.Fatalf("results %+v", res)
	}
	if f.Halted() != nil {
		t.Fatal("invalid ops must not halt the FSM")
	}
}

func TestBadEnvelopesHalt(t *testing.T) {
	badVersion, _ := proto.Marshal(&pb.Command{Version: CommandVersion + 1, Type: pb.CommandType_COMMAND_TYPE_APPEND})
	zeroVersion, _ := proto.Marshal(&pb.Command{Version: 0, Type: pb.CommandType_COMMAND_TYPE_APPEND})
	appendV2, _ := proto.Marshal(&pb.AppendCommand{Ops: []*pb.AppendOp{{Events: []*pb.JournalEvent{{Type: "t", Payload: []byte("x"), Crc32C: EventCRC("t", []byte("y"))}}}}})
	badCRC, _ := proto.Marshal(&pb.Command{Version: 2, Type: pb.CommandType_COMMAND_TYPE_APPEND, Payload: appendV2})
	setNewer, _ := EncodeCommand(pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: CommandVersion + 1}, 0)
	unknownType, _ := proto.Marshal(&pb.Command{Version: CommandVersion, Type: pb.CommandType(99)})
	badPayload, _ := proto.Marshal(&pb.Command{Version: CommandVersion, Type: pb.CommandType_COMMAND_TYPE_APPEND, Payload: []byte{0xff, 0xff, 0xff}})
	cases := map[string][]byte{
		"garbage":      []byte{0xde, 0xad, 0xbe, 0xef, 0x01},
		"newer":        badVersion,
		"version 0":    zeroVersion,
		"bad crc":      badCRC,
		"set newer":    setNewer,
		"unknown type": unknownType,
		"bad payload":  badPayload,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			var halted error
			f := New(func(err error) { halted = err })
			f.Apply(appendEntry(t, 1, op("", 0, 0, "before")))
			var before [32]byte
			f.View(func(s *State) { before = s.Hash() })
			resp := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: data})
			if err, _ := resp.(error); !errors.Is(err, ErrHalted) || !errors.Is(halted, ErrHalted) {
				t.Fatalf("response %v, halt %v", resp, halted)
			}
			// Nothing after the bad entry is applied.
			resp = f.Apply(appendEntry(t, 3, op("", 0, 0, "after")))
			if err, _ := resp.(error); !errors.Is(err, ErrHalted) {
				t.Fatalf("entry after halt: %v", resp)
			}
			var after [32]byte
			f.View(func(s *State) { after = s.Hash() })
			if before != after {
				t.Fatal("state changed after halt")
			}
			if _, err := f.Snapshot(); err == nil {
				t.Fatal("a halted FSM must not snapshot")
			}
		})
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func TestSnapshotRoundTrip(t *testing.T) {
	logs := randomLogs(t, 42, 400)
	f := New(nil)
	f.ApplyBatch(logs[:300])
	data := snapshotBytes(t, f)
	// Appends after Snapshot() must not leak into the captured snapshot.
	f.ApplyBatch(logs[300:])

	g := New(nil)
	if err := g.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	ref := New(nil)
	ref.ApplyBatch(logs[:300])
	var hg, href [32]byte
	g.View(func(s *State) { hg = s.Hash() })
	ref.View(func(s *State) { href = s.Hash() })
	if hg != href {
		t.Fatal("restored state differs from the state at the snapshot")
	}
	// Continuing from the snapshot gives the same state as never snapshotting.
	g.ApplyBatch(logs[300:])
	var hf [32]byte
	g.View(func(s *State) { hg = s.Hash() })
	f.View(func(s *State) { hf = s.Hash() })
	if hg != hf {
		t.Fatal("state after restore+replay differs")
	}
}

func TestSnapshotCorruptionRefused(t *testing.T) {
	f := New(nil)
	f.ApplyBatch(randomLogs(t, 7, 100))
	data := snapshotBytes(t, f)
	var before [32]byte
	g := New(nil)
	g.Apply(appendEntry(t, 1, op("", 0, 0, "keep")))
	g.View(func(s *State) { before = s.Hash() })

	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		want error
	}{
		{"flip body", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }, ErrSnapshotCorrupt},
		{"flip crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, ErrSnapshotCorrupt},
		{"truncated", func(b []byte) []byte { return b[:len(b)-9] }, ErrSnapshotCorrupt},
		{"trailing", func(b []byte) []byte { return append(b, 0) }, ErrSnapshotCorrupt},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrSnapshotCorrupt},
		{"newer version", func(b []byte) []byte { b[11] = 9; return b }, ErrSnapshotVersion},
		{"empty", func(b []byte) []byte { return nil }, ErrSnapshotCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mut := tc.mut(append([]byte(nil), data...))
			err := g.Restore(nopCloser{bytes.NewReader(mut)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("restore error %v, want %v", err, tc.want)
			}
			var after [32]byte
			g.View(func(s *State) { after = s.Hash() })
			if after != before {
				t.Fatal("a refused snapshot changed the state")
			}
		})
	}
}

func TestSessionEviction(t *testing.T) {
	s := NewState()
	idx := uint64(0)
	for i := 0; i < MaxSessions+10; i++ {
		idx++
		cmd, _ := DecodeCommand(appendEntry(t, idx, op(fmt.Sprintf("c%d", i), 1, 0, "e")).Data)
		if _, err := s.Apply(idx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	if s.SessionCount() != MaxSessions {
		t.Fatalf("sessions %d, want %d", s.SessionCount(), MaxSessions)
	}
	if _, ok := s.sessions["c0"]; ok {
		t.Fatal("least recently used session was not evicted")
	}
}

// TestSessionResultsBounded: a client that never acks keeps its newest
// MaxResultsPerSession results (a retry of one of them is answered, an
// older one expires), and minResultSeq agrees with a scan however the
// seqs arrive: contiguous, with gaps, out of order, acked in jumps; the
// kept results stay in request order, above the ack, and counted in the
// table's total.
func TestSessionResultsBounded(t *testing.T) {
	s := NewState()
	idx := uint64(0)
	apply := func(o *pb.AppendOp) Result {
		t.Helper()
		idx++
		cmd, _ := DecodeCommand(appendEntry(t, idx, o).Data)
		r, err := s.Apply(idx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return r.([]Result)[0]
	}
	n := uint64(MaxResultsPerSession + 500)
	for seq := uint64(1); seq <= n; seq++ {
		apply(op("noack", seq, 0, "e"))
	}
	sess := s.sessions["noack"]
	if len(sess.kept) != MaxResultsPerSession || sess.minResultSeq() != n-MaxResultsPerSession+1 || sess.droppedThrough != 0 {
		t.Fatalf("kept %d results from %d (dropped through %d)", len(sess.kept), sess.minResultSeq(), sess.droppedThrough)
	}
	if r := apply(op("noack", n-MaxResultsPerSession+1, 0, "e")); !r.Duplicate {
		t.Fatalf("retry of a kept result: %+v", r)
	}
	if r := apply(op("noack", n-MaxResultsPerSession, 0, "e")); !errors.Is(r.Err, ErrSessionResultExpired) {
		t.Fatalf("retry of a dropped result: %+v", r)
	}

	rng := rand.New(rand.NewSource(3))
	seq, acked := uint64(0), uint64(0)
	for i := 0; i < 20000; i++ {
		o := op("sparse", 0, acked, "e")
		switch k := rng.Intn(100); {
		case k < 80:
			seq++
			o.RequestSeq = seq
		case k < 90: // a gap
			seq += uint64(1 + rng.Intn(200))
			o.RequestSeq = seq
		default: // an older seq not yet seen or already kept
			o.RequestSeq = acked + 1 + uint64(rng.Int63n(int64(seq-acked+1)))
		}
		if rng.Intn(50) == 0 && seq > acked {
			acked += uint64(rng.Int63n(int64(seq-acked) + 1))
			o.AckedSeq = acked
		}
		apply(o)
		sess := s.sessions["sparse"]
		var want uint64
		for _, r := range sess.kept {
			if want == 0 || r.requestSeq < want {
				want = r.requestSeq
			}
		}
		if got := sess.minResultSeq(); got != want || len(sess.kept) > MaxResultsPerSession {
			t.Fatalf("step %d: minResultSeq %d, scan %d, %d kept", i, got, want, len(sess.kept))
		}
		checkSessions(t, &s.sessionTable)
	}
	// A restored session reads its results back in order.
	r, _ := roundTrip(t, s)
	checkSessions(t, &r.sessionTable)
	for _, id := range []string{"noack", "sparse"} {
		if !slices.Equal(r.sessions[id].kept, s.sessions[id].kept) {
			t.Fatalf("%s restored with other results", id)
		}
	}
}

// checkSessions checks the session table's derived structures: every
// session's results in request order above its ack and its dropped
// results, the total they add up to, and the holders list being the lru
// order restricted to the sessions holding results.
func checkSessions(t *testing.T, st *sessionTable) {
	t.Helper()
	total := 0
	var holders []*session
	for e := st.lru.Front(); e != nil; e = e.Next() {
		sess := e.Value.(*session)
		if sess.lastUsed > st.clock || e.Prev() != nil && e.Prev().Value.(*session).lastUsed > sess.lastUsed {
			t.Fatalf("%s: last used at %d, out of lru order (clock %d)", sess.id, sess.lastUsed, st.clock)
		}
		for j, r := range sess.kept {
			if (j > 0 && sess.kept[j-1].requestSeq >= r.requestSeq) || r.requestSeq <= sess.ackedSeq || r.requestSeq <= sess.droppedThrough {
				t.Fatalf("%s: kept[%d] = %d out of place (acked %d, dropped through %d)", sess.id, j, r.requestSeq, sess.ackedSeq, sess.droppedThrough)
			}
		}
		if (sess.holder != nil) != (len(sess.kept) > 0) {
			t.Fatalf("%s: %d kept, holder %v", sess.id, len(sess.kept), sess.holder != nil)
		}
		if len(sess.kept) > 0 {
			holders = append(holders, sess)
		}
		total += len(sess.kept)
	}
	if total != st.keptResults {
		t.Fatalf("sessions keep %d results, the table counts %d", total, st.keptResults)
	}
	i := 0
	for e := st.holders.Front(); e != nil; e = e.Next() {
		if i >= len(holders) || e.Value.(*session) != holders[i] {
			t.Fatalf("holder %d out of lru order", i)
		}
		i++
	}
	if i != len(holders) {
		t.Fatalf("%d holders listed, %d sessions hold results", i, len(holders))
	}
}

// BenchmarkApplyNoAckSession: a client that never acks has its oldest
// kept result dropped on every request once it holds MaxResultsPerSession:
// that must cost the same as any other request, not a scan of the 4096.
func BenchmarkApplyNoAckSession(b *testing.B) {
	f := New(nil)
	payload := bytes.Repeat([]byte("x"), 256)
	seq := uint64(0)
	entry := func(i int) *raft.Log {
		ops := make([]*pb.AppendOp, 100)
		for k := range ops {
			seq++
			ops[k] = &pb.AppendOp{ClientId: "noack", RequestSeq: seq, Events: []*pb.JournalEvent{{Type: "e", Payload: payload}}}
		}
		return appendEntry(b, uint64(i), ops...)
	}
	for i := 1; i <= MaxResultsPerSession/100+1; i++ {
		f.Apply(entry(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Apply(entry(MaxResultsPerSession/100 + 2 + i))
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkApplyBatch(b *testing.B) {
	for _, per := range []int{1, 100} {
		b.Run(fmt.Sprintf("events-per-entry=%d", per), func(b *testing.B) {
			f := New(nil)
			ops := make([]*pb.AppendOp, per)
			payload := bytes.Repeat([]byte("x"), 256)
			for i := range ops {
				ops[i] = &pb.AppendOp{Events: []*pb.JournalEvent{{Type: "bench", Payload: payload}}}
			}
			l := appendEntry(b, 0, ops...)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Index = uint64(i + 1)
				f.Apply(l)
			}
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkApplyStreamingSession: one client keeps 4096 requests in flight
// (acked_seq trails request_seq by 4096), 100 requests per entry: the cost
// of session bookkeeping per request must stay constant.
func BenchmarkApplyStreamingSession(b *testing.B) {
	f := New(nil)
	payload := bytes.Repeat([]byte("x"), 256)
	seq := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ops := make([]*pb.AppendOp, 100)
		for k := range ops {
			seq++
			acked := uint64(0)
			if seq > 4096 {
				acked = seq - 4096
			}
			ops[k] = &pb.AppendOp{ClientId: "stream", RequestSeq: seq, AckedSeq: acked, Events: []*pb.JournalEvent{{Type: "e", Payload: payload}}}
		}
		f.Apply(appendEntry(b, uint64(i+1), ops...))
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
}

// TestEventCRC: the checksum is CRC32C over type, a zero byte and payload
// (log format 2), and computing it allocates nothing.
func TestEventCRC(t *testing.T) {
	payload := []byte("some payload bytes")
	for _, typ := range []string{"t", "mds.update", "ünïcode"} {
		want := crc32.Checksum(append(append([]byte(typ), 0), payload...), crc32.MakeTable(crc32.Castagnoli))
		if got := EventCRC(typ, payload); got != want {
			t.Errorf("EventCRC(%q) = %08x, want %08x", typ, got, want)
		}
	}
	if got, want := EventCRC("a", []byte("b")), EventCRC("ab", nil); got == want {
		t.Errorf("type and payload not separated: %08x for both", got)
	}
	if n := testing.AllocsPerRun(100, func() { EventCRC("bench", payload) }); n != 0 {
		t.Errorf("EventCRC allocates %v times per call", n)
	}
}
