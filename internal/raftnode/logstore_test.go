package raftnode

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/poll"
)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 100}))
}

// eventually fails t unless cond holds within timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Within(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

func TestChooseLogStore(t *testing.T) {
	cases := []struct {
		name    string
		holds   []string // what the raft dir already holds
		want    string   // configured
		got     string
		errLike string
	}{
		{name: "new dir, auto", want: LogStoreAuto, got: LogStoreWAL},
		{name: "new dir, empty means auto", want: "", got: LogStoreWAL},
		{name: "new dir, wal", want: LogStoreWAL, got: LogStoreWAL},
		{name: "new dir, boltdb", want: LogStoreBoltDB, got: LogStoreBoltDB},
		{name: "bolt dir, auto", holds: []string{BoltDBName}, want: LogStoreAuto, got: LogStoreBoltDB},
		{name: "bolt dir, boltdb", holds: []string{BoltDBName}, want: LogStoreBoltDB, got: LogStoreBoltDB},
		{name: "bolt dir, wal", holds: []string{BoltDBName}, want: LogStoreWAL, errLike: "holds a raft-boltdb log"},
		{name: "wal dir, auto", holds: []string{WALDirName + "/" + WALMetaName}, want: LogStoreAuto, got: LogStoreWAL},
		{name: "wal dir, boltdb", holds: []string{WALDirName + "/" + WALMetaName}, want: LogStoreBoltDB, errLike: "holds a raft-wal log"},
		{name: "both", holds: []string{BoltDBName, WALDirName + "/" + WALMetaName}, want: LogStoreAuto, errLike: "holds both"},
		// An empty wal/ (a crash between mkdir and the meta store's
		// creation) holds no log.
		{name: "empty wal dir, boltdb", holds: []string{WALDirName + "/"}, want: LogStoreBoltDB, got: LogStoreBoltDB},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, h := range tt.holds {
				p := filepath.Join(dir, h)
				if strings.HasSuffix(h, "/") {
					if err := os.MkdirAll(p, 0o750); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := chooseLogStore(dir, tt.want)
			if tt.errLike != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errLike) {
					t.Fatalf("chooseLogStore = %q, %v; want an error containing %q", got, err, tt.errLike)
				}
				return
			}
			if err != nil || got != tt.got {
				t.Fatalf("chooseLogStore = %q, %v; want %q", got, err, tt.got)
			}
		})
	}
}
