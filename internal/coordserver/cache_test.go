package coordserver

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// fastCache is fastReplication with the cache monitor every 100 ms and
// cache commands re-judged after 5 s.
func fastCache(i int, c *Config) {
	fastReplication(i, c)
	c.FS.CacheCheckInterval = 100 * time.Millisecond
	c.FS.CacheTimeout = 5 * time.Second
}

// lockedMemory gives a node a cache budget.
func lockedMemory(n int64) func(*nodeserver.Config) {
	return func(c *nodeserver.Config) { c.MaxLockedMemory = n }
}

// cachedOn returns the running nodes whose dataset holds block id cached
// (read from the datasets, not from the coordinator's view).
func cachedOn(t *testing.T, nodes map[string]*nodeserver.Server, id uint64) []string {
	t.Helper()
	var out []string
	for nid, s := range nodes {
		ids, err := s.Store().CacheReport("BP-1")
		if err != nil {
			t.Fatalf("%s: cache report: %v", nid, err)
		}
		if slices.Contains(ids, id) {
			out = append(out, nid)
		}
	}
	slices.Sort(out)
	return out
}

// leaderSeesCached reports whether the leader's Stat of path shows its
// first block cached on exactly the nodes want (the monitor learned it
// from the cache reports), and its directive listing the block cached.
func leaderSeesCached(ctx context.Context, e *fsEnv, path string, want []string) bool {
	st, err := e.ns.Stat(ctx, &pb.StatRequest{Path: path})
	if err != nil || len(st.Blocks) != 1 {
		return false
	}
	var cached []string
	for _, r := range st.Blocks[0].ReportedLocations {
		if r.Cached {
			cached = append(cached, r.NodeId)
		}
	}
	slices.Sort(cached)
	ls, err := e.ns.ListCacheDirectives(ctx, &pb.ListCacheDirectivesRequest{})
	if err != nil {
		return false
	}
	full := len(ls.Directives) == 1 && ls.Directives[0].BlocksNeeded == 1 && ls.Directives[0].BlocksCached == 1
	return slices.Equal(cached, want) && (full || len(want) == 0)
}

// cacheCluster starts coordinators (fastCache) and n real nodes with a
// cache budget, and writes path (replication 3, size random bytes, one
// block); it returns the nodes by id, the block and the bytes.
func cacheCluster(ctx context.Context, t *testing.T, n int, path string, size int) (*fsEnv, map[string]*nodeserver.Server, *pb.BlockRecord, []byte) {
	t.Helper()
	e := newFSEnv(t, fastCache)
	servers := startNodes(t, e, n, lockedMemory(4<<20))
	data := make([]byte, size)
	rand.New(rand.NewSource(int64(size))).Read(data)
	b := writeFile(ctx, t, e, path, data)
	nodes := map[string]*nodeserver.Server{}
	for _, s := range servers {
		nodes[s.ID()] = s
	}
	return e, nodes, b, data
}

// TestCacheDirectivesWithRealNodes: a closed file's block, replicated on 3
// of 4 nodes, gets a directive with replication 2: exactly 2 of its
// holders cache it. A cached node killed for good: once it is dead the
// block is cached on another live holder. Removing the directive uncaches
// it everywhere.
func TestCacheDirectivesWithRealNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, nodes, b, data := cacheCluster(ctx, t, 4, "/cache/f", 300_000+17)
	dns := map[string]pb.DataNodeClient{}
	for id, s := range nodes {
		dns[id] = dataNode(t, s)
	}
	eventually(t, 20*time.Second, "3 finalized replicas", func() bool { return len(finalizedHolders(ctx, t, dns, b, len(data))) == 3 })

	add, err := e.ns.AddCacheDirective(ctx, &pb.AddCacheDirectiveRequest{Path: "/cache/f", Replication: 2})
	if err != nil {
		t.Fatal(err)
	}
	if add.Directive.GetId() != 1 || add.Seq == 0 {
		t.Fatalf("added %v at seq %d", add.Directive, add.Seq)
	}
	var cached []string
	eventually(t, 30*time.Second, "the block cached on 2 nodes, and the leader seeing it", func() bool {
		cached = cachedOn(t, nodes, b.Id)
		return len(cached) == 2 && leaderSeesCached(ctx, e, "/cache/f", cached)
	})
	holders := finalizedHolders(ctx, t, dns, b, len(data))
	for _, c := range cached {
		if !slices.Contains(holders, c) {
			t.Fatalf("cached on %s, which holds no finalized replica (holders %v)", c, holders)
		}
	}

	victim := cached[0]
	nodes[victim].Close()
	delete(nodes, victim)
	delete(dns, victim)
	eventually(t, 40*time.Second, "the block cached on 2 live holders again", func() bool {
		cached = cachedOn(t, nodes, b.Id)
		if len(cached) != 2 || !leaderSeesCached(ctx, e, "/cache/f", cached) {
			return false
		}
		holders := finalizedHolders(ctx, t, dns, b, len(data))
		return slices.Contains(holders, cached[0]) && slices.Contains(holders, cached[1])
	})

	if _, err := e.ns.RemoveCacheDirective(ctx, &pb.RemoveCacheDirectiveRequest{Id: add.Directive.Id}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the block uncached everywhere", func() bool {
		return len(cachedOn(t, nodes, b.Id)) == 0 && leaderSeesCached(ctx, e, "/cache/f", nil)
	})
	if err := e.tc.server(e.tc.waitLeader()).blocks.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}

