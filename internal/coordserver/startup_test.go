package coordserver

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
)

// TestRestartedFollowerReadiness restarts a follower holding a journal and
// checks two things. Its readiness: Raft's heartbeats carry no commit
// index, so a restarted follower knows its leader, hears from it and has
// applied all it knows to be committed before it knows what the leader
// has committed; it must not report ready (/readyz) until it has the
// leader's read index and has applied that far. And its startup replay:
// coord status's figures for it cover exactly the events it held.
func TestRestartedFollowerReadiness(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := tc.client(ctx)
	defer c.Close()
	const calls, per = 30, 10
	for i := 0; i < calls; i++ {
		evs := make([]client.Event, per)
		for j := range evs {
			evs[j] = client.Event{Type: "t", Payload: []byte(strings.Repeat("p", 100))}
		}
		if _, err := c.Journal().Append(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitConverged()
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	if r := tc.server(f).startupReplay(time.Now()); r != nil {
		t.Fatalf("a member that started empty reports a startup replay: %v", r)
	}

	before := tc.server(f).fsm.AppliedIndex() // what its log holds
	var blocked atomic.Bool
	blocked.Store(true)
	tc.cfgs[f].leaderIndexBlocked = blocked.Load
	tc.restart(f)
	s := tc.server(f)
	readyz := func() int {
		resp, err := http.Get("http://" + s.HTTPAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// It rejoins and applies everything (what readiness used to wait
	// for), but without the leader's read index it is not ready.
	want := tc.server(leader).fsm.AppliedIndex()
	eventually(t, 20*time.Second, "the follower to apply everything", func() bool {
		_, id := s.raft.LeaderWithID()
		lc := s.raft.LastContact()
		return id != "" && s.raft.State() == raft.Follower && !lc.IsZero() && time.Since(lc) < s.cfg.Raft.HeartbeatTimeout &&
			s.fsm.AppliedIndex() >= want && s.fsm.AppliedIndex() >= s.raft.CommitIndex()
	})
	if err := s.ready(); err == nil || !strings.Contains(err.Error(), "leader's read index") {
		t.Fatalf("ready without the leader's read index: %v", err)
	}
	if code := readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without the leader's read index: %d", code)
	}

	var r *pb.StartupReplay
	eventually(t, 20*time.Second, "the startup replay to end", func() bool {
		r = s.startupReplay(time.Now())
		return r.GetCaughtUp()
	})
	if r == nil || !r.CaughtUp || r.SnapshotEvents+r.LogEvents != calls*per || r.LastIndex < before || r.Seconds < r.SnapshotSeconds || r.Seconds <= 0 ||
		r.SnapshotIndex+r.LogEntries < r.LastIndex {
		t.Fatalf("startup replay: %v (its applied index before the restart %d)", r, before)
	}
	// Its log's replay began with the first entry applied: after the
	// snapshot's restore, before it caught up.
	if r.LogEntries > 0 && (r.LogWaitSeconds < r.SnapshotSeconds || r.LogWaitSeconds > r.Seconds || r.LogWaitSeconds <= 0) {
		t.Fatalf("startup replay's first log apply at %.3fs, outside [%.3fs, %.3fs]", r.LogWaitSeconds, r.SnapshotSeconds, r.Seconds)
	}
	// The events applied by then are some of the log's.
	if r.LogWaitEvents > r.LogEvents {
		t.Fatalf("startup replay: %d of %d log events applied at the first wake-up", r.LogWaitEvents, r.LogEvents)
	}
	// Status shows it once the member is registered again.
	eventually(t, 20*time.Second, "status to show the restarted member's startup replay", func() bool {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Members {
			switch {
			case m.ID == tc.cfgs[f].ID && m.StartupReplay == nil:
				return false
			case m.ID == tc.cfgs[f].ID && (m.StartupReplay.SnapshotEvents+m.StartupReplay.LogEvents != calls*per || !m.StartupReplay.CaughtUp):
				t.Fatalf("status of the restarted member: %v", m)
			case m.ID != tc.cfgs[f].ID && m.StartupReplay != nil:
				t.Fatalf("status of a member that started empty: %v", m)
			}
		}
		return true
	})

	blocked.Store(false)
	eventually(t, 20*time.Second, "the follower to be ready", func() bool { return s.ready() == nil && readyz() == http.StatusOK })
	if got := s.leaderIndex.Load(); got < want || s.fsm.AppliedIndex() < got {
		t.Fatalf("ready with the leader's read index %d, applied %d (the leader had applied %d)", got, s.fsm.AppliedIndex(), want)
	}
}
