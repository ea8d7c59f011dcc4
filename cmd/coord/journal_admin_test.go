package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/testports"
)

// unreachableEndpoint is a loopback address nothing listens on.
func unreachableEndpoint(t *testing.T) string {
	t.Helper()
	return testports.Addr(t, false) // claimed for this process: no test listens there
}

func TestJournalAdminUsageErrorsExit2(t *testing.T) {
	ep := unreachableEndpoint(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"journal", "consumers", "ack", "c1", "abc"}, `SEQ "abc": want a positive integer`},
		{[]string{"journal", "consumers", "ack", "c1", "0"}, `SEQ "0": want a positive integer`},
		{[]string{"journal", "consumers", "ack", "c1", "-3"}, "unknown shorthand flag"},
		{[]string{"journal", "consumers", "ack", "c1", "--", "-3"}, `SEQ "-3": want a positive integer`},
		{[]string{"journal", "consumers", "ack", "c1"}, "accepts 2 arg(s)"},
		{[]string{"journal", "consumers", "ack", "bad name!", "3"}, "consumer name"},
		{[]string{"journal", "consumers", "register"}, "accepts 1 arg(s)"},
		{[]string{"journal", "consumers", "register", "c1", "--from", "0"}, "--from 0"},
		{[]string{"journal", "consumers", "register", "c1", "--from", "x"}, "--from"},
		{[]string{"journal", "consumers", "register", "-c1"}, ""},
		{[]string{"journal", "consumers", "rm"}, "accepts 1 arg(s)"},
		{[]string{"journal", "consumers", "bogus"}, ""},
		{[]string{"journal", "trim", "--to", "0"}, "--to 0"},
		{[]string{"journal", "trim", "extra"}, `unexpected argument "extra": coord journal trim takes no positional arguments`},
		{[]string{"journal", "append", "--type", "t", "some text"}, `unexpected argument "some text"`},
		{[]string{"journal", "tail", "--from", "0"}, "--from 0"},
		{[]string{"journal", "read", "--from", "0"}, "--from 0"},
		{[]string{"journal", "tail", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"journal", "positions", "--timeout", "0"}, "--timeout 0s"},
		{[]string{"journal", "config", "set"}, "give at least one setting"},
		{[]string{"journal", "config", "set", "--events-per-segment", "0"}, "--events-per-segment 0: want 1..1073741824"},
		{[]string{"journal", "config", "set", "--segment-bytes", "0"}, "--segment-bytes 0"},
		{[]string{"journal", "config", "set", "--max-segments", "1048577"}, "--max-segments 1048577"},
		{[]string{"journal", "config", "set", "--session-idle-timeout", "1500ms"}, "want whole seconds"},
		{[]string{"journal", "config", "set", "--session-idle-timeout", "721h"}, "want whole seconds"},
		{[]string{"journal", "config", "extra"}, `unknown command "extra"`},
		// reset refuses before contacting the (here unreachable) cluster.
		{[]string{"journal", "reset"}, "reset drops every retained event"},
	} {
		flags := []string{"--endpoints", ep, "--timeout", "2s"}
		if tc.args[1] == "tail" || tc.args[1] == "positions" {
			flags = flags[:2] // their own --timeout
		}
		// Flags go before a "--", which ends them.
		n := len(tc.args)
		if i := slices.Index(tc.args, "--"); i >= 0 {
			n = i
		}
		args := slices.Concat(tc.args[:n], flags, tc.args[n:])
		start := time.Now()
		code, out, stderr := run(t, nil, args...)
		if code != 2 || !strings.HasPrefix(stderr, "coord: ") || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want exit 2 and %q)", tc.args, code, out, stderr, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%v: took %s; a usage error must not contact the cluster", tc.args, d)
		}
	}
}

