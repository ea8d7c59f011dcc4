package coordserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
)

// TestTrimCrashAtEachStep stops a trim at each of its steps as a crash
// would (mds_kill_journal_expire_at), kills the members, restarts them, and
// checks that replay from snapshot + log converges: the trim happened
// entirely or not at all, the retained events are byte-identical to what
// was appended, the consumer's ack survives, the positions are ordered, all
// members agree, and the journal keeps working (trim again, append on).
func TestTrimCrashAtEachStep(t *testing.T) {
	t.Parallel()
	const (
		eps    = 10  // events per segment
		events = 100 // appended before the trim
		acked  = 55  // the consumer holds segments from seq 51 on
	)
	cases := []struct {
		step      string
		killAll   bool // whole cluster (power loss) or only the leader
		committed bool // the TRIM entry was committed before the crash
	}{
		{"trim-before-snapshot", true, false},
		{"trim-after-snapshot", true, false},
		{"trim-after-apply", true, true},
		{"trim-after-resnapshot", true, true},
		{"trim-after-snapshot", false, false},
		{"trim-after-apply", false, true},
	}
	for _, tcase := range cases {
		name := tcase.step + "/kill-leader"
		if tcase.killAll {
			name = tcase.step + "/kill-all"
		}
		t.Run(name, func(t *testing.T) {
			var armed atomic.Bool
			var hit atomic.Int32
			tc := newTestCluster(t, 3, smallSegments(eps, 0), func(i int, c *Config) {
				c.crashAt = func(step string) bool {
					if armed.Load() && step == tcase.step {
						hit.Add(1)
						return true
					}
					return false
				}
			})
			waitJournalConfig(t, tc, eps)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := tc.client(ctx)
			if _, err := c.Journal().Consumers().Register(ctx, "indexer", 0); err != nil {
				t.Fatal(err)
			}
			want := map[uint64][]byte{}
			for i := 0; i < events; i++ {
				p := []byte(fmt.Sprintf("event-%03d", i))
				seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: p})
				if err != nil {
					t.Fatal(err)
				}
				want[seqs[0]] = p
			}
			if _, err := c.Journal().Consumers().Ack(ctx, "indexer", acked); err != nil {
				t.Fatal(err)
			}
			leader := tc.waitLeader()
			armed.Store(true)
			_, _, err := c.Journal().Trim(ctx, 0)
			if err == nil || hit.Load() == 0 {
				t.Fatalf("trim did not stop at %s: err %v, hits %d", tcase.step, err, hit.Load())
			}
			armed.Store(false)
			c.Close()

			// The crash: what is on disk now is all there is.
			if tcase.killAll {
				var wg sync.WaitGroup
				for i := range tc.servers {
					wg.Add(1)
					go func() { defer wg.Done(); tc.kill(i) }()
				}
				wg.Wait()
				for i := range tc.servers {
					tc.start(i)
				}
			} else {
				tc.restart(leader)
			}
			tc.waitLeader()
			tc.waitConverged()

			wantTrimmed := uint64(1)
			if tcase.committed {
				wantTrimmed = 51 // segments [1..10] … [41..50] are past the consumer
			}
			c2 := tc.client(ctx)
			defer c2.Close()
			eventually(t, 20*time.Second, "every member replayed to the same state", func() bool {
				for i := range tc.servers {
					var first, next uint64
					tc.server(i).fsm.View(func(st *fsm.State) { first, next = st.FirstSeq(), st.NextSeq() })
					if first != wantTrimmed || next != events+1 {
						return false
					}
				}
				return true
			})
			for i := range tc.servers {
				checkPositions(t, tc.server(i))
				checkRetained(t, tc.server(i), wantTrimmed, want)
			}
			r, err := c2.Cluster().Verify(ctx)
			if err != nil || !r.Consistent {
				t.Fatalf("verify after replay: %+v, %v", r, err)
			}
			cs, err := c2.Journal().Consumers().List(ctx)
			if err != nil || len(cs) != 1 || cs[0].AckedSeq != acked {
				t.Fatalf("consumer after replay: %+v, %v", cs, err)
			}

			// The journal goes on: the trim completes, appends continue at 101.
			trimmed, _, err := c2.Journal().Trim(ctx, 0)
			if err != nil || trimmed != 51 {
				t.Fatalf("trim after replay: trimmed_pos %d, %v", trimmed, err)
			}
			seqs, err := c2.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("after")})
			if err != nil || seqs[0] != events+1 {
				t.Fatalf("append after replay: %v, %v", seqs, err)
			}
			if _, _, err := c2.Journal().Read(ctx, 1, 1); !errors.Is(err, client.ErrOutOfRange) {
				t.Fatalf("read below trimmed_pos: %v", err)
			}
		})
	}
}

