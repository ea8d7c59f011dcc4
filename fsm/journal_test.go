package fsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

func cmdEntry(t testing.TB, index uint64, ty pb.CommandType, m proto.Message) *raft.Log {
	t.Helper()
	data, err := EncodeCommand(ty, m, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// journal is a small driver over one State for table tests.
type journal struct {
	t   *testing.T
	f   *FSM
	idx uint64
}

func newJournal(t *testing.T, eventsPerSegment uint64) *journal {
	j := &journal{t: t, f: New(nil)}
	j.do(pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: eventsPerSegment, SegmentBytes: 1 << 30})
	return j
}

func (j *journal) do(ty pb.CommandType, m proto.Message) any {
	j.idx++
	return j.f.Apply(cmdEntry(j.t, j.idx, ty, m))
}

func (j *journal) append(n int) {
	for i := 0; i < n; i++ {
		j.idx++
		j.f.Apply(appendEntry(j.t, j.idx, op("", 0, 0, "e")))
	}
}

func (j *journal) consumer(op pb.ConsumerOp, name string, seq uint64, from bool) ConsumerResult {
	return j.do(pb.CommandType_COMMAND_TYPE_CONSUMER, &pb.ConsumerCommand{Op: op, Name: name, Seq: seq, FromGiven: from}).(ConsumerResult)
}

func (j *journal) trim(to, covered uint64) TrimResult {
	return j.do(pb.CommandType_COMMAND_TYPE_TRIM, &pb.TrimCommand{ToSeq: to, CoveredIndex: covered}).(TrimResult)
}

func (j *journal) state() *State {
	var st *State
	j.f.View(func(s *State) { st = s })
	return st
}

func TestSegmentsRollAndTile(t *testing.T) {
	j := newJournal(t, 4)
	j.append(10)
	st := j.state()
	segs := st.Segments()
	if len(segs) != 3 || !segs[0].Sealed || !segs[1].Sealed || segs[2].Sealed {
		t.Fatalf("segments %v", segs)
	}
	if segs[0].FirstSeq != 1 || segs[0].LastSeq != 4 || segs[2].FirstSeq != 9 || segs[2].LastSeq != 10 {
		t.Fatalf("segment bounds %v", segs)
	}
	if err := st.checkSegments(); err != nil {
		t.Fatal(err)
	}
}

func TestTrimRules(t *testing.T) {
	j := newJournal(t, 4)
	if r := j.consumer(pb.ConsumerOp_CONSUMER_OP_REGISTER, "slow", 1, true); r.Err != nil || r.AckedSeq != 0 {
		t.Fatalf("register: %+v", r)
	}
	j.append(10) // segments [1-4] [5-8] [9-10 open]
	covered := j.idx

	// A consumer that acked nothing holds every segment.
	if r := j.trim(0, covered); r.Segments != 0 || r.TrimmedPos != 1 {
		t.Fatalf("trim past a consumer: %+v", r)
	}
	j.consumer(pb.ConsumerOp_CONSUMER_OP_ACK, "slow", 6, false)
	// Acked to 6: only [1-4] may go; and only once a snapshot covers it.
	if r := j.trim(0, 0); r.Segments != 0 {
		t.Fatalf("trim without snapshot coverage: %+v", r)
	}
	if st := j.state(); st.SegmentState(st.Segments()[0], 0) != SegmentExpiring {
		t.Fatal("acked but uncovered segment should be expiring")
	}
	if r := j.trim(0, covered); r.Segments != 1 || r.TrimmedPos != 5 {
		t.Fatalf("trim: %+v", r)
	}
	// The open segment never goes, even with everything acked.
	j.consumer(pb.ConsumerOp_CONSUMER_OP_ACK, "slow", 10, false)
	if r := j.trim(0, j.idx); r.Segments != 1 || r.TrimmedPos != 9 {
		t.Fatalf("trim to the open segment: %+v", r)
	}
	st := j.state()
	if st.FirstSeq() != 9 || st.ExpirePos(j.idx) != 9 || len(st.Read(1, 100)) != 2 {
		t.Fatalf("after trims: first %d expire %d", st.FirstSeq(), st.ExpirePos(j.idx))
	}
	// to_seq bounds the trim to whole segments below it; the future is refused.
	if r := j.trim(st.NextSeq()+1, j.idx); !errors.Is(r.Err, ErrTrimFuture) {
		t.Fatalf("trim to the future: %+v", r)
	}
}

func TestTrimToBound(t *testing.T) {
	j := newJournal(t, 4)
	j.append(13) // [1-4] [5-8] [9-12] [13 open]
	if r := j.trim(7, j.idx); r.Segments != 1 || r.TrimmedPos != 5 {
		t.Fatalf("trim --to 7: %+v", r)
	}
	if r := j.trim(13, j.idx); r.Segments != 2 || r.TrimmedPos != 13 {
		t.Fatalf("trim --to 13: %+v", r)
	}
}

// TestExcessTrimTo: an automatic trim goes back to the limits, not further
// (MDLog's trim walk stops at max_segments / max_events), and under the
// retention quota, and never past the open segment.
func TestExcessTrimTo(t *testing.T) {
	j := newJournal(t, 4)
	j.append(18) // [1-4] [5-8] [9-12] [13-16] [17-18 open]
	st := j.state()
	const seg = 4 * (4 + EventRecordBytes) // a sealed segment's bytes
	if st.SealedBytes() != 4*seg || st.RetainedBytes() != 4*seg+2*(4+EventRecordBytes) {
		t.Fatalf("sealed %d, retained %d bytes", st.SealedBytes(), st.RetainedBytes())
	}
	for _, tc := range []struct {
		maxSegs, maxEvents int
		quota              uint64
		want               uint64
	}{
		{0, 0, 0, 0},          // no bounds
		{5, 0, 0, 0},          // five segments: within
		{6, 18, 0, 0},         // within both
		{4, 0, 0, 5},          // one segment over: drop [1-4]
		{2, 0, 0, 13},         // keep [13-16] and the open one
		{1, 0, 0, 17},         // keep only the open segment
		{0, 10, 0, 9},         // 18 events: drop [1-4] [5-8] to reach 10
		{0, 11, 0, 9},         // 14 after one segment is still over 11
		{0, 14, 0, 5},         // 14 after one segment
		{0, 1, 0, 17},         // the open segment stays even over the event bound
		{4, 6, 0, 13},         // the tighter bound wins: 6 events left
		{3, 100, 0, 9},        // segments over, events within
		{0, 0, 4*seg + 1, 0},  // sealed segments under the quota
		{0, 0, 4 * seg, 5},    // at it: one goes
		{0, 0, 2*seg + 1, 9},  // two go
		{0, 0, 1, 17},         // every sealed one goes, the open one stays
		{5, 100, 3 * seg, 9},  // the quota wins over looser limits
		{1, 0, 4*seg + 1, 17}, // the segment limit wins over a loose quota
	} {
		if got := st.ExcessTrimTo(tc.maxSegs, tc.maxEvents, tc.quota); got != tc.want {
			t.Errorf("ExcessTrimTo(%d, %d, %d) = %d, want %d", tc.maxSegs, tc.maxEvents, tc.quota, got, tc.want)
		}
	}
	// Trimming to it leaves the journal at the limit.
	if r := j.trim(st.ExcessTrimTo(3, 0, 0), j.idx); r.Segments != 2 || r.TrimmedPos != 9 || len(j.state().Segments()) != 3 {
		t.Fatalf("trim to the segment limit: %+v, %d segments left", r, len(j.state().Segments()))
	}
	if got := j.state().ExcessTrimTo(3, 0, 0); got != 0 {
		t.Fatalf("after the trim: ExcessTrimTo = %d, want 0", got)
	}
}

func TestConsumerErrors(t *testing.T) {
	j := newJournal(t, 4)
	j.append(5)
	C := pb.ConsumerOp_CONSUMER_OP_REGISTER
	A := pb.ConsumerOp_CONSUMER_OP_ACK
	R := pb.ConsumerOp_CONSUMER_OP_REMOVE
	for _, tc := range []struct {
		op   pb.ConsumerOp
		name string
		seq  uint64
		from bool
		want error
	}{
		{C, "../bad", 0, false, ErrConsumerName},
		{C, "c1", 0, false, nil},
		{C, "c1", 0, false, ErrConsumerExists},
		{C, "c2", 99, true, ErrConsumerFrom},
		{A, "nobody", 1, false, ErrConsumerNotFound},
		{A, "c1", 6, false, ErrAckBeyondSafe},
		{A, "c1", 4, false, ErrAckBackwards}, // registered at safe_pos 5
		{A, "c1", 5, false, nil},
		{R, "nobody", 0, false, ErrConsumerNotFound},
		{R, "c1", 0, false, nil},
		{pb.ConsumerOp(42), "c1", 0, false, ErrConsumerOp},
	} {
		r := j.consumer(tc.op, tc.name, tc.seq, tc.from)
		if !errors.Is(r.Err, tc.want) {
			t.Fatalf("%v %s %d: got %v, want %v", tc.op, tc.name, tc.seq, r.Err, tc.want)
		}
	}
}

func TestResetContinuesSeqs(t *testing.T) {
	j := newJournal(t, 4)
	j.consumer(pb.ConsumerOp_CONSUMER_OP_REGISTER, "c", 1, true)
	j.append(6)
	r := j.do(pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{}).(TrimResult)
	if r.TrimmedPos != 7 {
		t.Fatalf("reset: %+v", r)
	}
	j.append(1)
	st := j.state()
	evs := st.Read(1, 10)
	if len(evs) != 1 || evs[0].Seq != 7 || st.Consumers()[0].AckedSeq != 6 {
		t.Fatalf("after reset: %v consumers %v", evs, st.Consumers())
	}
}

// randomJournalLogs mixes appends with every journal command.
func randomJournalLogs(t testing.TB, seed int64, n int) []*raft.Log {
	r := rand.New(rand.NewSource(seed))
	var logs []*raft.Log
	acked := uint64(0)
	for i := 1; i <= n; i++ {
		idx := uint64(i)
		switch k := r.Intn(20); {
		case k == 0:
			logs = append(logs, cmdEntry(t, idx, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: uint64(2 + r.Intn(6)), SegmentBytes: uint64(64 + r.Intn(512))}))
		case k == 1:
			logs = append(logs, cmdEntry(t, idx, pb.CommandType_COMMAND_TYPE_CONSUMER, &pb.ConsumerCommand{Op: pb.ConsumerOp_CONSUMER_OP_REGISTER, Name: fmt.Sprintf("c%d", r.Intn(3))}))
		case k <= 3:
			acked += uint64(r.Intn(5))
			logs = append(logs, cmdEntry(t, idx, pb.CommandType_COMMAND_TYPE_CONSUMER, &pb.ConsumerCommand{Op: pb.ConsumerOp_CONSUMER_OP_ACK, Name: fmt.Sprintf("c%d", r.Intn(3)), Seq: acked}))
		case k == 4:
			logs = append(logs, cmdEntry(t, idx, pb.CommandType_COMMAND_TYPE_TRIM, &pb.TrimCommand{CoveredIndex: idx - uint64(r.Intn(10))}))
		case k == 5 && r.Intn(10) == 0:
			logs = append(logs, cmdEntry(t, idx, pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{}))
		default:
			logs = append(logs, appendEntry(t, idx, op("", 0, 0, "x", "y")))
		}
	}
	return logs
}