func TestJournalAdminJSONShapes(t *testing.T) {
	keys := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	same := func(got []string, want ...string) bool {
		if len(got) != len(want) {
			return false
		}
		set := map[string]bool{}
		for _, k := range got {
			set[k] = true
		}
		for _, k := range want {
			if !set[k] {
				return false
			}
		}
		return true
	}
	if k := keys(toPositionsJSON(client.Positions{})); !same(k, "write_pos", "safe_pos", "expire_pos", "trimmed_pos", "event_count", "segment_count", "applied_index", "member", "warning", "log_format", "paused") {
		t.Errorf("positions keys: %v", k)
	}
	if k := keys(toSegmentsJSON([]client.Segment{{}})[0]); !same(k, "id", "first_seq", "last_seq", "events", "bytes", "state", "first_index", "last_index") {
		t.Errorf("segment keys: %v", k)
	}
	if k := keys(toConsumerJSON(client.Consumer{})); !same(k, "name", "acked_seq", "lag") {
		t.Errorf("consumer keys: %v", k)
	}
	b, _ := json.Marshal(toStatusJSON(client.ClusterStatus{}))
	if !strings.Contains(string(b), `"warnings":[]`) || !strings.Contains(string(b), `"members":[]`) {
		t.Errorf("status without warnings: %s", b)
	}
	b, _ = json.Marshal(toStatusJSON(client.ClusterStatus{ResponderID: "c2", Warnings: []string{"behind on trimming: 9/4 segments"}}))
	if !strings.Contains(string(b), `"answered_by":"c2"`) {
		t.Errorf("status answered by c2: %s", b)
	}
	if !strings.Contains(string(b), `"warnings":["behind on trimming: 9/4 segments"]`) {
		t.Errorf("status with warnings: %s", b)
	}
}

// eventually retries check until it returns nil, failing the test after
// 15s: reads are answered by any member, which may lag a little behind the
// leader.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tryCoord runs coord and returns its stdout, or an error unless it exited
// with want.
func tryCoord(t *testing.T, want int, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	code, out, stderr := run(t, nil, args...)
	if code != want {
		return out, stderr, fmt.Errorf("coord %s: exit %d, want %d; stdout %q stderr %q", strings.Join(args, " "), code, want, out, stderr)
	}
	return out, stderr, nil
}

