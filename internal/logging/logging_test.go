package logging

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"
)

// records decodes the JSON lines written to buf.
func records(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("decode %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestNewLevels(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  []string // messages emitted out of debug, info, warn, error
	}{
		{"debug", []string{"d", "i", "w", "e"}},
		{"info", []string{"i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"error", []string{"e"}},
	} {
		var buf bytes.Buffer
		l, err := New(&buf, tc.level, true)
		if err != nil {
			t.Fatalf("New(%q): %v", tc.level, err)
		}
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		var got []string
		for _, r := range records(t, &buf) {
			got = append(got, r["msg"].(string))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("level %s: got %v, want %v", tc.level, got, tc.want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, level := range []string{"", "trace", "INFO", "warning", "fatal"} {
		if _, err := New(&bytes.Buffer{}, level, false); err == nil || !strings.HasPrefix(err.Error(), "logging: ") {
			t.Errorf("New(%q) error = %v, want a logging: error", level, err)
		}
	}
	if _, err := New(nil, "info", false); err == nil {
		t.Error("New(nil writer) succeeded")
	}
}

func TestNewText(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "info", false)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "cluster-id", "c1")
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=hello cluster-id=c1") {
		t.Errorf("text output %q", got)
	}
}

func TestStdLog(t *testing.T) {
	for _, tc := range []struct {
		line  string
		level string
		msg   string
	}{
		{"2026/12/01 10:00:00 [WARN] memberlist: Got ping for unexpected node x", "WARN", "Got ping for unexpected node x"},
		{"[DEBUG] memberlist: Stream connection from=1.2.3.4:5", "DEBUG", "Stream connection from=1.2.3.4:5"},
		{"[TRACE] memberlist: deep", "DEBUG", "deep"},
		{"[ERR] memberlist: Failed to send", "ERROR", "Failed to send"},
		{"[ERROR] boom", "ERROR", "boom"},
		{"[INFO] memberlist: Suspect n1 has failed", "INFO", "Suspect n1 has failed"},
		{"2026/12/01 10:00:00.123456 [WARN] with micros", "WARN", "with micros"},
		{"10:00:00 [WARN] time only", "WARN", "time only"},
		{"no prefix at all", "INFO", "no prefix at all"},
		{"[NOTICE] unknown level", "INFO", "[NOTICE] unknown level"},
		{"2026/12/01 plain", "INFO", "plain"},
	} {
		var buf bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		StdLog(l, "memberlist").Print(tc.line)
		rs := records(t, &buf)
		if len(rs) != 1 {
			t.Fatalf("%q: %d records", tc.line, len(rs))
		}
		r := rs[0]
		if r["level"] != tc.level || r["msg"] != tc.msg || r[ComponentKey] != "memberlist" {
			t.Errorf("%q: got level=%v msg=%q component=%v, want %s %q", tc.line, r["level"], r["msg"], r[ComponentKey], tc.level, tc.msg)
		}
	}
}

func TestStdLogWithDateFlags(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	std := StdLog(l, "memberlist")
	std.SetFlags(log.LstdFlags | log.Lmicroseconds)
	std.Printf("[WARN] memberlist: Was able to connect to %s", "n2")
	rs := records(t, &buf)
	if len(rs) != 1 || rs[0]["msg"] != "Was able to connect to n2" || rs[0]["level"] != "WARN" {
		t.Fatalf("got %v", rs)
	}
}

func TestStdLogFiltersLevel(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "warn", true)
	if err != nil {
		t.Fatal(err)
	}
	std := StdLog(l, "memberlist")
	std.Print("[DEBUG] memberlist: noisy")
	std.Print("[INFO] memberlist: chatty")
	std.Print("[ERR] memberlist: loud")
	rs := records(t, &buf)
	if len(rs) != 1 || rs[0]["msg"] != "loud" {
		t.Fatalf("got %v", rs)
	}
}