func TestJournalDeterminismAndSnapshot(t *testing.T) {
	for seed := int64(0); seed < 5; seed++ {
		logs := randomJournalLogs(t, seed, 600)
		a, b := New(nil), New(nil)
		a.ApplyBatch(logs)
		b.ApplyBatch(logs[:300])
		data := snapshotBytes(t, b)
		c := New(nil)
		if err := c.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
		c.ApplyBatch(logs[300:])
		var ha, hc [32]byte
		a.View(func(s *State) {
			ha = s.Hash()
			if err := s.checkSegments(); err != nil {
				t.Fatal(err)
			}
		})
		c.View(func(s *State) { hc = s.Hash() })
		if ha != hc || a.Halted() != nil {
			t.Fatalf("seed %d: snapshot+replay differs from straight apply", seed)
		}
	}
}

// TestRestoreFormat1Fixture reads a snapshot written by format 1 (before
// the journal header existed): it must restore, rebuild the segments with
// the same rule Apply uses, and be rewritten as the current format.
func TestRestoreFormat1Fixture(t *testing.T) {
	restoreFixture(t, 1, randomLogs(t, 11, 120), func(s *State) {
		if s.AppliedIndex() != 120 || s.NextSeq() != 267 || s.SessionCount() != 4 || len(s.Members()) != 3 {
			t.Fatalf("fixture restored wrong: applied %d next %d", s.AppliedIndex(), s.NextSeq())
		}
	})
}

