package coordserver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
)

// BenchmarkRestartReplay measures how fast a restarted coordinator rebuilds
// a journal of LOGBOOK_REPLAY_EVENTS events (default 1,000,000, 256-byte
// payloads), from New to having applied everything the leader had, in three
// cases: from-snapshot (the member snapshotted just before it stopped, so
// restart is one snapshot restore), from-log (snapshots off: every entry is
// replayed from the Raft log), and mixed (default snapshot settings). Run:
//
//	go test -run '^$' -bench BenchmarkRestartReplay -benchtime 1x ./internal/coordserver
func BenchmarkRestartReplay(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("LOGBOOK_REPLAY_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, run := range replayRuns() {
		store, mode := run[0], run[1]
		b.Run(store+"/"+mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tc := newBenchCluster(b, n, func(i int, c *Config) {
					c.LogStore = store
					if mode == "from-log" {
						c.Raft.SnapshotThreshold = 1 << 62
						c.Raft.SnapshotInterval = 24 * time.Hour
					}
				})
				leader := tc.waitLeader()
				f := tc.followers(leader)[0]
				var target uint64
				tc.server(leader).fsm.View(func(st *fsm.State) { target = st.AppliedIndex() })
				s := tc.server(f)
				eventually(b, 5*time.Minute, "the follower to apply everything", func() bool { return s.fsm.AppliedIndex() >= target })
				if mode == "from-snapshot" {
					if err := s.raft.Snapshot().Error(); err != nil {
						b.Fatal(err)
					}
					if list, err := s.node.Snapshots().List(); err == nil && len(list) > 0 {
						b.ReportMetric(float64(list[0].Size)/float64(n), "snapshot-bytes/event")
					}
				}
				tc.kill(f)
				b.StartTimer()
				start := time.Now()
				tc.start(f)
				s = tc.server(f)
				eventually(b, 5*time.Minute, "the restarted member to catch up", func() bool { return s.fsm.AppliedIndex() >= target })
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
				b.ReportMetric(elapsed.Seconds(), "s-to-caught-up")
				tc.closeAll()
			}
		})
	}
}

// replayRuns lists the {log store, mode} pairs to measure;
// LOGBOOK_REPLAY_STORE=wal|boltdb keeps one store.
func replayRuns() [][2]string {
	var out [][2]string
	for _, store := range []string{LogStoreWAL, LogStoreBoltDB} {
		if only := os.Getenv("LOGBOOK_REPLAY_STORE"); only != "" && only != store {
			continue
		}
		for _, mode := range []string{"from-snapshot", "from-log", "mixed"} {
			out = append(out, [2]string{store, mode})
		}
	}
	return out
}

// newBenchCluster is a 3-member cluster holding n events, appended on the
// streaming path.
func newBenchCluster(b *testing.B, n int, opts ...clusterOpt) *testCluster {
	keepAll := func(i int, c *Config) { c.Journal.MaxSegments = 0 }
	tc := newTestCluster(b, 3, append([]clusterOpt{keepAll}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: tc.endpoints()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, 256)
	const window = 4096
	futs := make([]*client.Future, 0, window)
	for i := 0; i < n; i++ {
		futs = append(futs, c.Journal().Submit(client.Event{Type: "replay", Payload: payload}))
		if len(futs) == window || i == n-1 {
			for _, f := range futs {
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(fmt.Errorf("append: %w", err))
				}
			}
			futs = futs[:0]
		}
	}
	return tc
}
