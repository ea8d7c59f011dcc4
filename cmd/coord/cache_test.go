package main

import (
	"fmt"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestCacheCommands: coord cache add caches a file's blocks on
// --replication nodes (fs stat --json shows "cached"), cache ls lists the
// directive with its figures, cache rm uncaches; bad input is a usage
// error (exit 2) or a clear status (exit 1).
func TestCacheCommands(t *testing.T) {
	d, _ := startTestCluster(t)
	startTestNodes(t, d.endpoints())
	eps := "--endpoints=" + strings.Join(d.endpoints(), ",")
	coord := coordRunner(t)

	data := make([]byte, 300<<10) // 2 blocks of 256 KiB
	rand.New(rand.NewSource(8)).Read(data)
	if code, out, stderr := runWithStdin(strings.NewReader(string(data)), "fs", "put", "-", "/c/f", "--block-size", "262144", "--replication", "3", eps); code != 0 {
		t.Fatalf("put: exit %d: %s %s", code, out, stderr)
	}
	out, _ := coord(0, "cache", "add", "/c/f", "--replication", "2", "--json", eps)
	var add map[string]any
	decodeJSON(t, out, &add)
	if k := jsonKeys(add); !reflect.DeepEqual(k, []string{"blocks_cached", "blocks_needed", "bytes_cached", "bytes_needed", "created", "id", "path", "replication"}) {
		t.Fatalf("add keys %v", k)
	}
	var dir cacheDirectiveJSON
	decodeJSON(t, out, &dir)
	if dir.ID != 1 || dir.Path != "/c/f" || dir.Replication != 2 {
		t.Fatalf("add: %s", out)
	}
	cachedPerBlock := func() []int {
		statOut, _ := coord(0, "fs", "stat", "/c/f", "--json", eps)
		var st fsStatJSON
		decodeJSON(t, statOut, &st)
		var n []int
		for _, b := range st.Blocks {
			c := 0
			for _, l := range b.Locations {
				if l.Cached {
					c++
				}
			}
			n = append(n, c)
		}
		return n
	}
	eventually(t, "both blocks cached on 2 nodes", func() error {
		if n := cachedPerBlock(); !reflect.DeepEqual(n, []int{2, 2}) {
			return fmt.Errorf("cached replicas per block %v", n)
		}
		lsOut, _ := coord(0, "cache", "ls", "--json", eps)
		var ls struct{ Directives []cacheDirectiveJSON }
		decodeJSON(t, lsOut, &ls)
		if len(ls.Directives) != 1 || ls.Directives[0].BlocksCached != 2 || ls.Directives[0].BlocksNeeded != 2 ||
			ls.Directives[0].BytesCached != 2*uint64(len(data)) || ls.Directives[0].BytesNeeded != 2*uint64(len(data)) {
			return fmt.Errorf("cache ls: %s", lsOut)
		}
		return nil
	})
	if table, _ := coord(0, "cache", "ls", eps); !strings.Contains(table, "/c/f") || !strings.Contains(table, "2 / 2") {
		t.Fatalf("cache ls: %q", table)
	}
	if table, _ := coord(0, "fs", "stat", "/c/f", eps); !strings.Contains(table, "+cached") {
		t.Fatalf("fs stat: %q", table)
	}

	// Bad input.
	if _, stderr := coord(2, "cache", "add", "c/f", eps); !strings.Contains(stderr, "absolute") {
		t.Fatalf("relative path: %q", stderr)
	}
	for _, c := range []struct{ args, want string }{
		{"add /c/f --replication 1", "DIRECTIVE_EXISTS"},
		{"add /c/missing", "FILE_NOT_FOUND"},
		{"add /c --replication 1", "FILE_NOT_FOUND"},
		{"rm 99", "DIRECTIVE_NOT_FOUND"},
	} {
		if _, stderr := coord(1, append(append([]string{"cache"}, strings.Fields(c.args)...), eps)...); !strings.Contains(stderr, c.want) {
			t.Fatalf("cache %s: %q, want %s", c.args, stderr, c.want)
		}
	}
	for _, rep := range []int{0, 4, 17} {
		if _, stderr := coord(1, "cache", "add", "/c/f", "--replication", strconv.Itoa(rep), eps); !strings.Contains(stderr, "INVALID_CACHE_REPLICATION") {
			t.Fatalf("replication %d: %q", rep, stderr)
		}
	}
	coord(2, "cache", "rm", "x", eps)
	coord(2, "cache", "rm", "0", eps)
	coord(2, "cache", "add", eps)

	rmOut, _ := coord(0, "cache", "rm", "1", "--json", eps)
	var rm struct{ Removed uint64 }
	decodeJSON(t, rmOut, &rm)
	if rm.Removed != 1 {
		t.Fatalf("rm: %s", rmOut)
	}
	eventually(t, "the blocks uncached", func() error {
		if n := cachedPerBlock(); !reflect.DeepEqual(n, []int{0, 0}) {
			return fmt.Errorf("cached replicas per block %v", n)
		}
		return nil
	})
	lsOut, _ := coord(0, "cache", "ls", "--json", eps)
	var ls map[string][]any
	decodeJSON(t, lsOut, &ls)
	if d, ok := ls["directives"]; !ok || d == nil || len(d) != 0 {
		t.Fatalf("ls after rm: %s", lsOut)
	}
}