// BenchmarkRetainedEventMemory reports heap bytes held per retained event
// (256-byte payloads, 100 events per entry).
func BenchmarkRetainedEventMemory(b *testing.B) {
	const n = 100000
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f := New(nil)
		payload := bytes.Repeat([]byte("x"), 256)
		for idx := uint64(1); idx <= n/100; idx++ {
			ops := make([]*pb.AppendOp, 100)
			for k := range ops {
				ops[k] = &pb.AppendOp{Events: []*pb.JournalEvent{{Type: "bench", Payload: payload}}}
			}
			f.Apply(appendEntry(b, idx, ops...))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-bytes/event")
		runtime.KeepAlive(f)
	}
}

func TestImport(t *testing.T) {
	j := newJournal(t, 4)
	imp := func(first bool, force bool, seqs ...uint64) TrimResult {
		c := &pb.ImportCommand{FirstChunk: first, Force: force}
		for _, s := range seqs {
			c.Events = append(c.Events, &pb.StoredEvent{Seq: s, Type: "t", Payload: []byte{byte(s)}, ClientId: "orig", RequestSeq: s})
		}
		return j.do(pb.CommandType_COMMAND_TYPE_IMPORT, c).(TrimResult)
	}
	if r := imp(true, false, 10, 11, 12); r.Err != nil || r.TrimmedPos != 10 {
		t.Fatalf("first chunk: %+v", r)
	}
	if r := imp(false, false, 14); !errors.Is(r.Err, ErrImportGap) {
		t.Fatalf("gap: %+v", r)
	}
	if r := imp(false, false, 13, 14); r.Err != nil {
		t.Fatalf("second chunk: %+v", r)
	}
	if r := imp(true, false, 1); !errors.Is(r.Err, ErrImportNotEmpty) {
		t.Fatalf("import into a non-empty journal: %+v", r)
	}
	st := j.state()
	evs := st.Read(10, 10)
	if len(evs) != 5 || evs[0].ClientId != "orig" || evs[4].Seq != 14 || st.NextSeq() != 15 {
		t.Fatalf("imported: %v next %d", evs, st.NextSeq())
	}
	if err := st.checkSegments(); err != nil {
		t.Fatal(err)
	}
	if r := imp(true, true, 1, 2); r.Err != nil || j.state().NextSeq() != 3 {
		t.Fatalf("forced import: %+v", r)
	}
}

