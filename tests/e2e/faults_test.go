//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
)

const (
	compose3 = "docker-compose.yml"
	compose5 = "docker-compose-5.yml"
)

// TestKillLeaderDuringAppends: SIGKILL the leader under load; a new leader
// takes over, the killed member restarts and catches up, and every member
// holds every acknowledged append exactly once, at its seq.
func TestKillLeaderDuringAppends(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	l := startLoad(cl, 4)
	l.waitCount(300, time.Minute)

	old := cl.leader()
	cl.logf("SIGKILL leader %s after %d acknowledged appends", old, l.count())
	if err := cl.kill(old); err != nil {
		t.Fatal(err)
	}
	cl.logf("new leader %s", cl.leader(cl.others(old)...))
	l.waitMore(1000, time.Minute)

	cl.restart(old)
	cl.waitRejoined(old)
	l.waitMore(300, time.Minute)
	l.stopAndVerify()
}

// TestFiveLoseTwo: a 5-member cluster loses its leader and a follower at
// once; the three left elect a leader among themselves, appends succeed and
// reads are linearizable; restarted, all five converge.
func TestFiveLoseTwo(t *testing.T) {
	cl := startCluster(t, compose5, 5)
	l := startLoad(cl, 3)
	l.waitCount(300, time.Minute)

	leader := cl.leader()
	follower := cl.others(leader)[0]
	before := cl.ips(leader, follower)
	cl.logf("SIGKILL leader %s and follower %s after %d acknowledged appends", leader, follower, l.count())
	for _, s := range []string{leader, follower} {
		if err := cl.kill(s); err != nil {
			t.Fatal(err)
		}
	}
	survivors := cl.others(leader, follower)
	cl.logf("new leader %s", cl.leader(survivors...))
	l.waitMore(1000, time.Minute)
	checkLinearizableReads(t, cl, 50)
	l.stop()

	// Docker gives a started container the lowest free address, so starting
	// the one that had the higher address first makes the two swap: each
	// comes back at the address its peers' gossip holds for the other (CI
	// once met it by chance, and gossip refused both names for 40 s).
	first, second := leader, follower
	if addrLess(before[leader], before[follower]) {
		first, second = follower, leader
	}
	cl.restart(first, second)
	after := cl.ips(first, second)
	if after[first] == before[second] && after[second] == before[first] {
		cl.logf("%s and %s swapped addresses: %v -> %v", first, second, before, after)
	} else {
		cl.logf("addresses did not swap: %v -> %v", before, after)
	}
	cl.waitRejoined(leader, follower)
	cl.verify(l.ackedSeqs())
}

// checkLinearizableReads appends with one client and reads each event back
// at once with another (own connections, own session): a linearizable read
// that starts after an append was acknowledged must see it.
func checkLinearizableReads(t *testing.T, cl *cluster, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, _, err := cl.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, _, err := cl.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range n {
		payload := fmt.Sprintf("%s/linearizable/%d", cl.name, i)
		seqs, err := w.Journal().Append(ctx, client.Event{Type: "e2e", Payload: []byte(payload)})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		evs, info, err := r.Journal().Read(ctx, seqs[0], 1)
		if err != nil {
			t.Fatalf("linearizable read of seq %d: %v", seqs[0], err)
		}
		if len(evs) != 1 || evs[0].Seq != seqs[0] || string(evs[0].Payload) != payload || info.NextSeq <= seqs[0] {
			t.Fatalf("read of acknowledged seq %d (%q): got %+v, next seq %d", seqs[0], payload, evs, info.NextSeq)
		}
	}
	cl.logf("%d linearizable reads saw the append acknowledged just before", n)
}