// TestCacheDirectivesSurviveLeaderChange: directives are replicated; a new
// leader starts with no cache state, learns from the nodes' cache reports
// that the block is cached where it is (no second copy, no uncache), and
// its own monitor acts on a removal.
func TestCacheDirectivesSurviveLeaderChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, nodes, b, _ := cacheCluster(ctx, t, 3, "/cache/g", 200_000+3)
	if _, err := e.ns.AddCacheDirective(ctx, &pb.AddCacheDirectiveRequest{Path: "/cache/g", Replication: 2}); err != nil {
		t.Fatal(err)
	}
	var before []string
	eventually(t, 30*time.Second, "the block cached on 2 nodes", func() bool {
		before = cachedOn(t, nodes, b.Id)
		return len(before) == 2 && leaderSeesCached(ctx, e, "/cache/g", before)
	})

	old := e.leader
	e.tc.kill(old)
	e.connect(e.tc.waitLeader())
	if e.leader == old {
		t.Fatal("same leader")
	}
	ls, err := e.ns.ListCacheDirectives(ctx, &pb.ListCacheDirectivesRequest{})
	if err != nil || len(ls.Directives) != 1 || ls.Directives[0].Directive.Path != "/cache/g" || ls.Directives[0].Directive.Replication != 2 {
		t.Fatalf("the new leader's directives: %v, %v", ls, err)
	}
	eventually(t, 30*time.Second, "the new leader seeing the block cached where it was", func() bool {
		return leaderSeesCached(ctx, e, "/cache/g", before)
	})
	if got := cachedOn(t, nodes, b.Id); !slices.Equal(got, before) {
		t.Fatalf("after the leader change the block is cached on %v, was %v", got, before)
	}

	ls, err = e.ns.ListCacheDirectives(ctx, &pb.ListCacheDirectivesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ns.RemoveCacheDirective(ctx, &pb.RemoveCacheDirectiveRequest{Id: ls.Directives[0].Directive.Id}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the block uncached by the new leader", func() bool {
		return len(cachedOn(t, nodes, b.Id)) == 0 && leaderSeesCached(ctx, e, "/cache/g", nil)
	})
}