// checkRetained: member s holds exactly the seqs [first, len(want)] with
// the appended payloads.
func checkRetained(t *testing.T, s *Server, first uint64, want map[uint64][]byte) {
	t.Helper()
	s.fsm.View(func(st *fsm.State) {
		evs := st.Read(first, len(want)+1)
		if uint64(len(evs)) != uint64(len(want))-first+1 {
			t.Fatalf("%s: %d events retained from %d, want %d", s.ID(), len(evs), first, uint64(len(want))-first+1)
		}
		for i, e := range evs {
			seq := first + uint64(i)
			if e.Seq != seq || !bytes.Equal(e.Payload, want[seq]) {
				t.Fatalf("%s: event %d is seq %d %q, want %q", s.ID(), seq, e.Seq, e.Payload, want[seq])
			}
		}
	})
}

// TestRestartWithoutLeaderStopsAtSnapshot is design §J8 (f): a member
// restarted while no leader can be elected restores its snapshot and goes
// no further (the commit index is not persisted, so the entries after the
// snapshot are not applied yet), and it does not claim to be ready. Once
// the others are back it replays the rest and becomes ready.
func TestRestartWithoutLeaderStopsAtSnapshot(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.client(ctx)
	appendN := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(50)
	tc.waitConverged()
	for i := range tc.servers {
		if err := tc.server(i).raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	appendN(30)
	tc.waitConverged()
	c.Close()
	for i := range tc.servers {
		tc.kill(i)
	}

	tc.start(0)
	s := tc.server(0)
	// It campaigns (and cannot win): by then it has restored its snapshot.
	eventually(t, 10*time.Second, "the lone member to campaign", func() bool { return raftStateOf(s) == raft.Candidate })
	var next uint64
	s.fsm.View(func(st *fsm.State) { next = st.NextSeq() })
	if next != 51 {
		t.Fatalf("lone member applied up to seq %d, want the snapshot's 50", next-1)
	}
	if err := s.ready(); err == nil {
		t.Fatal("lone member without a leader claims to be ready")
	}

	tc.start(1)
	tc.start(2)
	tc.waitLeader()
	eventually(t, 20*time.Second, "member 0 to replay the rest and be ready", func() bool {
		s.fsm.View(func(st *fsm.State) { next = st.NextSeq() })
		return next == 81 && s.ready() == nil
	})
	tc.waitConverged()
}

// TestLogFormatUpgradeWaitsForEveryVoter: the leader raises the log format
// only when every voter's build reads the new one. A member that claims the
// old format holds the cluster at format 1; once it comes back with the new
// build, the leader proposes SET_FORMAT, every member applies it, and the
// entries after it are written in the newest format.
func TestLogFormatUpgradeWaitsForEveryVoter(t *testing.T) {
	t.Parallel()
	old := func(i int, c *Config) {
		if i == 2 {
			c.maxLogFormat = 1
		}
	}
	tc := newTestCluster(t, 3, old)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	registered := func(id string, format uint32) func() bool {
		return func() bool {
			l := tc.server(tc.waitLeader())
			var ok bool
			l.fsm.View(func(st *fsm.State) {
				n := 0
				for _, m := range st.Members() {
					n++
					if m.Id == id && m.MaxLogFormat != format {
						return
					}
				}
				ok = n == 3
			})
			return ok
		}
	}
	eventually(t, 20*time.Second, "all members registered, c3 with format 1", registered("c3", 1))
	l := tc.server(tc.waitLeader())
	l.upgradeLogFormat()
	c := tc.client(ctx)
	defer c.Close()
	if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Journal().Positions(ctx)
	if err != nil || p.LogFormat != 1 {
		t.Fatalf("with an old voter: log format %d, %v", p.LogFormat, err)
	}
	if v := lastEntryVersion(t, l); v != 1 {
		t.Fatalf("with an old voter the leader wrote format %d", v)
	}

	// c3 is upgraded: same data, new build.
	tc.cfgs[2].maxLogFormat = 0
	tc.restart(2)
	eventually(t, 20*time.Second, "c3 registered with the newest format", registered("c3", fsm.CommandVersion))
	eventually(t, 20*time.Second, "every member at the newest log format", func() bool {
		for i := range tc.servers {
			var f uint32
			tc.server(i).fsm.View(func(st *fsm.State) { f = st.LogFormat() })
			if f != fsm.CommandVersion {
				return false
			}
		}
		return true
	})
	seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("v2")})
	if err != nil {
		t.Fatal(err)
	}
	l = tc.server(tc.waitLeader())
	if v := lastEntryVersion(t, l); v != fsm.CommandVersion {
		t.Fatalf("after the upgrade the leader wrote format %d", v)
	}
	tc.waitConverged()
	evs, _, err := c.Journal().Read(ctx, 1, 10)
	if err != nil || len(evs) != 2 || string(evs[0].Payload) != "v1" || string(evs[1].Payload) != "v2" || evs[1].Seq != seqs[0] {
		t.Fatalf("events across the format boundary: %+v, %v", evs, err)
	}
	if r, err := c.Cluster().Verify(ctx); err != nil || !r.Consistent {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}

// lastEntryVersion is the envelope version of the newest command entry in
// s's Raft log.
func lastEntryVersion(t *testing.T, s *Server) uint32 {
	t.Helper()
	last, err := s.node.Store().LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := last; i > 0; i-- {
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
		return cmd.Version
	}
	t.Fatal("no command entry in the log")
	return 0
}
