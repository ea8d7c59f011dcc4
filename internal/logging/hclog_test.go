package logging

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func newJSON(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level, AddSource: true, ReplaceAttr: renameTrace}))
}

func TestHCLogLevels(t *testing.T) {
	var buf bytes.Buffer
	h := HCLog(newJSON(&buf, LevelTrace), "raft")
	h.Trace("t", "k", 1)
	h.Debug("d")
	h.Info("i")
	h.Warn("w")
	h.Error("e")
	h.Log(hclog.NoLevel, "n")
	h.Log(hclog.Off, "off")
	h.Log(hclog.Warn, "lw")
	want := [][2]string{{"TRACE", "t"}, {"DEBUG", "d"}, {"INFO", "i"}, {"WARN", "w"}, {"ERROR", "e"}, {"INFO", "n"}, {"WARN", "lw"}}
	rs := records(t, &buf)
	if len(rs) != len(want) {
		t.Fatalf("got %d records, want %d: %v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if r["level"] != want[i][0] || r["msg"] != want[i][1] || r[ComponentKey] != "raft" {
			t.Errorf("record %d = %v, want %v with component raft", i, r, want[i])
		}
		src, _ := r["source"].(map[string]any)
		if file, _ := src["file"].(string); filepath.Base(file) != "hclog_test.go" {
			t.Errorf("record %d source = %v, want the caller in hclog_test.go", i, src)
		}
	}
	if rs[0]["k"] != float64(1) {
		t.Errorf("trace attrs = %v", rs[0])
	}
}

func TestHCLogGuardsAndSetLevel(t *testing.T) {
	var buf bytes.Buffer
	root := HCLog(newJSON(&buf, slog.LevelDebug), "raft")
	child := root.Named("net").With("peer", "n2")
	if root.IsTrace() || !root.IsDebug() || !root.IsInfo() || !root.IsWarn() || !root.IsError() {
		t.Fatal("guards do not follow the handler level")
	}
	if got := root.GetLevel(); got != hclog.Debug {
		t.Fatalf("GetLevel = %v, want debug", got)
	}
	root.SetLevel(hclog.Warn) // applies to derived loggers too
	if child.IsInfo() || !child.IsWarn() || child.GetLevel() != hclog.Warn {
		t.Fatalf("SetLevel did not reach the child: level %v", child.GetLevel())
	}
	child.Info("dropped")
	child.Warn("kept")
	root.SetLevel(hclog.Trace) // cannot go below the handler
	if root.IsTrace() || root.GetLevel() != hclog.Debug {
		t.Fatalf("GetLevel = %v after SetLevel(trace), want debug", root.GetLevel())
	}
	root.SetLevel(hclog.Off)
	if root.IsError() || root.GetLevel() != hclog.Off {
		t.Fatal("SetLevel(off) still emits")
	}
	root.Error("dropped")
	root.SetLevel(hclog.NoLevel)
	if !root.IsDebug() {
		t.Fatal("SetLevel(NoLevel) did not restore the handler level")
	}
	rs := records(t, &buf)
	if len(rs) != 1 || rs[0]["msg"] != "kept" {
		t.Fatalf("got %v", rs)
	}
}

func TestHCLogNamesAndWith(t *testing.T) {
	var buf bytes.Buffer
	root := HCLog(newJSON(&buf, slog.LevelInfo), "raft")
	if root.Name() != "raft" {
		t.Fatalf("Name = %q", root.Name())
	}
	n := root.Named("net")
	if n.Name() != "raft.net" {
		t.Fatalf("Named: %q", n.Name())
	}
	w := n.With("peer", "n1", "term", 3).With("peer", "n2", "odd")
	if want := []interface{}{"peer", "n2", "term", 3, hclogMissingKey, "odd"}; !reflect.DeepEqual(w.ImpliedArgs(), want) {
		t.Fatalf("ImpliedArgs = %v, want %v", w.ImpliedArgs(), want)
	}
	r := w.ResetNamed("snap")
	if r.Name() != "snap" || !reflect.DeepEqual(r.ImpliedArgs(), w.ImpliedArgs()) {
		t.Fatalf("ResetNamed: %q %v", r.Name(), r.ImpliedArgs())
	}
	w.Info("hello", "index", uint64(7))
	r.Info("again")
	HCLog(newJSON(&buf, slog.LevelInfo), "").Info("anonymous")
	rs := records(t, &buf)
	if len(rs) != 3 {
		t.Fatalf("got %v", rs)
	}
	if rs[0][ComponentKey] != "raft.net" || rs[0]["peer"] != "n2" || rs[0]["term"] != float64(3) ||
		rs[0][hclogMissingKey] != "odd" || rs[0]["index"] != float64(7) {
		t.Errorf("with record = %v", rs[0])
	}
	if rs[1][ComponentKey] != "snap" || rs[1]["peer"] != "n2" {
		t.Errorf("reset record = %v", rs[1])
	}
	if _, ok := rs[2][ComponentKey]; ok {
		t.Errorf("unnamed logger has a component: %v", rs[2])
	}
}

func TestHCLogValueHelpers(t *testing.T) {
	var buf bytes.Buffer
	h := HCLog(newJSON(&buf, slog.LevelInfo), "x")
	h.Info("m",
		"fmt", hclog.Fmt("%d-%s", 4, "a"),
		"hex", hclog.Hex(255),
		"oct", hclog.Octal(8),
		"bin", hclog.Binary(5),
		"quote", hclog.Quote("a b"),
		42, "non-string key",
		"trailing")
	rs := records(t, &buf)
	if len(rs) != 1 {
		t.Fatalf("got %v", rs)
	}
	want := map[string]any{"fmt": "4-a", "hex": "0xff", "oct": "010", "bin": "0b101",
		"quote": `"a b"`, "42": "non-string key", hclogMissingKey: "trailing"}
	for k, v := range want {
		if rs[0][k] != v {
			t.Errorf("%s = %v, want %v", k, rs[0][k], v)
		}
	}
}

func TestHCLogStandardLogger(t *testing.T) {
	var buf bytes.Buffer
	h := HCLog(newJSON(&buf, slog.LevelDebug), "raft")
	h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] inferred")
	h.StandardLogger(nil).Print("[WARN] plain")
	h.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("[DEBUG] forced")
	h.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Off}).Print("silenced")
	h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true, InferLevelsWithTimestamp: true}).
		Print("2026/12/01 10:00:00 [ERROR] stamped")
	h.SetLevel(hclog.Error)
	h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] below override")
	want := [][2]string{{"WARN", "inferred"}, {"INFO", "[WARN] plain"}, {"ERROR", "forced"}, {"ERROR", "stamped"}}
	rs := records(t, &buf)
	if len(rs) != len(want) {
		t.Fatalf("got %v", rs)
	}
	for i, r := range rs {
		if r["level"] != want[i][0] || r["msg"] != want[i][1] || r[ComponentKey] != "raft" {
			t.Errorf("record %d = %v, want %v", i, r, want[i])
		}
	}
}
