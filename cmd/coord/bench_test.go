package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logbookhq/logbook/bench"
)

// TestBenchJournalJSON: coord bench journal's JSON is the workload's
// result, flattened, then the members' replay_at_start (only when one
// reported a replay); the first error stays out of it.
func TestBenchJournalJSON(t *testing.T) {
	r := benchJournalJSON{JournalResult: bench.JournalResult{Ops: 7, Clients: 2}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.HasPrefix(s, `{"ops_per_sec":0,`) || !strings.HasSuffix(s, `"cpu_us_per_op":0}`) || !strings.Contains(s, `"ops":7,`) {
		t.Fatalf("without replays: %s", s)
	}
	r.ReplayAtStart = map[string]*replayJSON{"coord1": {LogEvents: 5}}
	b, err = json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"cpu_us_per_op":0,"replay_at_start":{"coord1":{`) || strings.Contains(s, "FirstErr") {
		t.Fatalf("with a replay: %s", s)
	}
}
