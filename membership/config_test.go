package membership

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigTimings(t *testing.T) {
	c := DefaultConfig()
	if c.ProbeInterval != time.Second || c.ProbeTimeout != 500*time.Millisecond ||
		c.GossipInterval != 200*time.Millisecond || c.SuspicionMult != 4 {
		t.Fatalf("DefaultConfig does not carry memberlist LAN timings: %+v", c)
	}
	if c.BindAddr != "0.0.0.0:7946" {
		t.Fatalf("BindAddr = %q", c.BindAddr)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := testConfig("a")
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	// Zero timings take defaults.
	minimal := Config{ClusterID: "c", Meta: Meta{Role: RoleNode, ID: "n"}}
	if err := minimal.Validate(); err != nil {
		t.Fatalf("minimal config rejected: %v", err)
	}

	tests := map[string]func(*Config){
		"bind not host:port":    func(c *Config) { c.BindAddr = "127.0.0.1" },
		"bind hostname":         func(c *Config) { c.BindAddr = "localhost:0" },
		"bind bad port":         func(c *Config) { c.BindAddr = "127.0.0.1:70000" },
		"advertise port zero":   func(c *Config) { c.AdvertiseAddr = "127.0.0.1:0" },
		"advertise hostname":    func(c *Config) { c.AdvertiseAddr = "example.com:7946" },
		"no cluster id":         func(c *Config) { c.ClusterID = ""; c.Meta.ClusterID = "" },
		"cluster id too long":   func(c *Config) { c.ClusterID = strings.Repeat("x", 256); c.Meta.ClusterID = "" },
		"meta cluster mismatch": func(c *Config) { c.Meta.ClusterID = "other" },
		"meta invalid":          func(c *Config) { c.Meta.ID = "" },
		"meta too large":        func(c *Config) { c.Meta.HTTPAddr = strings.Repeat("h", 500) + ":1" },
		"join without port":     func(c *Config) { c.Join = []string{"127.0.0.1"} },
		"bad key length":        func(c *Config) { c.SecretKey = make([]byte, 10) },
		"negative interval":     func(c *Config) { c.GossipInterval = -time.Second },
		"timeout over interval": func(c *Config) { c.ProbeTimeout = 2 * c.ProbeInterval },
		"retry max below min":   func(c *Config) { c.JoinRetryMin = time.Minute; c.JoinRetryMax = time.Second },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			c := testConfig("a")
			mutate(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "membership: ") {
				t.Fatalf("Validate() = %v, want a membership error", err)
			}
			if m, err := New(c); err == nil {
				m.Close()
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestNewRejectsOversizedMeta(t *testing.T) {
	c := testConfig("a")
	c.Meta.GRPCAddr = strings.Repeat("g", 300) + ":1"
	c.Meta.HTTPAddr = strings.Repeat("h", 300) + ":1"
	_, err := New(c)
	if err == nil || !strings.Contains(err.Error(), "exceeds memberlist limit") {
		t.Fatalf("New err = %v, want meta size error", err)
	}
}

func TestLogWriterLevels(t *testing.T) {
	h := &recordingHandler{}
	l := newStdLogger(slog.New(h), nil)
	l.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Printf("[INFO] memberlist: Marking b as failed")
	l.Printf("[WARN] memberlist: Refuting a suspect message")
	l.Printf("[ERR] memberlist: Failed to receive: boom")
	l.Printf("[ERROR] memberlist: also an error")
	l.Printf("no prefix at all")
	want := []struct {
		level slog.Level
		msg   string
	}{
		{slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{slog.LevelInfo, "Marking b as failed"},
		{slog.LevelWarn, "Refuting a suspect message"},
		{slog.LevelError, "Failed to receive: boom"},
		{slog.LevelError, "also an error"},
		{slog.LevelInfo, "no prefix at all"},
	}
	got := h.snapshot()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("record %d = %v %q, want %v %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}

func TestLogWriterRespectsLevel(t *testing.T) {
	var n int
	h := slog.NewTextHandler(writerFunc(func(p []byte) { n++ }), &slog.HandlerOptions{Level: slog.LevelWarn})
	l := newStdLogger(slog.New(h), nil)
	l.Printf("[DEBUG] memberlist: hidden")
	l.Printf("[WARN] memberlist: shown")
	if n != 1 {
		t.Fatalf("%d lines written, want 1", n)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
