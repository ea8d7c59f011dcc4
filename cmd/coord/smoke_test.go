package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	lbbench "github.com/logbookhq/logbook/bench" // "bench" is a result below
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/testports"
)

// freePorts hands out ports claimed for this test process
// (internal/testports; gossip needs the UDP port as well), so tests never
// touch the default 7000-7300 range.
func freePorts(t *testing.T) coordserver.Ports {
	return coordserver.PortsFrom(func(udp bool) string { return testports.Addr(t, udp) })
}

// startDevFreePorts starts a dev cluster on free ports in a new data dir.
// A port found free can be taken before the member binds it (another test
// process's outgoing connection gets it as its local port), so a bind
// failure is retried on new ports and a new data dir, a few times.
func startDevFreePorts(t *testing.T, opts devOptions) (*devCluster, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		opts.DataDir, opts.Ports = t.TempDir(), freePorts(t)
		d, err := startDev(opts)
		// memberlist does not wrap its listen error, so match the text.
		if err == nil || attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return d, err
		}
		t.Logf("attempt %d: %v; retrying on other ports", attempt, err)
	}
}

// startTestCluster starts a 3-member dev cluster on free ports, waits until
// it is ready and stops it when the test ends.
func startTestCluster(t *testing.T) (*devCluster, client.ClusterStatus) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 3-member cluster")
	}
	d, err := startDevFreePorts(t, devOptions{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, func(id string, err error) { t.Errorf("%s stopped: %v", id, err) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("cluster did not stop within 30s")
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	st, err := d.waitReady(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderID == "" {
		t.Fatal("no leader")
	}
	return d, st
}

// coordRunner runs coord and fails the test unless it exits with want.
func coordRunner(t *testing.T) func(want int, args ...string) (stdout, stderr string) {
	return func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, stderr := run(t, nil, args...)
		if code != want {
			t.Fatalf("coord %s: exit %d, want %d; stdout %q stderr %q", strings.Join(args, " "), code, want, out, stderr)
		}
		return out, stderr
	}
}

// decodeJSON unmarshals out into v or fails the test.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
}

func TestDevClusterSmoke(t *testing.T) {
	d, _ := startTestCluster(t)
	eps := strings.Join(d.endpoints(), ",")
	first := d.endpoints()[0]
	runCoord := coordRunner(t)
	coord := func(want int, args ...string) string {
		t.Helper()
		out, _ := runCoord(want, args...)
		return out
	}
	decode := func(out string, v any) {
		t.Helper()
		decodeJSON(t, out, v)
	}

	var appended struct{ Seqs []uint64 }
	decode(coord(0, "journal", "append", "--type", "t", "--payload", "hi", "--json", "--endpoints", first), &appended)
	if len(appended.Seqs) != 1 || appended.Seqs[0] < 1 {
		t.Fatalf("append: %v", appended.Seqs)
	}
	seq := appended.Seqs[0]
	// A follower endpoint works as well (the SDK finds the leader).
	decode(coord(0, "journal", "append", "--type", "t", "--payload", "again", "--json", "--endpoints", d.endpoints()[2]), &appended)
	if len(appended.Seqs) != 1 || appended.Seqs[0] != seq+1 {
		t.Fatalf("second append: %v after %d", appended.Seqs, seq)
	}

	var read struct {
		Events  []map[string]any `json:"events"`
		NextSeq uint64           `json:"next_seq"`
		End     string           `json:"end"`
	}
	decode(coord(0, "journal", "read", "--from", strconv.FormatUint(seq, 10), "--max", "10", "--json", "--endpoints", eps), &read)
	evs := read.Events
	if len(evs) != 2 || read.NextSeq != seq+2 || read.End != "safe_pos" {
		t.Fatalf("read: %+v", read)
	}
	if evs[0]["seq"] != float64(seq) || evs[0]["type"] != "t" || evs[0]["payload"] != "hi" || evs[0]["client_id"] == "" || len(evs[0]) != 4 {
		t.Fatalf("event: %v", evs[0])
	}
	if table := coord(0, "journal", "read", "--from", "1", "--consistency", "stale", "--endpoints", first); !strings.Contains(table, "hi") || !strings.Contains(table, "SEQ") {
		t.Fatalf("read table: %q", table)
	}

	var status struct {
		ClusterID string `json:"cluster_id"`
		Leader    string `json:"leader"`
		Term      uint64 `json:"term"`
		Members   []map[string]any
	}
	// A leader election under load (race detector, 2 cores) can leave the
	// cluster leaderless for a moment: poll for a status that names one.
	eventually(t, "a status with a leader", func() error {
		code, out, _ := run(t, nil, "status", "--json", "--endpoints", first)
		if code != 0 || json.Unmarshal([]byte(out), &status) != nil || status.Leader == "" {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
	if status.ClusterID != "logbook" || status.Leader == "" || status.Term == 0 || len(status.Members) != 3 {
		t.Fatalf("status: %+v", status)
	}
	for _, m := range status.Members {
		if len(m) != 6 || m["suffrage"] != "voter" || m["grpc_addr"] == "" || m["id"] == "" {
			t.Errorf("member: %v", m)
		}
	}
	var rawStatus map[string]any
	decode(coord(0, "status", "--json", "--endpoints", first), &rawStatus)
	if w, ok := rawStatus["warnings"].([]any); !ok || len(w) != 0 {
		t.Errorf("status warnings: want [], got %#v", rawStatus["warnings"])
	}
	if out := coord(0, "members", "--endpoints", first); !strings.Contains(out, status.Leader) || !strings.Contains(out, "SUFFRAGE") {
		t.Fatalf("members table: %q", out)
	}

	if out := coord(0, "health", "--endpoints", first); strings.TrimSpace(out) != "SERVING" {
		t.Fatalf("health: %q", out)
	}
	eventually(t, "health --ready to report SERVING", func() error {
		code, out, _ := run(t, nil, "health", "--ready", "--endpoints", first)
		if code != 0 || strings.TrimSpace(out) != "SERVING" {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
	coord(1, "status", "--endpoints", first, "--cluster-id", "another")

	var snap struct{ Index, Term uint64 }
	decode(coord(0, "snapshot", "--json", "--endpoints", first), &snap)
	if snap.Index == 0 || snap.Term == 0 {
		t.Fatalf("snapshot: %+v", snap)
	}

	// The result's numbers (and its spread flag, which decodes as 1 or 0).
	benchJSON := func(args ...string) map[string]float64 {
		var raw map[string]any
		decode(coord(0, append([]string{"bench", "journal", "--size", "16", "--warmup", "100ms", "--json", "--endpoints", eps}, args...)...), &raw)
		out := map[string]float64{}
		for k, v := range raw {
			switch v := v.(type) {
			case float64:
				out[k] = v
			case bool:
				if v {
					out[k] = 1
				} else {
					out[k] = 0
				}
			}
		}
		return out
	}
	bench := benchJSON("--clients", "2", "--duration", "2s")
	for _, k := range []string{"ops_per_sec", "p50_ms", "p99_ms", "p999_ms", "errors", "spread", "cpu_s", "cpu_us_per_op"} {
		if _, ok := bench[k]; !ok {
			t.Errorf("bench result lacks %s: %v", k, bench)
		}
	}
	// The load generator's own CPU over the measured 2 s: calls cost CPU.
	if bench["ops_per_sec"] <= 0 || bench["p50_ms"] <= 0 || bench["spread"] != 0 || bench["cpu_s"] <= 0 || bench["cpu_us_per_op"] <= 0 {
		t.Errorf("bench: %v", bench)
	}
	// Clients sharing connections (etcd's --conns): 4 clients over 2 SDK clients.
	bench = benchJSON("--clients", "4", "--conns", "2", "--duration", "1s")
	if bench["ops_per_sec"] <= 0 || bench["errors"] != 0 || bench["conns"] != 2 || bench["clients"] != 4 {
		t.Errorf("bench --conns 2: %v", bench)
	}
	// Spread over the members: SDK client i on endpoint i mod n.
	bench = benchJSON("--clients", "6", "--conns", "3", "--duration", "1s", "--spread")
	if bench["ops_per_sec"] <= 0 || bench["errors"] != 0 || bench["spread"] != 1 {
		t.Errorf("bench --spread: %v", bench)
	}
	if _, ok := bench["timeline"]; ok {
		t.Errorf("a timeline without --timeline: %v", bench)
	}
	// Second by second: the seconds' calls add up to the run's, each
	// second's percentiles are ordered.
	var tl struct {
		Ops      int64                    `json:"ops"`
		Timeline []lbbench.TimelineSecond `json:"timeline"`
	}
	decode(coord(0, "bench", "journal", "--size", "16", "--warmup", "100ms", "--json", "--endpoints", eps, "--clients", "2", "--duration", "2s", "--timeline"), &tl)
	var sum int64
	for i, sec := range tl.Timeline {
		sum += sec.Ops
		if sec.Second != i+1 || sec.Ops > 0 && (sec.P50Ms <= 0 || sec.P50Ms > sec.P99Ms || sec.P99Ms > sec.MaxMs) {
			t.Errorf("timeline second %d: %+v", i+1, sec)
		}
	}
	if len(tl.Timeline) != 2 || tl.Ops == 0 || sum != tl.Ops {
		t.Errorf("timeline of a 2 s run with %d calls: %d seconds, %d calls: %+v", tl.Ops, len(tl.Timeline), sum, tl.Timeline)
	}
}

func TestHealthUnreachableExit1(t *testing.T) {
	addr := testports.Addr(t, false) // claimed, and nothing listens on it
	code, _, stderr := run(t, nil, "health", "--endpoints", addr, "--timeout", "500ms")
	if code != 1 || !strings.HasPrefix(stderr, "coord: health "+addr) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// startTestDev starts a dev cluster for the test, stopped when it ends, and
// returns once a leader is ready, with a context that ends after limit
// (or with the test).
func startTestDev(t *testing.T, opts devOptions, limit time.Duration) (*devCluster, context.Context) {
	t.Helper()
	d, err := startDevFreePorts(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, func(id string, err error) { t.Errorf("%s stopped: %v", id, err) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, limit)
	t.Cleanup(wcancel)
	if _, err := d.waitReady(wctx); err != nil {
		t.Fatal(err)
	}
	return d, wctx
}

// TestDevNodesJoin: coord dev with storage nodes: every node registers,
// heartbeats and sends its full report; coord nodes --json shows them live
// and the leader out of safe mode.
func TestDevNodesJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d, _ := startTestDev(t, devOptions{Members: 1, Nodes: 2, HeartbeatInterval: 100 * time.Millisecond}, 30*time.Second)
	eventually(t, "both nodes live with a full report", func() error {
		code, out, stderr := run(t, nil, "nodes", "--json", "--endpoints", d.endpoints()[0])
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		var got nodesJSON
		decodeJSON(t, out, &got)
		if len(got.Nodes) != 2 || got.SafeMode {
			return fmt.Errorf("%+v", got)
		}
		for _, n := range got.Nodes {
			if !n.Live || n.Dead || !n.FullReport || n.CapacityBytes == 0 || n.Gossip != "alive" {
				return fmt.Errorf("%+v", n)
			}
		}
		return nil
	})
	code, out, stderr := run(t, nil, "status", "--json", "--endpoints", d.endpoints()[0])
	var st statusJSON
	decodeJSON(t, out, &st)
	if code != 0 || st.Storage == nil || *st.Storage != (storageJSON{Nodes: 2, Live: 2}) {
		t.Fatalf("status: exit %d, storage %+v, stderr %s", code, st.Storage, stderr)
	}
	if _, out, _ := run(t, nil, "status", "--endpoints", d.endpoints()[0]); !strings.Contains(out, "2 (2 live, 0 stale, 0 dead)") || !strings.Contains(out, "safe mode") {
		t.Fatalf("status table: %s", out)
	}
}
