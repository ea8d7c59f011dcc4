package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/logbookhq/logbook/client"
)

func TestEventJSONPayloadEncoding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"text", []byte("hello"), `{"seq":7,"type":"t","payload":"hello","client_id":"c"}`},
		{"unicode and controls", []byte("é\n\"x\""), `{"seq":7,"type":"t","payload":"é\n\"x\"","client_id":"c"}`},
		{"empty", nil, `{"seq":7,"type":"t","payload":"","client_id":"c"}`},
		{"binary", []byte{0xff, 0xfe, 0x00}, `{"seq":7,"type":"t","payload_base64":"//4A","client_id":"c"}`},
		{"truncated utf-8", []byte{'a', 0xc3}, `{"seq":7,"type":"t","payload_base64":"YcM=","client_id":"c"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(toEventJSON(client.StoredEvent{Seq: 7, Type: "t", Payload: tc.payload, ClientID: "c"}))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(got, want) {
				t.Fatalf("got %s, want %s", b, tc.want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestTablePayload(t *testing.T) {
	if got := tablePayload([]byte("a\tb\nc")); got != `a\tb\nc` {
		t.Errorf("controls: %q", got)
	}
	if got := tablePayload([]byte{0xff}); got != "base64:/w==" {
		t.Errorf("binary: %q", got)
	}
	long := tablePayload([]byte(strings.Repeat("ü", 200)))
	if n := utf8.RuneCountInString(long); n != tablePayloadWidth || !strings.HasSuffix(long, "…") {
		t.Errorf("long payload: %d runes %q", n, long)
	}
}

func TestWriteReplays(t *testing.T) {
	var b strings.Builder
	writeReplays(&b, []client.Member{{ID: "c1"}})
	if b.Len() != 0 {
		t.Fatalf("no member replayed: %q", b.String())
	}
	ms := []client.Member{
		{ID: "c1"},
		{ID: "c2", StartupReplay: &client.StartupReplay{SnapshotIndex: 8192, SnapshotEvents: 900000, SnapshotTime: time.Second, LastIndex: 9000, LogEntries: 808, LogEvents: 100000, Time: 4 * time.Second, CaughtUp: true, LogWait: 3500 * time.Millisecond}},
		{ID: "c3", StartupReplay: &client.StartupReplay{SnapshotIndex: 10, SnapshotEvents: 5, LastIndex: 99, Time: 2500 * time.Millisecond}},
		{ID: "c4", StartupReplay: &client.StartupReplay{SnapshotTime: 500 * time.Millisecond, LastIndex: 99, LogEntries: 99, LogEvents: 1000, Time: 2 * time.Second, CaughtUp: true}},
		// The whole log applied before the first wake-up: nothing timed
		// (this gave 39018952 events/s, 39018 events over 1 ms).
		{ID: "c5", StartupReplay: &client.StartupReplay{SnapshotTime: 200 * time.Millisecond, LastIndex: 300, LogEntries: 300, LogEvents: 39018, Time: 1001 * time.Millisecond, CaughtUp: true, LogWait: time.Second, LogWaitEvents: 39018}},
		// Part of it applied before: the rate is over the rest alone.
		{ID: "c6", StartupReplay: &client.StartupReplay{SnapshotTime: 200 * time.Millisecond, LastIndex: 300, LogEntries: 300, LogEvents: 39018, Time: 1100 * time.Millisecond, CaughtUp: true, LogWait: time.Second, LogWaitEvents: 30000}},
	}
	writeReplays(&b, ms)
	for _, want := range []string{
		"c2  1000000 events in 4.00s (250000 events/s): snapshot at index 8192 with 900000 events in 1.00s, then 808 log entries with 100000 events in 0.50s (200000 events/s) after 2.50s waiting for a commit index",
		"c3  replaying for 2.50s: snapshot at index 10 (5 events) restored, log up to index 99 to apply",
		"c4  1000 events in 2.00s (500 events/s): no snapshot, log opened in 0.50s, then 99 log entries with 1000 events",
		"c5  39018 events in 1.00s (38979 events/s): no snapshot, log opened in 0.20s, then 300 log entries with 39018 events after 0.80s waiting for a commit index (applied too quickly to time a rate)\n",
		"c6  39018 events in 1.10s (35471 events/s): no snapshot, log opened in 0.20s, then 300 log entries with 39018 events in 0.10s (90180 events/s) after 0.80s waiting for a commit index\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	if !strings.Contains(b.String(), "with 1000 events\n") {
		t.Errorf("c4 (no first-apply time) got a log rate:\n%s", b.String())
	}
	if strings.Contains(b.String(), "c1") {
		t.Errorf("a member without a replay is listed:\n%s", b.String())
	}
	if j := toMembersJSON(ms); j[0].StartupReplay != nil || j[1].StartupReplay.EventsPerSecond != 250000 || j[1].StartupReplay.LogEventsPerSecond != 200000 || j[1].StartupReplay.LogWaitSeconds != 3.5 || j[3].StartupReplay.LogEventsPerSecond != 0 || j[2].StartupReplay.EventsPerSecond != 0 || j[4].StartupReplay.LogEventsPerSecond != 0 || int(j[5].StartupReplay.LogEventsPerSecond) != 90180 {
		t.Errorf("json: %+v %+v %+v", j[0].StartupReplay, j[1].StartupReplay, j[2].StartupReplay)
	}
}

// The golden tests below pin the text the client commands print; the
// fixtures go through the same conversions as the commands' output.

// checkGolden fails t unless got is want, line by line.
func checkGolden(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("%s: line %d:\n got %q\nwant %q", what, i+1, gl, wl)
		}
	}
	t.Logf("%s: got\n%s", what, got)
}

// goldenStatus is a leader, a follower that replayed at its start, and a
// nonvoter that did not answer; and three storage nodes: live (one failed
// storage, caching), stale and dead.
func goldenStatus() (client.ClusterStatus, client.NodeList) {
	st := client.ClusterStatus{ClusterID: "lb-dev", LeaderID: "c1", LeaderGRPCAddr: "127.0.0.1:7100", Term: 4, CommitIndex: 1200, AppliedIndex: 1199,
		ResponderID: "c2", Warnings: []string{"behind on trimming: 9/4 segments"}, Members: []client.Member{
			{ID: "c1", RaftAddr: "127.0.0.1:7000", GRPCAddr: "127.0.0.1:7100", Suffrage: "voter", Healthy: true, Leader: true, AppliedIndex: 1200},
			{ID: "c2", RaftAddr: "127.0.0.1:7001", GRPCAddr: "127.0.0.1:7101", Suffrage: "voter", Healthy: true, LastContact: 12 * time.Millisecond, AppliedIndex: 1199,
				StartupReplay: &client.StartupReplay{SnapshotIndex: 1024, SnapshotEvents: 5000, SnapshotTime: 250 * time.Millisecond, LastIndex: 1100, LogEntries: 76, LogEvents: 900, Time: 1500 * time.Millisecond, CaughtUp: true, LogWait: time.Second}},
			{ID: "c3", RaftAddr: "127.0.0.1:7002", Suffrage: "nonvoter", LastContact: -time.Millisecond, Error: "connection refused"},
		}}
	nodes := client.NodeList{UnderReplicatedBlocks: 3, MissingBlocks: 1, PendingReplications: 2, Nodes: []client.Node{
		{ID: "n1", GRPCAddr: "127.0.0.1:7400", Live: true, Gossip: "alive", LastHeartbeat: 1500 * time.Millisecond, FullReport: true, Replicas: 12,
			Storages:      []client.Storage{{ID: "s1", Capacity: 10 << 30, Free: 4 << 30}, {ID: "s2", Capacity: 2 << 30, Free: 1 << 30, Failed: true}},
			CacheCapacity: 64 << 20, CacheUsed: 8 << 20, CachedBlocks: 2},
		{ID: "n2", GRPCAddr: "127.0.0.1:7401", LastHeartbeat: 45 * time.Second, Replicas: 3, Storages: []client.Storage{{Capacity: 1 << 30, Free: 1 << 30}}},
		{ID: "n3", GRPCAddr: "127.0.0.1:7402", Dead: true, Gossip: "dead", LastHeartbeat: -time.Millisecond},
	}}
	return st, nodes
}

func TestStatusOutput(t *testing.T) {
	st, nodes := goldenStatus()
	j := toStatusJSON(st)
	j.Storage = toStorageJSON(nodes)
	var b strings.Builder
	if err := writeStatus(&b, st, j); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord status", b.String(), `cluster        lb-dev
leader         c1
term           4
commit index   1200
applied index  1199
answered by    c2
storage nodes  3 (1 live, 1 stale, 1 dead)
safe mode      off
blocks         3 under-replicated, 1 missing, 2 re-replications in flight
warning        behind on trimming: 9/4 segments

ID  SUFFRAGE  LEADER  HEALTHY  LAST CONTACT  APPLIED  RAFT            GRPC            ERROR
c1  voter     *       yes      0ms           1200     127.0.0.1:7000  127.0.0.1:7100  -
c2  voter             yes      12ms          1199     127.0.0.1:7001  127.0.0.1:7101  -
c3  nonvoter          no       -             0        127.0.0.1:7002  -               connection refused

replay at start (snapshot restore, then the log after it, until caught up)
  c2  5900 events in 1.50s (3933 events/s): snapshot at index 1024 with 5000 events in 0.25s, then 76 log entries with 900 events in 0.50s (1800 events/s) after 0.75s waiting for a commit index
`)
	b.Reset()
	if err := writeMembersTable(&b, st.Members); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord members", b.String(), `ID  SUFFRAGE  LEADER  HEALTHY  LAST CONTACT  APPLIED  RAFT            GRPC            ERROR
c1  voter     *       yes      0ms           1200     127.0.0.1:7000  127.0.0.1:7100  -
c2  voter             yes      12ms          1199     127.0.0.1:7001  127.0.0.1:7101  -
c3  nonvoter          no       -             0        127.0.0.1:7002  -               connection refused
`)
}

func TestNodesOutput(t *testing.T) {
	_, nodes := goldenStatus()
	var b strings.Builder
	if err := writeNodes(&b, toNodesJSON(nodes)); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord nodes", b.String(), `ID  GRPC            STATE  GOSSIP  LAST HEARTBEAT  FULL REPORT  REPLICAS  FREE / CAPACITY   CACHED
n1  127.0.0.1:7400  live   alive   1.5s ago        true         12        5120 / 12288 MiB  2 blocks, 8 / 64 MiB
n2  127.0.0.1:7401  stale  -       45s ago         false        3         1024 / 1024 MiB   -
n3  127.0.0.1:7402  dead   dead    -               false        0         0 / 0 MiB         -
blocks: 3 under-replicated, 1 missing, 2 re-replications in flight
`)
	b.Reset()
	if err := writeNodes(&b, toNodesJSON(client.NodeList{SafeMode: true})); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord nodes in safe mode", b.String(), `ID  GRPC  STATE  GOSSIP  LAST HEARTBEAT  FULL REPORT  REPLICAS  FREE / CAPACITY  CACHED
safe mode: waiting for block reports (no deletion or re-replication)
blocks: 0 under-replicated, 0 missing, 0 re-replications in flight
`)
}

func TestJournalSegmentsAndConsumersOutput(t *testing.T) {
	var b strings.Builder
	segs := []client.Segment{{ID: 1, FirstSeq: 1, LastSeq: 4096, Events: 4096, Bytes: 1 << 20, FirstIndex: 3, LastIndex: 4200, State: "expired"},
		{ID: 2, FirstSeq: 4097, LastSeq: 5000, Events: 904, Bytes: 231424, FirstIndex: 4201, LastIndex: 5110, State: "open"}}
	if err := writeSegments(&b, segs); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord journal segments", b.String(), `ID  FIRST SEQ  LAST SEQ  EVENTS  BYTES    STATE    FIRST INDEX  LAST INDEX
1   1          4096      4096    1048576  expired  3            4200
2   4097       5000      904     231424   open     4201         5110
`)
	b.Reset()
	if err := writeConsumer(&b, "acked", client.Consumer{Name: "indexer", AckedSeq: 4000, Lag: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := writeConsumers(&b, []client.Consumer{{Name: "indexer", AckedSeq: 4000, Lag: 1000}, {Name: "audit-archiver", AckedSeq: 5000}}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord journal consumers ack, ls", b.String(), `acked consumer indexer: acked seq 4000, lag 1000
NAME            ACKED SEQ  LAG
indexer         4000       1000
audit-archiver  5000       0
`)
}

// goldenRecoveries is block 42 recovered on a second attempt, block 43
// still recovering, and block 9 whose start was trimmed before its
// commit (a deletion).
func goldenRecoveries() []client.RecoveryHistory {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return client.FoldRecoveries([]client.RecoveryEvent{
		{Seq: 10, Type: client.EventRecoveryStarted, Time: t0, BlockID: 42, Path: "/logs/a", GS: 1001,
			Attempt: &client.BlockRecovery{ID: 1002, Primary: "n1", Attempt: 1, Deadline: t0.Add(time.Minute), Reason: "lease expired"}},
		{Seq: 11, Type: client.EventRecoveryStarted, Time: t0.Add(time.Second), BlockID: 43, Path: "/logs/b", GS: 7,
			Attempt: &client.BlockRecovery{ID: 1003, Primary: "n3", Attempt: 1, Deadline: t0.Add(61 * time.Second), Reason: "recover lease"}},
		{Seq: 14, Type: client.EventRecoveryStarted, Time: t0.Add(70 * time.Second), BlockID: 42, Path: "/logs/a", GS: 1001,
			Attempt: &client.BlockRecovery{ID: 1004, Primary: "n2", Attempt: 2, Deadline: t0.Add(130 * time.Second), Reason: "re-drive: primary n1 timed out"}},
		{Seq: 15, Type: client.EventRecoveryCommitted, Time: t0.Add(72*time.Second + 500*time.Millisecond), BlockID: 42, GS: 1001,
			Commit: &client.RecoveryCommit{RecoveryID: 1004, OldGS: 1001, NewGS: 1004, Length: 300, Participants: []string{"n2", "n3"}, FileClosed: true}},
		{Seq: 16, Type: client.EventRecoveryCommitted, Time: t0.Add(73 * time.Second), BlockID: 9, GS: 50,
			Commit: &client.RecoveryCommit{RecoveryID: 51, OldGS: 50, NewGS: 51, Deleted: true}},
	})
}

func TestRecoveryOutput(t *testing.T) {
	var recs []*recoveryJSON
	for _, h := range goldenRecoveries() {
		recs = append(recs, toRecoveryJSON(h))
	}
	var b strings.Builder
	if err := writeRecoveries(&b, recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		writeRecovery(&b, r)
	}
	checkGolden(t, "coord recovery ls, show", b.String(), `BLOCK  PATH     ATTEMPTS  PRIMARY  OUTCOME
42     /logs/a  2         n2       committed by recovery 1004: length 300, GS 1004, 2 replicas, file closed
43     /logs/b  1         n3       in progress
9               0         -        committed by recovery 51: block deleted (no replica had data)
block 42 of /logs/a (GS 1001 before recovery)
  attempt 1: recovery id 1002, primary n1, started 2025-03-01T12:00:00Z, deadline 2025-03-01T12:01:00Z (lease expired)
  attempt 2: recovery id 1004, primary n2, started 2025-03-01T12:01:10Z, deadline 2025-03-01T12:02:10Z (re-drive: primary n1 timed out)
  outcome: committed by recovery 1004: length 300, GS 1004, 2 replicas, file closed
  participants: n2, n3
block 43 of /logs/b (GS 7 before recovery)
  attempt 1: recovery id 1003, primary n3, started 2025-03-01T12:00:01Z, deadline 2025-03-01T12:01:01Z (recover lease)
  outcome: in progress
block 9 of  (GS 0 before recovery)
  outcome: committed by recovery 51: block deleted (no replica had data)
`)
	b.Reset()
	if err := writeJSON(&b, recs[0]); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord recovery show --json", b.String(), `{
  "block_id": 42,
  "path": "/logs/a",
  "old_gs": 1001,
  "attempts": [
    {
      "recovery_id": 1002,
      "attempt": 1,
      "primary": "n1",
      "reason": "lease expired",
      "started_at": "2025-03-01T12:00:00Z",
      "deadline": "2025-03-01T12:01:00Z",
      "seq": 10
    },
    {
      "recovery_id": 1004,
      "attempt": 2,
      "primary": "n2",
      "reason": "re-drive: primary n1 timed out",
      "started_at": "2025-03-01T12:01:10Z",
      "deadline": "2025-03-01T12:02:10Z",
      "seq": 14
    }
  ],
  "committed": true,
  "recovery_id": 1004,
  "new_gs": 1004,
  "length": 300,
  "participants": [
    "n2",
    "n3"
  ],
  "file_closed": true,
  "committed_at": "2025-03-01T12:01:12.5Z"
}
`)
}