// TestSnapshotWithOpenSegment is design §J8 (b): a snapshot taken while a
// segment is open restores, on a fresh member, the identical segment table
// (bounds, bytes, counts, the open segment still open) and state, and the
// open segment goes on filling from where it stopped.
func TestSnapshotWithOpenSegment(t *testing.T) {
	j := newJournal(t, 8)
	j.append(8*3 + 5) // three sealed segments, five events in the open one
	j.consumer(pb.ConsumerOp_CONSUMER_OP_REGISTER, "c", 9, true)
	src := j.state()
	segs := src.Segments()
	if last := segs[len(segs)-1]; last.Events != 5 || last.Sealed {
		t.Fatalf("open segment: %v, want 5 events, not sealed", last)
	}
	data := snapshotBytes(t, j.f)
	r := New(nil)
	if err := r.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	var got []*pb.Segment
	var hr [32]byte
	r.View(func(s *State) { got, hr = s.Segments(), s.Hash() })
	if len(got) != len(segs) {
		t.Fatalf("restored %d segments, want %d", len(got), len(segs))
	}
	for i := range segs {
		if !proto.Equal(got[i], segs[i]) {
			t.Fatalf("segment %d: restored %v, want %v", i, got[i], segs[i])
		}
	}
	if hr != src.Hash() {
		t.Fatal("restored state hash differs")
	}
	// Both continue identically: the open segment fills to 8 and rolls.
	for _, f := range []*FSM{j.f, r} {
		idx := j.idx
		for i := 0; i < 4; i++ {
			idx++
			f.Apply(appendEntry(t, idx, op("", 0, 0, "e")))
		}
	}
	var ha [32]byte
	var n int
	j.f.View(func(s *State) { ha = s.Hash() })
	r.View(func(s *State) {
		hr, n = s.Hash(), len(s.Segments())
		if err := s.checkSegments(); err != nil {
			t.Fatal(err)
		}
	})
	if ha != hr || n != 5 {
		t.Fatalf("after more appends: hashes equal %v, %d segments (want 5)", ha == hr, n)
	}
}

