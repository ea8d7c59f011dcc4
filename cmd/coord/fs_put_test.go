package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
)

// failingReader yields n bytes, then fails: a source that breaks mid-put.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("source broke")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// TestFSPutLeavesNothing: fs put checks its source and flags before it
// creates anything, removes what it created when it cannot finish (no
// partial file, no lease left), says when another writer holds the lease
// and what frees it, and warns when the replication is above the live
// nodes. fs stat of a directory shows a directory.
func TestFSPutLeavesNothing(t *testing.T) {
	d, _ := startTestCluster(t)
	startTestNodes(t, d.endpoints())
	eps := "--endpoints=" + strings.Join(d.endpoints(), ",")
	coord := coordRunner(t)
	missing := func(path string) {
		t.Helper()
		if _, stderr := coord(1, "fs", "stat", path, eps); !strings.Contains(stderr, "NotFound") {
			t.Fatalf("stat %s: %q, want NotFound", path, stderr)
		}
	}

	// The source is checked first: a directory, a missing file.
	if _, stderr := coord(1, "fs", "put", t.TempDir(), "/x", eps); !strings.Contains(stderr, "is a directory") {
		t.Fatalf("put of a directory: %q", stderr)
	}
	if _, stderr := coord(1, "fs", "put", filepath.Join(t.TempDir(), "nope"), "/x", eps); !strings.Contains(stderr, "no such file") {
		t.Fatalf("put of a missing file: %q", stderr)
	}
	// Replication out of range is a usage error.
	for _, r := range []string{"0", "17"} {
		if _, stderr := coord(2, "fs", "put", "-", "/x", "--replication", r, eps); !strings.Contains(stderr, "want 1 to 16") {
			t.Fatalf("--replication %s: %q", r, stderr)
		}
	}
	missing("/x")

	// A source that breaks after 300 KiB (two blocks of 256 KiB begun):
	// the partial file is removed, and a new put of the path needs no
	// --overwrite and finds no lease.
	code, _, stderr := runWithStdin(&failingReader{n: 300 << 10}, "fs", "put", "-", "/y", "--block-size", "262144", eps)
	if code != 1 || !strings.Contains(stderr, "source broke") || !strings.Contains(stderr, "partial /y was removed") {
		t.Fatalf("put from a broken source: exit %d, %q", code, stderr)
	}
	missing("/y")
	data := make([]byte, 100<<10)
	rand.New(rand.NewSource(3)).Read(data)
	if code, out, stderr := runWithStdin(strings.NewReader(string(data)), "fs", "put", "-", "/y", eps); code != 0 {
		t.Fatalf("put after the failed one: exit %d, %q %q", code, out, stderr)
	}
	if got, _ := coord(0, "fs", "cat", "/y", eps); got != string(data) {
		t.Fatalf("cat /y: %d bytes, want %d identical", len(got), len(data))
	}

	// Another writer's lease: the refusal says how long ago it renewed
	// and how to free it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: d.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.FS().Create(ctx, "/z", client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	_, stderr = coord(1, "fs", "put", "-", "/z", "--overwrite", eps)
	for _, want := range []string{"currently owned by " + c.ClientID(), "renewed", "coord fs recover-lease /z"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("put over a held lease: %q does not say %q", stderr, want)
		}
	}

	// Replication above the 3 live nodes: written, with a warning, and
	// stat shows the blocks under-replicated.
	code, _, stderr = runWithStdin(strings.NewReader(string(data)), "fs", "put", "-", "/r5", "--replication", "5", eps)
	if code != 0 || !strings.Contains(stderr, "replication 5 is above the 3 live storage nodes") {
		t.Fatalf("put --replication 5: exit %d, %q", code, stderr)
	}
	var st fsStatJSON
	eventually(t, "the replicas of /r5 reported", func() error {
		out, _ := coord(0, "fs", "stat", "/r5", "--json", eps)
		st = fsStatJSON{}
		decodeJSON(t, out, &st)
		if !allReplicated(st, 3) {
			return fmt.Errorf("stat: %s", out)
		}
		return nil
	})
	if st.Replication != 5 || st.UnderReplicated != len(st.Blocks) || st.UnderReplicated == 0 {
		t.Fatalf("stat /r5: %+v", st)
	}
	if table, _ := coord(0, "fs", "stat", "/r5", eps); !strings.Contains(table, "fewer than 5 replicas") {
		t.Fatalf("stat /r5 table: %q", table)
	}

	// Directories, the root included.
	var dir fsDirJSON
	out, _ := coord(0, "fs", "stat", "/", "--json", eps)
	decodeJSON(t, out, &dir)
	if !dir.Dir || dir.Path != "/" || dir.Entries != 3 { // /y, /z, /r5
		t.Fatalf("stat /: %s", out)
	}
	if table, _ := coord(0, "fs", "stat", "/", eps); !strings.Contains(table, "directory") {
		t.Fatalf("stat / table: %q", table)
	}
	if _, stderr := coord(1, "fs", "cat", "/", eps); !strings.Contains(stderr, "is a directory") {
		t.Fatalf("cat /: %q", stderr)
	}
}
