package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/testports"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// startTestNodes starts 3 storage nodes linked to endpoints and waits
// until a write gets a 3-node pipeline.
func startTestNodes(t *testing.T, endpoints []string) {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		cfg := nodeserver.DefaultConfig()
		cfg.ID = "node" + strconv.Itoa(i+1)
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.GossipAddr = testports.Addr(t, true)
		cfg.CoordEndpoints = endpoints
		cfg.HeartbeatInterval = 200 * time.Millisecond
		cfg.MaxLockedMemory = 16 << 20
		cfg.Logger = slog.New(slog.DiscardHandler)
		n, err := nodeserver.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		t.Cleanup(func() { n.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: endpoints, AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fs := c.FS()
	var last error
	for i := 0; ; i++ {
		path := fmt.Sprintf("/probe/%d", i)
		if last = probeFile(ctx, fs, path); last == nil {
			if _, err := fs.Delete(ctx, "/probe", true); err != nil {
				t.Fatal(err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no 3-node pipeline within 60s: %v", last)
		case <-time.After(100 * time.Millisecond): // poll interval
		}
	}
}

func probeFile(ctx context.Context, fs *client.FS, path string) error {
	w, err := fs.Create(ctx, path, client.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := w.WriteContext(ctx, []byte("x")); err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	info, err := fs.Stat(ctx, path)
	if err != nil {
		return err
	}
	if n := len(info.Blocks[0].Expected); n != 3 {
		return fmt.Errorf("pipeline of %d nodes", n)
	}
	return nil
}

// runWithStdin runs coord with stdin.
func runWithStdin(stdin io.Reader, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, env{stdin: stdin, stdout: &out, stderr: &errb, lookup: mapLookup(nil)})
	return code, out.String(), errb.String()
}

func jsonKeys(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestFSCommands(t *testing.T) {
	d, _ := startTestCluster(t)
	startTestNodes(t, d.endpoints())
	eps := "--endpoints=" + strings.Join(d.endpoints(), ",")
	coord := coordRunner(t)

	data := make([]byte, 600<<10) // 3 blocks of 256 KiB
	rand.New(rand.NewSource(7)).Read(data)
	pr, pw := io.Pipe()
	go func() {
		// Stream stdin in pieces, as a pipe delivers it.
		for off := 0; off < len(data); off += 10000 {
			pw.Write(data[off:min(off+10000, len(data))])
		}
		pw.Close()
	}()
	code, out, stderr := runWithStdin(pr, "fs", "put", "-", "/cli/f", "--block-size", "262144", "--replication", "3", "--json", eps)
	if code != 0 {
		t.Fatalf("put: exit %d: %s %s", code, out, stderr)
	}
	var put struct {
		Path   string
		Length int
	}
	decodeJSON(t, out, &put)
	if put.Path != "/cli/f" || put.Length != len(data) {
		t.Fatalf("put: %+v", put)
	}

	got, _ := coord(0, "fs", "cat", "/cli/f", eps)
	if got != string(data) {
		t.Fatalf("cat: %d bytes, want %d identical", len(got), len(data))
	}

	// Every replica's report reaches the leader soon after the close.
	var statOut string
	var raw map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; {
		statOut, _ = coord(0, "fs", "stat", "/cli/f", "--json", eps)
		var st fsStatJSON
		decodeJSON(t, statOut, &st)
		if allReplicated(st, 3) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	decodeJSON(t, statOut, &raw)
	if k := jsonKeys(raw); !reflect.DeepEqual(k, []string{"blocks", "closed", "length", "path", "replication"}) {
		t.Fatalf("stat keys %v", k)
	}
	blocks := raw["blocks"].([]any)
	if len(blocks) != 3 {
		t.Fatalf("stat: %d blocks", len(blocks))
	}
	b0 := blocks[0].(map[string]any)
	if k := jsonKeys(b0); !reflect.DeepEqual(k, []string{"gs", "id", "length", "locations", "state"}) {
		t.Fatalf("block keys %v", k)
	}
	var st fsStatJSON
	decodeJSON(t, statOut, &st)
	if st.Path != "/cli/f" || st.Length != uint64(len(data)) || !st.Closed || st.Replication != 3 || st.Blocks[0].State != "COMPLETE" {
		t.Fatalf("stat: %+v", st)
	}
	for _, b := range blocks {
		locs := b.(map[string]any)["locations"].([]any)
		if len(locs) != 3 {
			t.Fatalf("block with %d locations: %v", len(locs), b)
		}
		for _, l := range locs {
			if k := jsonKeys(l.(map[string]any)); !reflect.DeepEqual(k, []string{"cached", "gs", "length", "node", "state"}) {
				t.Fatalf("location keys %v", k)
			}
		}
	}

	lsOut, _ := coord(0, "fs", "ls", "/cli", "--json", eps)
	var ls struct{ Entries []fsEntryJSON }
	decodeJSON(t, lsOut, &ls)
	if len(ls.Entries) != 1 || ls.Entries[0].Path != "/cli/f" || ls.Entries[0].Length != uint64(len(data)) {
		t.Fatalf("ls: %+v", ls)
	}
	if table, _ := coord(0, "fs", "ls", eps); !strings.Contains(table, "/cli") {
		t.Fatalf("ls /: %q", table)
	}

	rec, _ := coord(0, "fs", "recover-lease", "/cli/f", "--json", eps)
	var rl struct{ Closed bool }
	decodeJSON(t, rec, &rl)
	if !rl.Closed {
		t.Fatalf("recover-lease of a closed file: %s", rec)
	}

	// Bad input: a relative path is a usage error; a missing file a clean
	// runtime error.
	if _, stderr := coord(2, "fs", "cat", "cli/f", eps); !strings.Contains(stderr, "absolute") {
		t.Fatalf("relative path: %q", stderr)
	}
	coord(2, "fs", "put", "-", "relative", eps)
	coord(2, "fs", "stat", eps)
	if _, stderr := coord(1, "fs", "stat", "/cli/missing", eps); !strings.Contains(stderr, "NotFound") {
		t.Fatalf("stat of a missing file: %q", stderr)
	}
	if _, stderr := coord(1, "fs", "rm", "/cli", eps); !strings.Contains(stderr, "DIRECTORY_NOT_EMPTY") {
		t.Fatalf("rm of a directory without -r: %q", stderr)
	}

	rmOut, _ := coord(0, "fs", "rm", "/cli", "-r", "--json", eps)
	var rm struct {
		RemovedFiles uint64 `json:"removed_files"`
	}
	decodeJSON(t, rmOut, &rm)
	if rm.RemovedFiles != 1 {
		t.Fatalf("rm: %s", rmOut)
	}
	coord(1, "fs", "stat", "/cli/f", eps)

	// coord nodes shutdown: an unknown node is a clean error; node3 goes
	// down for a restart (its gRPC stops answering); a second request is
	// refused.
	if _, stderr := coord(1, "nodes", "shutdown", "node9", eps); !strings.Contains(stderr, "node9") {
		t.Fatalf("shutdown of an unknown node: %q", stderr)
	}
	coord(2, "nodes", "shutdown", eps)
	nodesOut, _ := coord(0, "nodes", "--json", eps)
	var nodes nodesJSON
	decodeJSON(t, nodesOut, &nodes)
	addr := ""
	for _, n := range nodes.Nodes {
		if n.ID == "node3" {
			addr = n.GRPCAddr
		}
	}
	sdOut, _ := coord(0, "nodes", "shutdown", "node3", "--restart", "--json", eps)
	var sd struct {
		Node       string `json:"node"`
		ForRestart bool   `json:"for_restart"`
	}
	decodeJSON(t, sdOut, &sd)
	if sd.Node != "node3" || !sd.ForRestart {
		t.Fatalf("shutdown: %s", sdOut)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := pb.NewDataNodeClient(cc).VolumeInfo(context.Background(), &pb.VolumeInfoRequest{})
		if status.Code(err) == codes.Unavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node3 still answers after its shutdown: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	coord(1, "nodes", "shutdown", addr, eps) // down (or still going down): refused
}

func allReplicated(st fsStatJSON, want int) bool {
	for _, b := range st.Blocks {
		if len(b.Locations) != want {
			return false
		}
	}
	return len(st.Blocks) > 0
}