// TestCacheDirectiveBadInput: every malformed or refused cache request gets
// a clear status with a reason, changes no directive and writes no journal
// event; a cache report from an unregistered node or over the bound is
// refused and leaves the leader's view as it was.
func TestCacheDirectiveBadInput(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t)
	e.registerNodes(1)
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/f", Replication: 2, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	add := func(path string, rep uint32) func() error {
		return func() error {
			_, err := e.ns.AddCacheDirective(e.ctx, &pb.AddCacheDirectiveRequest{Path: path, Replication: rep})
			return err
		}
	}
	ok, err := e.ns.AddCacheDirective(e.ctx, &pb.AddCacheDirectiveRequest{Path: "/f", Replication: 1})
	if err != nil {
		t.Fatal(err)
	}
	seq := e.nextSeq()
	hugeReport := &clusterpb.CacheReport{Capacity: 1 << 30, BlockIds: make([]uint64, pb.MaxCacheReportBlocks+1)}
	for _, c := range []struct {
		what   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"empty path", add("", 1), codes.InvalidArgument, ReasonBadRequest},
		{"relative path", add("f", 1), codes.InvalidArgument, ReasonBadRequest},
		{"oversize path", add("/"+strings.Repeat("a", 5000), 1), codes.InvalidArgument, ReasonBadRequest},
		{"unclean path", add("/a/../f", 1), codes.InvalidArgument, "INVALID_PATH"},
		{"unknown path", add("/nope", 1), codes.NotFound, "FILE_NOT_FOUND"},
		{"replication 0", add("/f", 0), codes.InvalidArgument, "INVALID_CACHE_REPLICATION"},
		{"above the file's replication", add("/f", 3), codes.InvalidArgument, "INVALID_CACHE_REPLICATION"},
		{"above the cap", add("/f", fsm.MaxCacheReplication+1), codes.InvalidArgument, "INVALID_CACHE_REPLICATION"},
		{"duplicate path", add("/f", 2), codes.AlreadyExists, "DIRECTIVE_EXISTS"},
		{"unknown id", func() error {
			_, err := e.ns.RemoveCacheDirective(e.ctx, &pb.RemoveCacheDirectiveRequest{Id: 42})
			return err
		}, codes.NotFound, "DIRECTIVE_NOT_FOUND"},
		{"too many directives", func() error {
			return e.tc.server(e.leader).fsErr(fmt.Errorf("%w: 10000 directives", fsm.ErrTooManyDirectives))
		}, codes.ResourceExhausted, "TOO_MANY_DIRECTIVES"},
		{"cache report of an unregistered node", func() error {
			_, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: "ghost", Cache: &clusterpb.CacheReport{Capacity: 1, BlockIds: []uint64{7}}})
			return err
		}, codes.FailedPrecondition, ReasonNodeNotRegistered},
		{"oversize cache report", func() error {
			_, err := e.nl.Heartbeat(e.ctx, &clusterpb.NodeHeartbeatRequest{NodeId: nodeID(1), Cache: hugeReport})
			return err
		}, codes.InvalidArgument, ReasonBadRequest},
	} {
		wantCode(t, c.what, c.call(), c.code, c.reason)
	}
	if got := e.nextSeq(); got != seq {
		t.Fatalf("refused requests wrote journal events: next seq %d, was %d", got, seq)
	}
	ls, err := e.ns.ListCacheDirectives(e.ctx, &pb.ListCacheDirectivesRequest{})
	if err != nil || len(ls.Directives) != 1 || !proto.Equal(ls.Directives[0].Directive, ok.Directive) {
		t.Fatalf("directives after the refusals: %v, %v", ls, err)
	}
	r, err := e.ns.ListNodes(e.ctx, &pb.ListNodesRequest{})
	if err != nil || len(r.Nodes) != 1 || r.Nodes[0].CachedBlocks != 0 {
		t.Fatalf("a refused cache report changed the leader's view: %v, %v", r, err)
	}
}

// TestCacheDirectivesWaitForLogFormat4: while one voter runs a build that
// reads log format 3 at most, the cluster stays at format 3 and cache
// directives are refused (FailedPrecondition LOG_FORMAT) without proposing
// anything; once that voter is upgraded the leader raises the format to 4
// (the newest, which includes 4) and directives are accepted.
func TestCacheDirectivesWaitForLogFormat4(t *testing.T) {
	t.Parallel()
	e := newFSEnv(t, func(i int, c *Config) {
		if i == 2 {
			c.maxLogFormat = fsm.NamespaceFormat
		}
	})
	if _, err := e.ns.Create(e.ctx, &pb.CreateRequest{Path: "/f", Replication: 1, BlockSize: 1 << 20, ClientName: "w1"}); err != nil {
		t.Fatal(err)
	}
	format := func() uint32 { return e.tc.server(e.tc.waitLeader()).logFormat() }
	eventually(t, 20*time.Second, "every member registered", func() bool {
		n := 0
		e.tc.server(e.tc.waitLeader()).fsm.View(func(st *fsm.State) { n = len(st.Members()) })
		return n == 3
	})
	e.tc.server(e.tc.waitLeader()).upgradeLogFormat()
	if f := format(); f != fsm.NamespaceFormat {
		t.Fatalf("with a format-3 voter the cluster is at format %d", f)
	}
	seq := e.nextSeq()
	_, err := e.ns.AddCacheDirective(e.ctx, &pb.AddCacheDirectiveRequest{Path: "/f", Replication: 1})
	wantCode(t, "directive at format 3", err, codes.FailedPrecondition, ReasonLogFormat)
	if e.nextSeq() != seq {
		t.Fatal("a refused directive wrote a journal event")
	}

	e.tc.cfgs[2].maxLogFormat = 0
	e.tc.restart(2)
	eventually(t, 30*time.Second, "the newest log format", func() bool { return format() == fsm.CommandVersion })
	e.connect(e.tc.waitLeader())
	r, err := e.ns.AddCacheDirective(e.ctx, &pb.AddCacheDirectiveRequest{Path: "/f", Replication: 1})
	if err != nil || r.Directive.GetId() != 1 {
		t.Fatalf("directive at format 4: %v, %v", r, err)
	}
	if v := lastEntryVersion(t, e.tc.server(e.leader)); v != fsm.CommandVersion {
		t.Fatalf("the directive was written in format %d", v)
	}
}