// TestMixedFormatLog is design §J8 (e): a log in format 1 up to a SET_FORMAT
// and in format 2 after it applies, snapshots and replays identically to a
// straight apply; format 2 entries carry per-event CRCs that every member
// checks; the format never goes back.
func TestMixedFormatLog(t *testing.T) {
	var logs []*raft.Log
	idx := uint64(0)
	add := func(version uint32, ty pb.CommandType, m proto.Message) {
		t.Helper()
		idx++
		data, err := EncodeCommandVersion(version, ty, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
	}
	appendCmd := func(i int) *pb.AppendCommand {
		return &pb.AppendCommand{Ops: []*pb.AppendOp{{ClientId: "c", RequestSeq: uint64(i), Events: []*pb.JournalEvent{{Type: "t", Payload: []byte(fmt.Sprintf("p%d", i))}}}}}
	}
	add(1, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: 4, SegmentBytes: 1 << 20})
	for i := 1; i <= 10; i++ {
		add(1, pb.CommandType_COMMAND_TYPE_APPEND, appendCmd(i))
	}
	add(1, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: 2})
	boundary := len(logs)
	for i := 11; i <= 20; i++ {
		add(2, pb.CommandType_COMMAND_TYPE_APPEND, appendCmd(i))
	}

	straight := New(nil)
	straight.ApplyBatch(logs)
	if err := straight.Halted(); err != nil {
		t.Fatal(err)
	}
	var format uint32
	var next uint64
	straight.View(func(s *State) { format, next = s.LogFormat(), s.NextSeq() })
	if format != 2 || next != 21 {
		t.Fatalf("after the log: format %d, next seq %d", format, next)
	}
	// Snapshot on either side of the boundary, restore, replay the rest.
	for _, cut := range []int{boundary - 3, boundary, boundary + 4} {
		a := New(nil)
		a.ApplyBatch(logs[:cut])
		b := New(nil)
		if err := b.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, a))}); err != nil {
			t.Fatal(err)
		}
		b.ApplyBatch(logs[cut:])
		var hs, hb [32]byte
		straight.View(func(s *State) { hs = s.Hash() })
		b.View(func(s *State) { hb = s.Hash(); format = s.LogFormat() })
		if hs != hb || format != 2 || b.Halted() != nil {
			t.Fatalf("cut %d: snapshot+replay differs (format %d, halted %v)", cut, format, b.Halted())
		}
	}
	// A downgrade is refused and changes nothing.
	resp := straight.Apply(cmdEntry(t, idx+1, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: 1}))
	straight.View(func(s *State) { format = s.LogFormat() })
	if !errors.Is(resp.(error), ErrFormatDowngrade) || format != 2 {
		t.Fatalf("downgrade: %v, format %d", resp, format)
	}
	// Format 1 entries still apply after the boundary (an entry proposed
	// just before the leader saw the SET_FORMAT).
	straight.Apply(cmdEntry(t, idx+2, pb.CommandType_COMMAND_TYPE_APPEND, appendCmd(21)))
	straight.View(func(s *State) { next = s.NextSeq() })
	if next != 22 || straight.Halted() != nil {
		t.Fatalf("format 1 entry after the boundary: next %d, halted %v", next, straight.Halted())
	}
	// Encoding refuses formats this build does not know.
	if _, err := EncodeCommandVersion(CommandVersion+1, pb.CommandType_COMMAND_TYPE_APPEND, appendCmd(1), 0); err == nil {
		t.Fatal("encoding a newer format was accepted")
	}
}

