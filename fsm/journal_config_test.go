package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// TestSetJournalConfig: SET_JOURNAL_CONFIG is refused before log format 11
// (in an older entry, and in a format-11 entry while the state is still at
// 10); from 11 on it changes only the fields it carries and marks the
// config held; a result out of bounds is refused and changes nothing; once
// held, a leader's CONFIGURE_JOURNAL is refused; before that, at format
// 11, it keeps the trim bounds; segments roll by the new threshold.
func TestSetJournalConfig(t *testing.T) {
	s := NewState()
	s.logFormat = LeaderClockFormat
	idx := uint64(0)
	t0 := time.Unix(1_000_000, 0)
	apply := func(version uint32, typ pb.CommandType, m proto.Message) any {
		t.Helper()
		return applyNext(t, s, &idx, timedEntry(t, version, t0.Add(time.Duration(idx)*time.Second), typ, m))
	}
	set := func(version uint32, c *pb.SetJournalConfigCommand) error {
		t.Helper()
		r, _ := apply(version, pb.CommandType_COMMAND_TYPE_SET_JOURNAL_CONFIG, c).(error)
		return r
	}
	configure := func(c *pb.JournalConfig) error {
		t.Helper()
		r, _ := apply(s.LogFormat(), pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, c).(error)
		return r
	}
	want := func(what string, w *pb.JournalConfig) {
		t.Helper()
		if !proto.Equal(s.JournalConfig(), w) {
			t.Fatalf("%s: config %v, want %v", what, s.JournalConfig(), w)
		}
	}
	u := func(v uint64) *uint64 { return &v }

	if err := configure(&pb.JournalConfig{EventsPerSegment: 8, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	base := &pb.JournalConfig{EventsPerSegment: 8, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 60}
	want("format 10", base)
	if err := set(LeaderClockFormat, &pb.SetJournalConfigCommand{EventsPerSegment: u(4)}); !errors.Is(err, ErrJournalConfigFormat) {
		t.Fatalf("a format-10 entry: %v, want ErrJournalConfigFormat", err)
	}
	if err := set(HeldConfigFormat, &pb.SetJournalConfigCommand{EventsPerSegment: u(4)}); !errors.Is(err, ErrJournalConfigFormat) {
		t.Fatalf("a format-11 entry at state format 10: %v, want ErrJournalConfigFormat", err)
	}
	want("refused before format 11", base)

	if r := apply(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: HeldConfigFormat}); r != nil {
		t.Fatal(r)
	}
	// Not held yet: a leader's flags still apply, and keep the trim bounds.
	s.config.MaxSegments = 7 // as a seed would have left them
	if err := configure(&pb.JournalConfig{EventsPerSegment: 16, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	want("CONFIGURE_JOURNAL at format 11, not held", &pb.JournalConfig{EventsPerSegment: 16, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 60, MaxSegments: 7})
	s.config.MaxSegments = 0

	// The seed: every field.
	if err := set(HeldConfigFormat, &pb.SetJournalConfigCommand{EventsPerSegment: u(4), SegmentBytes: u(1 << 30), SessionIdleTimeoutSeconds: u(3600), MaxSegments: u(128), MaxEvents: u(0)}); err != nil {
		t.Fatal(err)
	}
	seeded := &pb.JournalConfig{EventsPerSegment: 4, SegmentBytes: 1 << 30, SessionIdleTimeoutSeconds: 3600, MaxSegments: 128, Held: true}
	want("seeded", seeded)
	if err := configure(&pb.JournalConfig{EventsPerSegment: 1024, SegmentBytes: 1 << 20}); !errors.Is(err, ErrJournalConfigHeld) {
		t.Fatalf("CONFIGURE_JOURNAL once held: %v, want ErrJournalConfigHeld", err)
	}
	want("a leader's flags once held", seeded)

	// A partial change.
	if err := set(HeldConfigFormat, &pb.SetJournalConfigCommand{MaxEvents: u(5000), SessionIdleTimeoutSeconds: u(0)}); err != nil {
		t.Fatal(err)
	}
	changed := &pb.JournalConfig{EventsPerSegment: 4, SegmentBytes: 1 << 30, MaxSegments: 128, MaxEvents: 5000, Held: true}
	want("partial", changed)

	for name, c := range map[string]*pb.SetJournalConfigCommand{
		"zero events per segment":    {EventsPerSegment: u(0)},
		"events per segment too big": {EventsPerSegment: u(MaxEventsPerSegment + 1)},
		"zero segment bytes":         {SegmentBytes: u(0)},
		"segment bytes too big":      {SegmentBytes: u(MaxSegmentBytes + 1)},
		"idle timeout over 30 days":  {SessionIdleTimeoutSeconds: u(maxSessionIdleSeconds + 1)},
		"max segments too big":       {MaxSegments: u(MaxTrimSegments + 1), EventsPerSegment: u(2)},
		"max events too big":         {MaxEvents: u(MaxTrimEvents + 1)},
	} {
		if err := set(HeldConfigFormat, c); !errors.Is(err, ErrInvalidJournalConfig) {
			t.Fatalf("%s: %v, want ErrInvalidJournalConfig", name, err)
		}
		want(name+" changes nothing", changed)
	}

	// Segments roll by the held threshold.
	for i := range 6 {
		r := apply(HeldConfigFormat, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{op("", 0, 0, "e")}}).([]Result)[0]
		if r.Err != nil {
			t.Fatalf("append %d: %v", i, r.Err)
		}
	}
	if segs := s.Segments(); len(segs) != 2 || segs[0].Events != 4 || !segs[0].Sealed || segs[1].Events != 2 {
		t.Fatalf("segments %v, want 4 sealed then 2", segs)
	}
}

// TestHeldConfigSnapshot: the held config and its trim bounds survive a
// snapshot and count in the digest from log format 11 on; a snapshot that
// holds them at an older log format, or out of bounds, is refused.
func TestHeldConfigSnapshot(t *testing.T) {
	s := NewState()
	s.logFormat = HeldConfigFormat
	s.config = &pb.JournalConfig{EventsPerSegment: 4, SegmentBytes: 1 << 30, SessionIdleTimeoutSeconds: 60, MaxSegments: 9, MaxEvents: 100, Held: true}
	r, _ := roundTrip(t, s)
	if !proto.Equal(r.JournalConfig(), s.config) {
		t.Fatalf("restored %v, want %v", r.JournalConfig(), s.config)
	}
	if r.Hash() != s.Hash() {
		t.Fatal("restored state hashes differently")
	}
	h := s.Hash()
	for name, mutate := range map[string]func(*pb.JournalConfig){
		"held":         func(c *pb.JournalConfig) { c.Held = false },
		"max segments": func(c *pb.JournalConfig) { c.MaxSegments++ },
		"max events":   func(c *pb.JournalConfig) { c.MaxEvents++ },
	} {
		o := s.config
		s.config = proto.CloneOf(o)
		mutate(s.config)
		if s.Hash() == h {
			t.Errorf("%s does not change the digest", name)
		}
		s.config = o
	}

	corrupt := func(name string, mutate func(*State)) {
		t.Helper()
		st := NewState()
		st.logFormat = HeldConfigFormat
		st.config = proto.CloneOf(s.config)
		mutate(st)
		var buf bytes.Buffer
		if err := captureSnapshot(st).write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("%s: %v, want ErrSnapshotCorrupt", name, err)
		}
	}
	corrupt("held before format 11", func(st *State) {
		st.logFormat = LeaderClockFormat
		st.config.MaxSegments, st.config.MaxEvents = 0, 0
	})
	corrupt("trim bounds before format 11", func(st *State) {
		st.logFormat = LeaderClockFormat
		st.config.Held = false
	})
	corrupt("held out of bounds", func(st *State) { st.config.EventsPerSegment = MaxEventsPerSegment + 1 })
}

// TestRestoreFormat10Fixture reads a snapshot written by the build before
// the journal settings held by the cluster (log format 10, snapshot format
// 5): it restores to the state that produced it (not held, no trim
// bounds) and is rewritten unchanged; then a SET_FORMAT to 11, the seed
// (SET_JOURNAL_CONFIG) and appends give the restored state and one that
// replayed the whole history the same state, digest for digest, with the
// seeded settings held and segments rolling by them.
func TestRestoreFormat10Fixture(t *testing.T) {
	logs := format10FixtureLogs(t)
	old := restoreFixtureFile(t, "testdata/snapshot-v5-log10.bin", 5, logs, func(s *State) {
		c := s.JournalConfig()
		if s.LogFormat() != LeaderClockFormat || c.Held || c.MaxSegments != 0 || c.EventsPerSegment != 8 || c.SessionIdleTimeoutSeconds != 600 || s.SessionClock() == 0 {
			t.Fatalf("fixture restored wrong: format %d, config %v, clock %d", s.LogFormat(), c, s.SessionClock())
		}
		if _, ok := s.consumers["fixture-reader"]; !ok {
			t.Fatal("the fixture's consumer is missing")
		}
	})
	ref := New(nil)
	ref.ApplyBatch(logs)
	idx := uint64(len(logs))
	u := func(v uint64) *uint64 { return &v }
	entries := []struct {
		version uint32
		typ     pb.CommandType
		m       proto.Message
	}{
		{LeaderClockFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: HeldConfigFormat}},
		{HeldConfigFormat, pb.CommandType_COMMAND_TYPE_SET_JOURNAL_CONFIG, &pb.SetJournalConfigCommand{EventsPerSegment: u(3), SegmentBytes: u(1 << 20), SessionIdleTimeoutSeconds: u(600), MaxSegments: u(50), MaxEvents: u(0)}},
	}
	for i := range 7 {
		entries = append(entries, struct {
			version uint32
			typ     pb.CommandType
			m       proto.Message
		}{HeldConfigFormat, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{op("", 0, 0, fmt.Sprint("held-", i))}}})
	}
	for _, e := range entries {
		idx++
		at := int64(idx) * int64(time.Second)
		data, err := EncodeCommandAt(e.version, e.typ, e.m, at, at)
		if err != nil {
			t.Fatal(err)
		}
		l := &raft.Log{Index: idx, Type: raft.LogCommand, Data: data}
		old.Apply(l)
		ref.Apply(l)
	}
	var ho, hr [32]byte
	old.View(func(s *State) {
		ho = s.Hash()
		c := s.JournalConfig()
		if !c.Held || c.EventsPerSegment != 3 || c.MaxSegments != 50 {
			t.Fatalf("after the upgrade: config %v", c)
		}
		// 7 events: the open segment seals at the first that finds it at
		// or past 3, the rest fill at least two new segments of at most 3.
		if segs := s.Segments(); len(segs) < 3 || segs[len(segs)-1].Events > 3 || segs[len(segs)-2].Events != 3 {
			t.Fatalf("segments after the upgrade do not roll by 3: %v", segs[len(segs)-3:])
		}
	})
	ref.View(func(s *State) { hr = s.Hash() })
	if ho != hr {
		t.Fatal("the restored fixture and the replayed history disagree after the upgrade")
	}
}
