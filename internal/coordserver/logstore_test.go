package coordserver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/raftnode"
)

// TestUnknownLogStoreRefused: a backend name neither store has is a
// configuration error.
func TestUnknownLogStoreRefused(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.ID, c.DataDir, c.LogStore = "c1", t.TempDir(), "rocksdb"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "raft log store") {
		t.Fatalf("Validate accepted log store %q: %v", c.LogStore, err)
	}
}

// TestMixedLogStores: a member on raft-boltdb and two on raft-wal form one
// cluster (a cluster moving between backends one member at a time does
// this); a restarted member keeps the backend its data dir holds, and
// refuses to open it as the other one.
func TestMixedLogStores(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		if i == 0 {
			c.LogStore = LogStoreBoltDB
		}
	})
	a := startAppenders(t, tc, 4)
	eventually(t, 20*time.Second, "some appends", func() bool { return a.count() >= 100 })
	for i := range tc.cfgs {
		tc.cfgs[i].LogStore = LogStoreAuto
		tc.restart(i)
		tc.waitLeader()
	}
	a.halt()
	verifyJournal(t, tc, a.acked)
	for i, c := range tc.cfgs {
		raftDir := filepath.Join(c.DataDir, "raft")
		_, boltErr := os.Stat(filepath.Join(raftDir, raftnode.BoltDBName))
		_, walErr := os.Stat(filepath.Join(raftDir, raftnode.WALDirName, raftnode.WALMetaName))
		if (i == 0) != (boltErr == nil) || (i == 0) != (walErr != nil) {
			t.Fatalf("member %s: raft.db present %v, wal present %v", c.ID, boltErr == nil, walErr == nil)
		}
	}
	tc.kill(0)
	cfg := tc.cfgs[0]
	cfg.LogStore = LogStoreWAL
	if s, err := New(cfg); err == nil {
		s.shutdown()
		t.Fatal("a raft-boltdb data dir opened as raft-wal")
	}
}

// TestWALTornTailDropped (design §J8 (h)): a member whose last log
// batch did not fully reach the disk — its commit frame lost, or its bytes
// damaged — opens without it (raft-wal checks the last batch's CRC), then
// gets the entry again from the leader; every member ends with the same
// state and every acknowledged event. With WALPrefill the torn segment is
// a zeroed one (1 MiB segments keep the spares small).
func TestWALTornTailDropped(t *testing.T) {
	t.Parallel()
	for _, prefill := range []bool{false, true} {
		for _, tear := range []string{"commit frame lost", "batch bytes damaged"} {
			t.Run(fmt.Sprintf("%s/prefill=%v", tear, prefill), func(t *testing.T) { testWALTornTailDropped(t, tear, prefill) })
		}
	}
}

func testWALTornTailDropped(t *testing.T, tear string, prefill bool) {
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		if prefill {
			c.WALPrefill, c.walSegmentBytes = true, 1<<20
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.client(ctx)
	acked := map[uint64]string{}
	for i := 0; i < 20; i++ {
		p := string(rune('a'+i)) + strings.Repeat("x", 100)
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte(p)})
		if err != nil {
			t.Fatal(err)
		}
		acked[seqs[0]] = p
	}
	// The last batch: one large event, so damaged bytes land in
	// its payload, not in a frame header.
	last := strings.Repeat("\xab", 2048)
	seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte(last)})
	if err != nil {
		t.Fatal(err)
	}
	acked[seqs[0]] = last
	tc.waitConverged()
	f := tc.followers(tc.waitLeader())[0]
	before, err := tc.server(f).node.Store().LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	tc.kill(f)

	walDir := filepath.Join(tc.cfgs[f].DataDir, "raft", raftnode.WALDirName)
	tearTail(t, walDir, tear)
	w, err := raftwal.Open(walDir)
	if err != nil {
		t.Fatalf("open the torn log: %v", err)
	}
	after, err := w.LastIndex()
	w.Close()
	if err != nil || after >= before {
		t.Fatalf("torn log's last index %d (%v), want below %d: the torn batch was not dropped", after, err, before)
	}

	tc.start(f)
	verifyJournal(t, tc, acked)
	if got, _ := tc.server(f).node.Store().LastIndex(); got < before {
		t.Fatalf("member %s's log ends at %d after catching up, want >= %d", tc.cfgs[f].ID, got, before)
	}
	if _, err := os.Stat(filepath.Join(walDir, raftnode.WALSpareName)); (err == nil) != prefill {
		t.Fatalf("prefill %v, spare segment present %v", prefill, err == nil)
	}
}

// tearTail damages the last batch of the newest segment in walDir the way
// a crash mid-write would. raft-wal's segment layout: 8-byte-aligned
// frames, each batch ending with an 8-byte commit frame (type byte 3)
// whose CRC covers the batch; the preallocated rest of the file is zeros.
func tearTail(t *testing.T, walDir, how string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s (%v)", walDir, err)
	}
	slices.Sort(segs)
	path := segs[len(segs)-1] // names start with the zero-padded base index
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(data, "\x00"))
	end = (end + 7) &^ 7
	const frameCommit = 3
	if end < 16 || data[end-8] != frameCommit {
		t.Fatalf("%s: no commit frame at the end of the written data (offset %d): raft-wal's format changed?", path, end-8)
	}
	switch how {
	case "commit frame lost":
		clear(data[end-8 : end])
	case "batch bytes damaged":
		i := bytes.LastIndex(data[:end], []byte("\xab\xab\xab\xab"))
		if i < 0 || end-i > 1024 {
			t.Fatalf("%s: the last event's payload is not in the last batch", path)
		}
		data[i-512] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLogStoreTimed: every member times its log store's writes (the leader
// before it replicates, each follower before it answers), and the wrapper
// keeps the store's MonotonicLogStore answer, which changes how Raft treats
// the log after a snapshot restore.
func TestLogStoreTimed(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	a := startAppenders(t, tc, 2)
	eventually(t, 20*time.Second, "some appends", func() bool { return a.count() >= 50 })
	a.halt()
	for _, s := range tc.servers {
		eventually(t, 10*time.Second, s.ID()+" counts its log writes", func() bool {
			return storeWrites(t, s) > 0
		})
	}
	if got := (&timedLogStore{LogStore: raft.NewInmemStore()}).IsMonotonic(); got {
		t.Fatal("an in-memory store reported monotonic through the wrapper")
	}
	for _, s := range tc.servers {
		ms, ok := s.node.Store().(raft.MonotonicLogStore)
		want := ok && ms.IsMonotonic()
		if got := (&timedLogStore{LogStore: s.node.Store()}).IsMonotonic(); got != want || !want {
			t.Fatalf("%s: wrapper IsMonotonic %v, store %v (raft-wal is monotonic)", s.ID(), got, want)
		}
	}
}

// storeWrites is how many log store writes s has observed.
func storeWrites(t *testing.T, s *Server) uint64 {
	t.Helper()
	families, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "logbook_raft_log_store_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("logbook_raft_log_store_seconds not registered")
	return 0
}