// BenchmarkSnapshot writes and reads back a snapshot of a million retained
// 256-byte events (the state a restart or a follower's catch-up restores).
func BenchmarkSnapshot(b *testing.B) {
	const n = 1000000
	f := benchJournal(b, n)
	var sn *snapshot
	f.View(func(s *State) { sn = captureSnapshot(s) })
	var buf bytes.Buffer
	b.Run("write", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			buf.Reset()
			if err := sn.write(&buf); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(buf.Len())/n, "bytes/event")
	})
	b.Run("read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			st, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
			if err != nil || st.EventCount() != n {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkDigest hashes a state of a million retained 256-byte events, as
// every member does after it applies a checkpoint (coord journal verify).
func BenchmarkDigest(b *testing.B) {
	const n = 1000000
	f := benchJournal(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.View(func(s *State) { s.Hash() })
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCheckpointApply is how long applying a checkpoint entry holds
// the state machine (the pause every member's applies take) over a million
// retained events from 100 clients: the capture only. The digest itself
// runs after the apply (BenchmarkDigest); it is awaited outside the timer.
func BenchmarkCheckpointApply(b *testing.B) {
	const n = 1000000
	f := benchJournal(b, n)
	idx := uint64(n/100) + 1
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cp := f.Apply(cmdEntry(b, idx, pb.CommandType_COMMAND_TYPE_CHECKPOINT, &pb.CheckpointCommand{})).(*Checkpoint)
		b.StopTimer()
		if _, err := cp.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		idx++
		b.StartTimer()
	}
}

// benchJournal is an FSM holding n 256-byte events from 100 clients.
func benchJournal(b *testing.B, n int) *FSM {
	f := New(nil)
	payload := bytes.Repeat([]byte("x"), 256)
	for idx := uint64(1); idx <= uint64(n/100); idx++ {
		ops := make([]*pb.AppendOp, 100)
		for k := range ops {
			ops[k] = &pb.AppendOp{ClientId: fmt.Sprintf("c%d", k), RequestSeq: idx, Events: []*pb.JournalEvent{{Type: "bench", Payload: payload}}}
		}
		f.Apply(appendEntry(b, idx, ops...))
	}
	return f
}

// TestRetainedBytes: RetainedBytes follows appends, trims, resets, forced
// imports and a snapshot round trip (checkSegments compares the running
// count with the segments), and Answered tells the requests a leader over
// its quota still lets through.
func TestRetainedBytes(t *testing.T) {
	j := newJournal(t, 4)
	st := j.state()
	if st.RetainedBytes() != 0 {
		t.Fatalf("empty journal: %d bytes", st.RetainedBytes())
	}
	j.append(10) // type "e", payload "p-e": 4 bytes each
	if got, want := st.RetainedBytes(), uint64(10*(4+EventRecordBytes)); got != want {
		t.Fatalf("10 events: %d bytes, want %d", got, want)
	}
	if r := j.trim(0, j.idx); r.Err != nil || r.TrimmedPos != 9 {
		t.Fatalf("trim: %+v", r)
	}
	if got, want := st.RetainedBytes(), uint64(2*(4+EventRecordBytes)); got != want {
		t.Fatalf("after trimming 8: %d bytes, want %d", got, want)
	}
	imp := &pb.ImportCommand{FirstChunk: true, Force: true}
	for s := uint64(1); s <= 3; s++ {
		imp.Events = append(imp.Events, &pb.StoredEvent{Seq: s, Type: "tt", Payload: []byte("12345")})
	}
	if r := j.do(pb.CommandType_COMMAND_TYPE_IMPORT, imp).(TrimResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got, want := st.RetainedBytes(), uint64(3*(7+EventRecordBytes)); got != want {
		t.Fatalf("after a forced import: %d bytes, want %d", got, want)
	}
	j.do(pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{})
	if st.RetainedBytes() != 0 {
		t.Fatalf("after reset: %d bytes", st.RetainedBytes())
	}
	for seed := int64(0); seed < 5; seed++ {
		f := New(nil)
		for _, l := range randomJournalLogs(t, seed, 600) {
			f.Apply(l)
			f.View(func(s *State) {
				if err := s.checkSegments(); err != nil {
					t.Fatalf("seed %d index %d: %v", seed, l.Index, err)
				}
			})
		}
		c := New(nil)
		if err := c.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
			t.Fatal(err)
		}
		var a, b uint64
		f.View(func(s *State) { a = s.RetainedBytes() })
		c.View(func(s *State) { b = s.RetainedBytes() })
		if a != b || a == 0 {
			t.Fatalf("seed %d: %d bytes retained, %d after a snapshot round trip", seed, a, b)
		}
	}

	// Answered: acknowledged, kept and dropped requests are answered
	// without an append; new ones and unknown sessions are not.
	k := newJournal(t, 4)
	k.f.Apply(appendEntry(t, 100, op("c", 1, 0, "e")))
	k.f.Apply(appendEntry(t, 101, op("c", 2, 1, "e")))
	ks := k.state()
	for _, tc := range []struct {
		client string
		seq    uint64
		want   bool
	}{{"c", 1, true}, {"c", 2, true}, {"c", 3, false}, {"other", 1, false}, {"", 0, false}} {
		if got := ks.Answered(tc.client, tc.seq); got != tc.want {
			t.Errorf("Answered(%q, %d) = %v, want %v", tc.client, tc.seq, got, tc.want)
		}
	}
}