func TestJournalAdminCommands(t *testing.T) {
	d, _ := startTestCluster(t)
	eps := strings.Join(d.endpoints(), ",")
	runCoord := coordRunner(t)
	coord := func(want int, args ...string) string {
		t.Helper()
		out, _ := runCoord(want, args...)
		return out
	}
	type positions struct {
		WritePos     uint64 `json:"write_pos"`
		SafePos      uint64 `json:"safe_pos"`
		ExpirePos    uint64 `json:"expire_pos"`
		TrimmedPos   uint64 `json:"trimmed_pos"`
		EventCount   uint64 `json:"event_count"`
		SegmentCount uint64 `json:"segment_count"`
		AppliedIndex uint64 `json:"applied_index"`
		Member       string `json:"member"`
		Warning      string `json:"warning"`
		Paused       *bool  `json:"paused"`
	}
	// waitPositions polls journal positions until cond holds; every answer
	// must have all eleven keys and trimmed_pos <= expire_pos <= safe_pos+1.
	waitPositions := func(what string, cond func(positions) bool) positions {
		t.Helper()
		var p positions
		eventually(t, what, func() error {
			out, _, err := tryCoord(t, 0, "journal", "positions", "--json", "--endpoints", eps)
			if err != nil {
				return err
			}
			var raw map[string]any
			decodeJSON(t, out, &raw)
			if len(raw) != 11 {
				t.Fatalf("positions: want 11 keys, got %v", raw)
			}
			p = positions{}
			decodeJSON(t, out, &p)
			if p.TrimmedPos > p.ExpirePos || p.ExpirePos > p.SafePos+1 || p.WritePos < p.SafePos || p.Member == "" || p.AppliedIndex == 0 || p.Paused == nil {
				t.Fatalf("positions: %+v", p)
			}
			if !cond(p) {
				return fmt.Errorf("positions %+v", p)
			}
			return nil
		})
		return p
	}
	type consumer struct {
		Name     string `json:"name"`
		AckedSeq uint64 `json:"acked_seq"`
		Lag      uint64 `json:"lag"`
	}
	waitConsumers := func(what string, want ...consumer) {
		t.Helper()
		eventually(t, what, func() error {
			out, _, err := tryCoord(t, 0, "journal", "consumers", "ls", "--json", "--endpoints", eps)
			if err != nil {
				return err
			}
			var ls map[string][]consumer
			decodeJSON(t, out, &ls)
			if got, ok := ls["consumers"]; len(ls) != 1 || !ok || got == nil || !slices.Equal(got, want) {
				return fmt.Errorf("consumers ls: %s", out)
			}
			return nil
		})
	}
	p0 := waitPositions("positions", func(positions) bool { return true })

	// A consumer registered now has consumed everything up to safe_pos.
	var c consumer
	decodeJSON(t, coord(0, "journal", "consumers", "register", "c1", "--json", "--endpoints", eps), &c)
	if c.Name != "c1" || c.AckedSeq < p0.SafePos || c.Lag != 0 {
		t.Fatalf("register: %+v, safe_pos %d", c, p0.SafePos)
	}
	coord(1, "journal", "consumers", "register", "c1", "--endpoints", eps) // exists

	var seqs []uint64
	for _, payload := range []string{"one", "two", "three"} {
		var a struct{ Seqs []uint64 }
		decodeJSON(t, coord(0, "journal", "append", "--type", "t", "--payload", payload, "--json", "--endpoints", eps), &a)
		if len(a.Seqs) != 1 {
			t.Fatalf("append: %v", a.Seqs)
		}
		seqs = append(seqs, a.Seqs[0])
	}
	last := seqs[2]
	if seqs[0] != c.AckedSeq+1 || seqs[1] != seqs[0]+1 || last != seqs[1]+1 {
		t.Fatalf("seqs %v after safe_pos %d", seqs, c.AckedSeq)
	}

	p1 := waitPositions("positions after appends", func(p positions) bool { return p.SafePos == last })
	if p1.EventCount < 3 || p1.SegmentCount < 1 || p1.Warning != "" {
		t.Fatalf("positions after appends: %+v (last seq %d)", p1, last)
	}
	if table := coord(0, "journal", "positions", "--endpoints", eps); !strings.Contains(table, "safe pos") || !strings.Contains(table, "trimmed pos") || !regexp.MustCompile(`(?m)^paused +no$`).MatchString(table) {
		t.Fatalf("positions table: %q", table)
	}
	if *p1.Paused {
		t.Fatalf("positions before pause: %+v", p1)
	}
	// journal pause shows in positions, table and JSON, until resume.
	coord(0, "journal", "pause", "--endpoints", eps)
	waitPositions("positions while paused", func(p positions) bool { return *p.Paused })
	if table := coord(0, "journal", "positions", "--endpoints", eps); !regexp.MustCompile(`(?m)^paused +yes$`).MatchString(table) {
		t.Fatalf("positions table while paused: %q", table)
	}
	coord(0, "journal", "resume", "--endpoints", eps)
	waitPositions("positions after resume", func(p positions) bool { return !*p.Paused })

	eventually(t, "segments", func() error {
		out, _, err := tryCoord(t, 0, "journal", "segments", "--json", "--endpoints", eps)
		if err != nil {
			return err
		}
		var segs map[string][]map[string]any
		decodeJSON(t, out, &segs)
		list := segs["segments"]
		if len(segs) != 1 || uint64(len(list)) != p1.SegmentCount {
			return fmt.Errorf("segments %s, positions %+v", out, p1)
		}
		var events float64
		for _, s := range list {
			if len(s) != 8 {
				t.Fatalf("segment: want 8 keys, got %v", s)
			}
			events += s["events"].(float64)
		}
		if open := list[len(list)-1]; open["last_seq"] != float64(last) || open["state"] != "open" || uint64(events) != p1.EventCount {
			return fmt.Errorf("segments %s, positions %+v", out, p1)
		}
		return nil
	})
	if table := coord(0, "journal", "segments", "--endpoints", eps); !strings.Contains(table, "FIRST SEQ") || !strings.Contains(table, "open") {
		t.Fatalf("segments table: %q", table)
	}

	decodeJSON(t, coord(0, "journal", "consumers", "ack", "c1", strconv.FormatUint(seqs[1], 10), "--json", "--endpoints", eps), &c)
	if c != (consumer{"c1", seqs[1], 1}) {
		t.Fatalf("ack: %+v", c)
	}
	waitConsumers("consumers after ack", consumer{"c1", seqs[1], 1})
	if table := coord(0, "journal", "consumers", "ls", "--endpoints", eps); !strings.Contains(table, "ACKED SEQ") || !strings.Contains(table, "c1") {
		t.Fatalf("consumers table: %q", table)
	}

	// Beyond safe_pos: OutOfRange from the cluster, exit 1.
	_, stderr := runCoord(1, "journal", "consumers", "ack", "c1", strconv.FormatUint(last+100, 10), "--endpoints", eps)
	if !strings.Contains(stderr, "OutOfRange") || !strings.Contains(stderr, "safe_pos") {
		t.Fatalf("ack beyond safe_pos: %q", stderr)
	}

	// An unknown consumer: NotFound naming it, exit 1; a backwards ack:
	// FailedPrecondition naming the consumer and both seqs.
	_, stderr = runCoord(1, "journal", "consumers", "ack", "nobody", "1", "--endpoints", eps)
	if !strings.Contains(stderr, "NotFound") || !strings.Contains(stderr, `"nobody"`) {
		t.Fatalf("ack of an unknown consumer: %q", stderr)
	}
	_, stderr = runCoord(1, "journal", "consumers", "ack", "c1", strconv.FormatUint(seqs[0], 10), "--endpoints", eps)
	if !strings.Contains(stderr, "FailedPrecondition") || !strings.Contains(stderr, fmt.Sprintf(`"c1" acks %d after %d`, seqs[0], seqs[1])) {
		t.Fatalf("backwards ack: %q", stderr)
	}

	// The open segment holds every event: nothing to trim.
	var trim map[string]uint64
	decodeJSON(t, coord(0, "journal", "trim", "--json", "--endpoints", eps), &trim)
	if len(trim) != 2 || trim["trimmed_pos"] != p1.TrimmedPos || trim["segments_trimmed"] != 0 {
		t.Fatalf("trim: %v, positions before %+v", trim, p1)
	}

	// tail without --follow stops at the safe_pos it saw first.
	eventually(t, "tail --from 1", func() error {
		out, _, err := tryCoord(t, 0, "journal", "tail", "--from", "1", "--json", "--endpoints", eps)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if want := int(last - max(1, p1.TrimmedPos) + 1); len(lines) != want {
			return fmt.Errorf("%d lines, want %d: %q", len(lines), want, out)
		}
		for i, want := range []string{"one", "two", "three"} {
			var ev map[string]any
			decodeJSON(t, lines[len(lines)-3+i], &ev)
			if ev["seq"] != float64(seqs[i]) || ev["type"] != "t" || ev["payload"] != want || ev["client_id"] == "" || len(ev) != 4 {
				t.Fatalf("tail event %d: %v", i, ev)
			}
		}
		return nil
	})
	eventually(t, "tail table", func() error {
		out, _, err := tryCoord(t, 0, "journal", "tail", "--from", strconv.FormatUint(seqs[1], 10), "--endpoints", eps)
		if err != nil {
			return err
		}
		if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(got) != 2 ||
			!strings.HasPrefix(got[0], strconv.FormatUint(seqs[1], 10)+"\tt\t") || !strings.HasSuffix(got[1], "\tthree") {
			return fmt.Errorf("tail table: %q", out)
		}
		return nil
	})
	if out := coord(0, "journal", "tail", "--from", strconv.FormatUint(last+1, 10), "--endpoints", eps); out != "" {
		t.Fatalf("tail past the end: %q", out)
	}
	// --follow runs until --timeout, then exits 0.
	eventually(t, "tail --follow", func() error {
		start := time.Now()
		out, _, err := tryCoord(t, 0, "journal", "tail", "--from", strconv.FormatUint(last, 10), "--follow", "--timeout", "1s", "--json", "--endpoints", eps)
		if err != nil {
			return err
		}
		if took := time.Since(start); took < time.Second {
			t.Fatalf("tail --follow returned after %s, before its --timeout", took)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(out), &ev); err != nil || ev["seq"] != float64(last) || ev["payload"] != "three" {
			return fmt.Errorf("tail --follow: %q", out)
		}
		return nil
	})

	// reset without --yes: usage error, nothing changes.
	_, stderr = runCoord(2, "journal", "reset", "--endpoints", eps)
	if !strings.Contains(stderr, "drops every retained event") || !strings.Contains(stderr, "--yes") {
		t.Fatalf("reset without --yes: %q", stderr)
	}
	if p := waitPositions("positions after a refused reset", func(p positions) bool { return p.SafePos == last }); p.TrimmedPos != p1.TrimmedPos || p.EventCount != p1.EventCount {
		t.Fatalf("positions changed by a refused reset: %+v, before %+v", p, p1)
	}

	var reset map[string]uint64
	decodeJSON(t, coord(0, "journal", "reset", "--yes", "--json", "--endpoints", eps), &reset)
	if len(reset) != 1 || reset["trimmed_pos"] != last+1 {
		t.Fatalf("reset: %v (last seq %d)", reset, last)
	}
	if p := waitPositions("positions after reset", func(p positions) bool { return p.TrimmedPos == last+1 }); p.SafePos != last || p.EventCount != 0 {
		t.Fatalf("positions after reset: %+v", p)
	}
	// The trimmed position: OutOfRange, exit 1.
	eventually(t, "tail of a trimmed seq", func() error {
		_, stderr, err := tryCoord(t, 1, "journal", "tail", "--from", "1", "--endpoints", eps)
		if err != nil {
			return err
		}
		if !strings.Contains(stderr, "OutOfRange") || !strings.Contains(stderr, "no longer retained") {
			t.Fatalf("tail of a trimmed seq: %q", stderr)
		}
		return nil
	})
	// events refuses a range that starts below it the same way (it used
	// to list the retained rest, here nothing, and exit 0), and a range
	// with only an end below it (it listed nothing and exited 0); without
	// a start it lists what is retained: nothing after the reset.
	for _, r := range []string{"1..", "1..2", fmt.Sprintf("%d..%d", last, last+5), fmt.Sprintf("..%d", last)} {
		_, stderr := runCoord(1, "journal", "events", "--range", r, "--endpoints", eps)
		if !strings.Contains(stderr, "OutOfRange") || !strings.Contains(stderr, fmt.Sprintf("earliest is %d", last+1)) {
			t.Fatalf("events --range %s below the trimmed pos: %q", r, stderr)
		}
	}
	// export refuses a range below it too, and writes no file.
	exp := filepath.Join(t.TempDir(), "below.lbx")
	for _, c := range [][]string{{"--to", fmt.Sprint(last)}, {"--from", "1"}} {
		_, stderr := runCoord(1, append([]string{"journal", "export", "--out", exp, "--endpoints", eps}, c...)...)
		if !strings.Contains(stderr, fmt.Sprintf("below the trimmed pos %d", last+1)) {
			t.Fatalf("export %v below the trimmed pos: %q", c, stderr)
		}
		if _, err := os.Stat(exp); !os.IsNotExist(err) {
			t.Fatalf("export %v left a file: %v", c, err)
		}
	}
	if out := coord(0, "journal", "events", "--endpoints", eps); out != "" {
		t.Fatalf("events of an empty journal: %q", out)
	}
	if out := coord(0, "journal", "events", "--range", fmt.Sprintf("..%d", last+5), "--endpoints", eps); out != "" {
		t.Fatalf("events --range ..%d after the reset: %q", last+5, out)
	}
	// reset moved the consumer past the old end.
	waitConsumers("consumers after reset", consumer{"c1", last, 0})
	var removed map[string]string
	decodeJSON(t, coord(0, "journal", "consumers", "rm", "c1", "--json", "--endpoints", eps), &removed)
	if len(removed) != 1 || removed["removed"] != "c1" {
		t.Fatalf("rm: %v", removed)
	}
	coord(1, "journal", "consumers", "rm", "c1", "--endpoints", eps) // gone
	waitConsumers("consumers after rm")

	// read and tail without --from start at the trimmed pos (they used to
	// start at 1 and so failed once anything was trimmed); with --from 1
	// they still refuse.
	coord(0, "journal", "append", "--type", "after-reset", "--payload", "p", "--endpoints", eps)
	var afterReset struct {
		Events []struct {
			Seq  uint64 `json:"seq"`
			Type string `json:"type"`
		} `json:"events"`
	}
	decodeJSON(t, coord(0, "journal", "read", "--json", "--endpoints", eps), &afterReset)
	if len(afterReset.Events) != 1 || afterReset.Events[0].Seq != last+1 || afterReset.Events[0].Type != "after-reset" {
		t.Fatalf("read without --from after the reset: %+v, want seq %d", afterReset.Events, last+1)
	}
	if out := coord(0, "journal", "tail", "--endpoints", eps); !strings.HasPrefix(out, fmt.Sprintf("%d\tafter-reset\t", last+1)) || strings.Count(out, "\n") != 1 {
		t.Fatalf("tail without --from after the reset: %q", out)
	}
	if _, stderr := runCoord(1, "journal", "read", "--from", "1", "--endpoints", eps); !strings.Contains(stderr, "OutOfRange") {
		t.Fatalf("read --from 1 after the reset: %q", stderr)
	}

}

