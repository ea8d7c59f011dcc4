package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
)

// TestRecoveryCommands: a writer dies after an hflush; the leader recovers
// its block on the dev cluster's real storage nodes; coord recovery ls and
// show rebuild the recovery from the journal.
// awaitNodes waits until the leader sees n live nodes with a full
// report and is out of safe mode.
func awaitNodes(t *testing.T, ctx context.Context, c *client.Client, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d live storage nodes", n), func() error {
		r, err := c.Nodes(ctx)
		if err != nil {
			return err
		}
		live := 0
		for _, s := range r.Nodes {
			if s.Live && s.FullReport {
				live++
			}
		}
		if live != n || r.SafeMode {
			return fmt.Errorf("%d live nodes, safe mode %v", live, r.SafeMode)
		}
		return nil
	})
}

func TestRecoveryCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d, wctx := startTestDev(t, devOptions{Members: 1, Nodes: 3,
		HeartbeatInterval: 100 * time.Millisecond, LeaseSoftLimit: time.Second, LeaseHardLimit: 2 * time.Second}, 60*time.Second)
	eps := "--endpoints=" + d.endpoints()[0]
	c, err := client.New(wctx, client.Config{Endpoints: d.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	awaitNodes(t, wctx, c, 3)
	var w *client.FileWriter
	eventually(t, "a 3-node pipeline", func() error {
		w, err = c.FS().Create(wctx, "/r/f", client.CreateOptions{Replication: 3, BlockSize: 1 << 20})
		if err != nil {
			return err
		}
		if _, err = w.Write(make([]byte, 100_000)); err == nil {
			err = w.Sync(wctx)
		}
		if err != nil {
			w.Abort()
			c.FS().Delete(wctx, "/r/f", false)
		}
		return err
	})
	w.Abort() // the writer dies: its lease expires, the leader recovers

	var got struct {
		Recoveries []recoveryJSON `json:"recoveries"`
	}
	eventually(t, "a committed recovery", func() error {
		code, out, stderr := run(t, nil, "recovery", "ls", "--json", eps)
		if code != 0 {
			return fmt.Errorf("recovery ls: exit %d: %s", code, stderr)
		}
		got.Recoveries = nil
		decodeJSON(t, out, &got)
		if len(got.Recoveries) != 1 || !got.Recoveries[0].Committed {
			return fmt.Errorf("no committed recovery: %s", out)
		}
		return nil
	})
	r := got.Recoveries[0]
	if r.Path != "/r/f" || len(r.Attempts) < 1 || r.Attempts[0].Primary == "" || r.Length < 100_000 || len(r.Participants) != 3 || !r.FileClosed || r.NewGS <= r.OldGS {
		t.Fatalf("recovery: %+v", r)
	}
	code, out, _ := run(t, nil, "recovery", "show", fmt.Sprint(r.BlockID), eps)
	if code != 0 || !strings.Contains(out, "committed by recovery") || !strings.Contains(out, "participants:") {
		t.Fatalf("recovery show: exit %d: %s", code, out)
	}
	if code, _, stderr := run(t, nil, "recovery", "show", "12345", eps); code != 1 || !strings.Contains(stderr, "no recovery of block 12345") {
		t.Fatalf("show of an unknown block: exit %d: %s", code, stderr)
	}
	if code, _, _ := run(t, nil, "recovery", "show", "abc", eps); code != 2 {
		t.Fatalf("show abc: exit %d, want 2", code)
	}
}
