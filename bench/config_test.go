package bench

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// validator is any workload config.
type validator interface{ Validate() error }

// TestDefaultsValid: every Default*Config passes its own Validate.
func TestDefaultsValid(t *testing.T) {
	for name, c := range map[string]validator{
		"journal": DefaultJournalConfig(), "tail": DefaultTailConfig(),
		"write": DefaultWriteConfig(), "recovery": DefaultRecoveryConfig(),
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestValidateRefuses: each config out of range is a *ConfigError whose
// message names the coord bench flag, as coord bench prints it.
func TestValidateRefuses(t *testing.T) {
	journal := func(f func(*JournalConfig)) validator { c := DefaultJournalConfig(); f(&c); return c }
	tail := func(f func(*TailConfig)) validator { c := DefaultTailConfig(); f(&c); return c }
	write := func(f func(*WriteConfig)) validator { c := DefaultWriteConfig(); f(&c); return c }
	recovery := func(f func(*RecoveryConfig)) validator { c := DefaultRecoveryConfig(); f(&c); return c }
	for _, tc := range []struct {
		c    validator
		want string
	}{
		{journal(func(c *JournalConfig) { c.Clients = 0 }), "--clients 0: want 1..4096"},
		{journal(func(c *JournalConfig) { c.Clients = 4097 }), "--clients 4097: want 1..4096"},
		{journal(func(c *JournalConfig) { c.Conns = 9 }), "--conns 9: want 0..--clients (8)"},
		{journal(func(c *JournalConfig) { c.Size = -1 }), "--size -1: want >= 0"},
		{journal(func(c *JournalConfig) { c.Batch = 0 }), "--batch 0: want >= 1"},
		{journal(func(c *JournalConfig) { c.Duration = 0 }), "--duration 0s: want > 0"},
		{journal(func(c *JournalConfig) { c.Warmup = -time.Second }), "--warmup -1s: want >= 0"},
		{journal(func(c *JournalConfig) { c.Stream = 4097 }), "--stream 4097: want 0..4096"},
		{journal(func(c *JournalConfig) { c.CallTimeout = 0 }), "--timeout 0s: want a positive duration"},
		{tail(func(c *TailConfig) { c.Followers = 0 }), "want --followers 1..1024, --events >= 1, --size >= 0"},
		{tail(func(c *TailConfig) { c.Events = 0 }), "want --followers 1..1024, --events >= 1, --size >= 0"},
		{tail(func(c *TailConfig) { c.Timeout = -time.Second }), "--timeout -1s: want a positive duration"},
		{write(func(c *WriteConfig) { c.Files = 0 }), "--files 0: want 1..1000000"},
		{write(func(c *WriteConfig) { c.Size = -1 }), "--size -1: want >= 0"},
		{write(func(c *WriteConfig) { c.BlockSize = 1000 }), "--block-size 1000: want a positive multiple of 512"},
		{write(func(c *WriteConfig) { c.Chunk = 64<<20 + 1 }), "--chunk 67108865: want 1..64MiB"},
		{write(func(c *WriteConfig) { c.Replication = 0 }), "--replication 0: want 1..16"},
		{write(func(c *WriteConfig) { c.Clients = 1025 }), "--clients 1025: want 1..1024"},
		{write(func(c *WriteConfig) { c.Dir = "relative" }), `--dir "relative": want an absolute path below /`},
		{write(func(c *WriteConfig) { c.Dir = "/" }), `--dir "/": want an absolute path below /`},
		{write(func(c *WriteConfig) { c.Timeout = 0 }), "--timeout 0s: want a positive duration"},
		{recovery(func(c *RecoveryConfig) { c.Files = 0 }), "--files 0: want 1..1000000"},
		{recovery(func(c *RecoveryConfig) { c.BlockSize = 0 }), "--block-size 0: want a positive multiple of 512"},
		{recovery(func(c *RecoveryConfig) { c.Bytes = 0 }), "--bytes 0: want 1..1048575 (below --block-size: the writer dies mid-block)"},
		{recovery(func(c *RecoveryConfig) { c.Bytes = 1 << 20 }), "--bytes 1048576: want 1..1048575 (below --block-size: the writer dies mid-block)"},
		{recovery(func(c *RecoveryConfig) { c.Replication = 17 }), "--replication 17: want 1..16"},
		{recovery(func(c *RecoveryConfig) { c.Clients = 0 }), "--clients 0: want 1..1024"},
		{recovery(func(c *RecoveryConfig) { c.Trigger = "sometime" }), `--trigger "sometime": want recover-lease or hard-limit`},
		{recovery(func(c *RecoveryConfig) { c.Dir = "x" }), `--dir "x": want an absolute path below /`},
		{recovery(func(c *RecoveryConfig) { c.Poll = 0 }), "--poll 0s: want > 0"},
		{recovery(func(c *RecoveryConfig) { c.Timeout = 0 }), "--timeout 0s: want a positive duration"},
	} {
		err := tc.c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != tc.want {
			t.Errorf("%+v: %v, want a *ConfigError %q", tc.c, err, tc.want)
		}
	}
}

// TestRunRefusesInvalid: a Run function validates before it connects.
func TestRunRefusesInvalid(t *testing.T) {
	ctx := t.Context()
	var ce *ConfigError
	jc := DefaultJournalConfig()
	jc.Batch = 0
	if _, err := RunJournal(ctx, jc); !errors.As(err, &ce) {
		t.Errorf("RunJournal: %v", err)
	}
	tc := DefaultTailConfig()
	tc.Events = 0
	if _, err := RunTail(ctx, tc); !errors.As(err, &ce) {
		t.Errorf("RunTail: %v", err)
	}
	wc := DefaultWriteConfig()
	wc.Files = 0
	if _, err := RunWrite(ctx, wc); !errors.As(err, &ce) {
		t.Errorf("RunWrite: %v", err)
	}
	rc := DefaultRecoveryConfig()
	rc.Trigger = ""
	if _, err := RunRecovery(ctx, rc); !errors.As(err, &ce) {
		t.Errorf("RunRecovery: %v", err)
	}
}

// TestResultJSONFields pins the JSON field names of the results: they are
// coord bench --json's output, which bench/*.sh and tests parse.
func TestResultJSONFields(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{JournalResult{FirstErr: errors.New("x"), Timeline: []TimelineSecond{{}}},
			"ops_per_sec p50_ms p99_ms p999_ms errors events_per_sec clients conns spread size batch duration_s ops cpu_s cpu_us_per_op timeline"},
		{TimelineSecond{}, "second ops p50_ms p99_ms max_ms"},
		{TailResult{}, "followers events size min_events_per_sec_per_follower total_events_per_sec"},
		{WriteResult{FirstErr: errors.New("x")},
			"dir files size_bytes block_size replication clients written_files written_bytes write_s write_mb_per_sec write_p50_ms write_p99_ms " +
				"verified_files verified_bytes read_s read_mb_per_sec read_p50_ms read_p99_ms errors kept"},
		{RecoveryResult{FirstErr: errors.New("x"), RecoverLeaseS: 1},
			"dir files bytes_per_file replication writers trigger setup_s open_at_death recover_lease_calls_s recover_lease_closed_at_once " +
				"recover_lease_errors time_to_all_closed_s close_p50_ms close_p99_ms recoveries_per_sec still_open list_errors " +
				"journal_from_seq journal_to_seq journal_events journal_event_types journal_events_per_recovery recovery_attempts " +
				"recoveries_committed recovery_primaries journal_recovery_span_s closed length_ok verified_files errors kept"},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(jsonKeys(t, b), " "); got != tc.want {
			t.Errorf("%T fields:\n got %s\nwant %s", tc.v, got, tc.want)
		}
	}
}

// jsonKeys is the top-level keys of the JSON object b, in order.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestImports holds the package to its doc.go: the workloads reach a
// cluster through the SDK only, and leave the command line to cmd/coord.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if slices.ContainsFunc([]string{
				"github.com/logbookhq/logbook/internal/coordserver",
				"github.com/logbookhq/logbook/internal/nodeserver",
				"github.com/logbookhq/logbook/cmd/",
				"github.com/spf13/",
			}, func(p string) bool { return strings.HasPrefix(path, p) }) {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
