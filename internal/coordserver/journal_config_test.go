package coordserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

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
	if !proto.Equal(resp.Config, apiJournalConfig(changed)) || resp.LogFormat != fsm.CommandVersion {
		t.Fatalf("SetConfig answered %v at format %d, want %v at %d", resp.Config, resp.LogFormat, changed, fsm.CommandVersion)
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
