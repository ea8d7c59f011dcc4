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
	}
	writeReplays(&b, ms)
	for _, want := range []string{
		"c2  1000000 events in 4.00s (250000 events/s): snapshot at index 8192 with 900000 events in 1.00s, then 808 log entries with 100000 events in 0.50s (200000 events/s) after 2.50s waiting for a commit index",
		"c3  replaying for 2.50s: snapshot at index 10 (5 events) restored, log up to index 99 to apply",
		"c4  1000 events in 2.00s (500 events/s): no snapshot, log opened in 0.50s, then 99 log entries with 1000 events",
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
	if j := toMembersJSON(ms); j[0].StartupReplay != nil || j[1].StartupReplay.EventsPerSecond != 250000 || j[1].StartupReplay.LogEventsPerSecond != 200000 || j[1].StartupReplay.LogWaitSeconds != 3.5 || j[3].StartupReplay.LogEventsPerSecond != 0 || j[2].StartupReplay.EventsPerSecond != 0 {
		t.Errorf("json: %+v %+v %+v", j[0].StartupReplay, j[1].StartupReplay, j[2].StartupReplay)
	}
}