// TestFollowerPartitionedByNetworkDisconnect: a follower is cut off the
// compose network while appends go on; they keep succeeding, and once
// reconnected the follower catches up and holds identical events.
func TestFollowerPartitionedByNetworkDisconnect(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	l := startLoad(cl, 3)
	l.waitCount(300, time.Minute)

	leader := cl.leader()
	f := cl.others(leader)[0]
	cl.logf("disconnect follower %s from %s (leader %s)", f, cl.network, leader)
	if err := cl.disconnect(f); err != nil {
		t.Fatal(err)
	}
	cl.waitUnhealthy(f)
	l.waitMore(1000, time.Minute)
	cl.logf("appends went on without %s; reconnecting", f)

	cl.reconnect(f)
	cl.waitRejoined(f)
	l.waitMore(300, time.Minute)
	l.stopAndVerify()
}

// TestPausedLeaderThenGracefulStop: the leader is frozen (docker pause)
// while appends go on, and wakes up deposed; then the next leader is stopped
// gracefully (SIGTERM: it hands leadership over) and started again. No
// acknowledged append is lost or doubled on any member.
func TestPausedLeaderThenGracefulStop(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	l := startLoad(cl, 3)
	l.waitCount(300, time.Minute)

	paused := cl.leader()
	cl.logf("pause leader %s", paused)
	if err := cl.pause(paused); err != nil {
		t.Fatal(err)
	}
	cl.logf("new leader %s", cl.leader(cl.others(paused)...))
	l.waitMore(1000, time.Minute)
	if err := cl.unpause(paused); err != nil {
		t.Fatal(err)
	}
	cl.waitRejoined(paused)

	stopped := cl.leader()
	cl.logf("docker stop leader %s", stopped)
	if err := cl.stop(stopped); err != nil {
		t.Fatal(err)
	}
	cl.logf("new leader %s", cl.leader(cl.others(stopped)...))
	l.waitMore(1000, time.Minute)
	cl.restart(stopped)
	cl.waitRejoined(stopped)
	l.waitMore(300, time.Minute)
	l.stopAndVerify()
}

// TestFailoverTime measures, over LOGBOOK_E2E_FAILOVER_TRIALS trials
// (default 10), the time from SIGKILL of the leader (its exit as the docker
// daemon recorded it) to the first acknowledged append sent after it, with
// one client appending in a loop. The figures are printed, not asserted;
// each trial must recover within 30 s.
func TestFailoverTime(t *testing.T) {
	trials := 10
	if v := os.Getenv("LOGBOOK_E2E_FAILOVER_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			t.Fatalf("LOGBOOK_E2E_FAILOVER_TRIALS=%q: want 1..100", v)
		}
		trials = n
	}
	cl := startCluster(t, compose3, 3)
	l := startLoad(cl, 1)

	var figures []time.Duration
	for i := range trials {
		l.waitMore(50, 30*time.Second)
		leader := cl.leader()
		if err := cl.kill(leader); err != nil {
			t.Fatal(err)
		}
		// From the moment the docker daemon saw the leader's process exit.
		// Only a call started after it surely reached a new leader (one
		// acknowledged later may have been answered before the exit), so
		// the figure includes one append's latency.
		died, err := cl.exitedAt(leader)
		if err != nil {
			t.Fatal(err)
		}
		var first time.Time
		err = poll(30*time.Second, 10*time.Millisecond, func(context.Context) error {
			var ok bool
			if first, ok = l.firstAckSentAfter(died); !ok {
				return fmt.Errorf("no append acknowledged since killing %s", leader)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("trial %d: %v", i+1, err)
		}
		d := first.Sub(died)
		figures = append(figures, d)
		cl.logf("trial %d: SIGKILL leader %s, first append acknowledged %d ms after it died", i+1, leader, d.Milliseconds())

		cl.restart(leader)
		cl.waitRejoined(leader)
	}
	l.stopAndVerify()

	sorted := slices.Clone(figures)
	slices.Sort(sorted)
	p50 := sorted[(len(sorted)+1)/2-1] // nearest rank
	ms := make([]int64, len(figures))
	for i, d := range figures {
		ms[i] = d.Milliseconds()
	}
	line := fmt.Sprintf("failover: trials=%d p50=%dms max=%dms", len(figures), p50.Milliseconds(), sorted[len(sorted)-1].Milliseconds())
	t.Logf("failover per trial (ms): %v", ms)
	t.Log(line)
	fmt.Println(line)
}
