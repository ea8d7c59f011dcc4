package main

import (
	"errors"
	"testing"
	"time"

	"github.com/logbookhq/logbook/bench"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
)

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4KiB": 4 << 10, "4k": 4 << 10, "8MiB": 8 << 20, " 2 M ": 2 << 20, "1GiB": 1 << 30, "512B": 512, "0": 0} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5MiB", "4TiB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
	for b, want := range map[byteSize]string{0: "0", 4096: "4KiB", 8 << 20: "8MiB", 1000: "1000", 3 << 30: "3GiB"} {
		if got := b.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", int64(b), got, want)
		}
	}
}

func TestBenchFSUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "write", "--files", "0"},
		{"bench", "write", "--block-size", "1000"},
		{"bench", "write", "--size", "lots"},
		{"bench", "write", "--dir", "relative"},
		{"bench", "write", "--replication", "0"},
		{"bench", "recovery", "--trigger", "sometime"},
		{"bench", "recovery", "--bytes", "0"},
		{"bench", "recovery", "--bytes", "1MiB", "--block-size", "1MiB"},
		{"bench", "recovery", "--clients", "0"},
		{"bench", "recovery", "--poll", "0s"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", args, code, stderr)
		}
	}
}

// TestBenchFS runs coord bench write and coord bench recovery (both
// triggers) with a few files against an in-process cluster with storage
// nodes, and checks their JSON.
func TestBenchFS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d, wctx := startTestDev(t, devOptions{Members: 1, Nodes: 3,
		HeartbeatInterval: 100 * time.Millisecond, LeaseSoftLimit: time.Second, LeaseHardLimit: 3 * time.Second}, 60*time.Second)
	c, err := client.New(wctx, client.Config{Endpoints: d.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	awaitNodes(t, wctx, c, 3)
	eps := "--endpoints=" + d.endpoints()[0]
	gone := func(dir string) {
		t.Helper()
		if _, err := c.FS().Stat(wctx, dir); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("stat %s after the bench: %v, want NotFound", dir, err)
		}
	}

	t.Run("write", func(t *testing.T) {
		code, out, stderr := run(t, nil, "bench", "write", "--files", "3", "--size", "600KiB", "--block-size", "256KiB",
			"--chunk", "100000", "--clients", "2", "--dir", "/bench/t-write", "--json", eps)
		if code != 0 {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		var r bench.WriteResult
		decodeJSON(t, out, &r)
		const size = 600 << 10
		if r.Files != 3 || r.WrittenFiles != 3 || r.VerifiedFiles != 3 || r.WrittenBytes != 3*size || r.VerifiedBytes != 3*size ||
			r.SizeBytes != size || r.Replication != 3 || r.Errors != 0 || r.Kept || r.Dir != "/bench/t-write" {
			t.Fatalf("result: %s", out)
		}
		if r.WriteMBPerS <= 0 || r.ReadMBPerS <= 0 || r.WriteP50Ms <= 0 || r.WriteP99Ms < r.WriteP50Ms || r.ReadP50Ms <= 0 || r.ReadP99Ms < r.ReadP50Ms {
			t.Fatalf("figures: %s", out)
		}
		gone("/bench/t-write")
	})

	checkRecovery := func(t *testing.T, out string, files int, trigger string) {
		t.Helper()
		var r bench.RecoveryResult
		decodeJSON(t, out, &r)
		if r.Files != files || r.Trigger != trigger || r.OpenAtDeath != files || r.StillOpen != 0 || r.Closed != files ||
			r.LengthOK != files || r.VerifiedFiles != files || r.Errors != 0 || r.Kept || r.BytesSynced != 4096 {
			t.Fatalf("result: %s", out)
		}
		started, committed := r.EventTypes[fsm.EventRecoveryStarted], r.EventTypes[fsm.EventRecoveryCommitted]
		if r.RecoveryAttempts < files || r.RecoveriesDone < files || started != r.RecoveryAttempts || committed != r.RecoveriesDone {
			t.Fatalf("recovery events: %s", out)
		}
		if r.JournalFrom == 0 || r.JournalTo < r.JournalFrom || r.JournalEvents < 2*files || r.EventsPerRecovery < 2 {
			t.Fatalf("journal: %s", out)
		}
		total := 0
		for _, n := range r.Primaries {
			total += n
		}
		if total != r.RecoveryAttempts {
			t.Fatalf("primaries: %s", out)
		}
		if r.AllClosedS <= 0 || r.RecoveriesPerSec <= 0 || r.CloseP99Ms < r.CloseP50Ms || r.SetupS <= 0 {
			t.Fatalf("figures: %s", out)
		}
	}

	t.Run("recover-lease", func(t *testing.T) {
		code, out, stderr := run(t, nil, "bench", "recovery", "--files", "10", "--clients", "3", "--dir", "/bench/t-rl", "--json", eps)
		if code != 0 {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		checkRecovery(t, out, 10, bench.TriggerRecoverLease)
		gone("/bench/t-rl")
	})

	t.Run("hard-limit", func(t *testing.T) {
		code, out, stderr := run(t, nil, "bench", "recovery", "--files", "4", "--clients", "2", "--trigger", "hard-limit",
			"--dir", "/bench/t-hl", "--timeout", "60s", "--json", eps)
		if code != 0 {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		checkRecovery(t, out, 4, bench.TriggerHardLimit)
		var r bench.RecoveryResult
		decodeJSON(t, out, &r)
		if r.RecoverLeaseS != 0 || r.ClosedByCall != 0 {
			t.Fatalf("hard-limit made RecoverLease calls: %s", out)
		}
		gone("/bench/t-hl")
	})
}