// TestJournalConfigCommands: coord journal config shows the settings the
// cluster holds (once the first leader at log format 11 seeded them), and
// config set changes only the ones given, as every later read shows.
func TestJournalConfigCommands(t *testing.T) {
	d, _ := startTestCluster(t)
	eps := strings.Join(d.endpoints(), ",")
	type config = journalConfigJSON
	var seeded config
	eventually(t, "the settings held", func() error {
		out, _, err := tryCoord(t, 0, "journal", "config", "--json", "--endpoints", eps)
		if err != nil {
			return err
		}
		seeded = config{}
		decodeJSON(t, out, &seeded)
		if !seeded.Held {
			return fmt.Errorf("not held yet: %+v", seeded)
		}
		return nil
	})
	def := coordserver.DefaultConfig().Journal
	if seeded.EventsPerSegment != def.EventsPerSegment || seeded.SegmentBytes != def.SegmentBytes || seeded.MaxSegments != uint64(def.MaxSegments) ||
		seeded.LogFormat < fsm.HeldConfigFormat || seeded.MemberID == "" {
		t.Fatalf("seeded %+v, want the default segment and trim settings", seeded)
	}
	out, _, err := tryCoord(t, 0, "journal", "config", "set", "--events-per-segment", "7", "--session-idle-timeout", "90m", "--max-events", "100", "--json", "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	var set config
	decodeJSON(t, out, &set)
	want := seeded
	want.EventsPerSegment, want.SessionIdleTimeout, want.MaxEvents = 7, "1h30m0s", 100
	want.AppliedIndex, want.MemberID = set.AppliedIndex, set.MemberID
	if set != want {
		t.Fatalf("config set answered %+v, want %+v", set, want)
	}
	out, _, err = tryCoord(t, 0, "journal", "config", "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"events per segment    7", "max events            100", "session idle timeout  1h30m0s", "held by the cluster   yes"} {
		if !strings.Contains(out, line) {
			t.Errorf("config text lacks %q:\n%s", line, out)
		}
	}
}
