package coordserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestFormByBootstrapExpect(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			tc := newTestCluster(t, n)
			leader := tc.waitLeader()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Exactly one member bootstrapped: every member holds the
			// same single configuration of n voters.
			formed := 0
			for i := range tc.servers {
				if tc.server(i).formed.Load() {
					formed++
				}
			}
			if formed != 1 {
				t.Fatalf("%d members bootstrapped, want exactly 1", formed)
			}
			eventually(t, 10*time.Second, "every member to hold the one configuration", func() bool {
				for i := range tc.servers {
					f := tc.server(i).raft.GetConfiguration()
					if f.Error() != nil || len(f.Configuration().Servers) != n {
						return false
					}
				}
				return true
			})
			c := tc.client(ctx)
			seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("a")}, client.Event{Type: "t", Payload: []byte("b")})
			if err != nil {
				t.Fatal(err)
			}
			if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
				t.Fatalf("seqs %v", seqs)
			}
			st, err := c.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.LeaderID != tc.cfgs[leader].ID || len(st.Members) != n || st.ClusterID != "test-cluster" {
				t.Fatalf("status %+v", st)
			}
			eventually(t, 10*time.Second, "all members healthy in status", func() bool {
				st, err := c.Status(ctx)
				if err != nil {
					return false
				}
				for _, m := range st.Members {
					if !m.Healthy || m.GRPCAddr == "" {
						return false
					}
				}
				return true
			})
			tc.waitConverged()
		})
	}
}

// appender runs concurrent appenders until stopped and records every
// acknowledged append.
type appender struct {
	mu    sync.Mutex
	acked map[uint64]string // seq -> payload
	errs  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startAppenders(t *testing.T, tc *testCluster, workers int) *appender {
	a := &appender{acked: map[uint64]string{}, stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := tc.client(ctx)
			for i := 0; ; i++ {
				select {
				case <-a.stop:
					return
				default:
				}
				payload := fmt.Sprintf("w%d-%d", w, i)
				actx, acancel := context.WithTimeout(ctx, 15*time.Second)
				seqs, err := c.Journal().Append(actx, client.Event{Type: "load", Payload: []byte(payload)})
				acancel()
				if err != nil {
					a.errs.Add(1)
					continue
				}
				a.mu.Lock()
				if prev, dup := a.acked[seqs[0]]; dup {
					t.Errorf("seq %d acknowledged twice (%q and %q)", seqs[0], prev, payload)
				}
				a.acked[seqs[0]] = payload
				a.mu.Unlock()
			}
		}()
	}
	return a
}

func (a *appender) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

func (a *appender) halt() {
	close(a.stop)
	a.wg.Wait()
}

// verifyJournal checks invariant 1 on every running member: every
// acknowledged append is present at its seq, and seqs are contiguous from 1
// and unique.
func verifyJournal(t *testing.T, tc *testCluster, acked map[uint64]string) {
	t.Helper()
	tc.waitConverged()
	for i := range tc.servers {
		s := tc.server(i)
		if s == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c := tc.client(ctx)
		var all []client.StoredEvent
		err := c.Journal().ReadRange(ctx, 1, 0, func(e client.StoredEvent) error {
			all = append(all, e)
			return nil
		}, client.AtEndpoint(s.GRPCAddr()), client.WithPageSize(5000))
		cancel()
		if err != nil {
			t.Fatalf("member %s: %v", s.ID(), err)
		}
		for k, e := range all {
			if e.Seq != uint64(k+1) {
				t.Fatalf("member %s: event %d has seq %d (gap or duplicate)", s.ID(), k, e.Seq)
			}
		}
		byPayload := map[string]int{}
		for _, e := range all {
			byPayload[string(e.Payload)]++
		}
		for seq, p := range acked {
			if seq > uint64(len(all)) || string(all[seq-1].Payload) != p {
				t.Fatalf("member %s: acknowledged append %q at seq %d lost", s.ID(), p, seq)
			}
			if byPayload[p] != 1 {
				t.Fatalf("member %s: payload %q appears %d times (exactly-once broken)", s.ID(), p, byPayload[p])
			}
		}
	}
}

func TestLeaderKilledUnderAppends(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	a := startAppenders(t, tc, 8)
	eventually(t, 20*time.Second, "appends before the kill", func() bool { return a.count() >= 200 })
	old := tc.waitLeader()
	tc.kill(old)
	before := a.count()
	newLeader := tc.waitLeader()
	if newLeader == old {
		t.Fatal("killed member still leads")
	}
	eventually(t, 20*time.Second, "appends after failover", func() bool { return a.count() >= before+200 })
	// The old leader comes back as a follower and catches up.
	tc.start(old)
	eventually(t, 20*time.Second, "appends after restart", func() bool { return a.count() >= before+400 })
	a.halt()
	verifyJournal(t, tc, a.acked)
}

func TestFollowerCatchesUpByLog(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	tc.kill(f)
	a := startAppenders(t, tc, 4)
	eventually(t, 20*time.Second, "appends while a follower is down", func() bool { return a.count() >= 100 })
	a.halt()
	tc.start(f)
	verifyJournal(t, tc, a.acked)
}

// TestFollowerCatchesUpBySnapshot, with each log store: raft-wal is a
// MonotonicLogStore, so after installing the snapshot the follower drops
// its whole old log before appending past the snapshot. raft-wal frees
// whole segments only (and still reads compacted entries of the open
// one), so its segments are made small here for compaction to bite.
//
// wal-prefill: the same with zeroed segments (with segments this small the
// log may roll before the next spare is written; those are fallocated).
func TestFollowerCatchesUpBySnapshot(t *testing.T) {
	t.Parallel()
	for _, store := range []string{LogStoreWAL, LogStoreBoltDB, "wal-prefill"} {
		t.Run(store, func(t *testing.T) { testFollowerCatchesUpBySnapshot(t, store) })
	}
}

func testFollowerCatchesUpBySnapshot(t *testing.T, store string) {
	tc := newTestCluster(t, 3, func(i int, c *Config) {
		c.LogStore = store
		if store == "wal-prefill" {
			c.LogStore, c.WALPrefill = LogStoreWAL, true
		}
		c.walSegmentBytes = 16 << 10
		c.Raft.SnapshotThreshold = 64
		c.Raft.TrailingLogs = 16
		c.Raft.SnapshotInterval = time.Hour // snapshots only when asked
	})
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	tc.kill(f)
	a := startAppenders(t, tc, 4)
	eventually(t, 20*time.Second, "appends while a follower is down", func() bool { return a.count() >= 300 })
	a.halt()
	// Compact every running member's log past what the follower has, so
	// whichever member leads when it returns must send a snapshot.
	for _, i := range tc.followers(-1) {
		s := tc.server(i)
		if err := s.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		first, _ := s.node.Store().FirstIndex()
		if first <= 1 {
			t.Fatalf("member %s log not compacted (first index %d)", s.ID(), first)
		}
	}
	tc.start(f)
	verifyJournal(t, tc, a.acked)
	if store == "wal-prefill" {
		zeroed, fallocated := tc.server(leader).node.SegmentStats()
		t.Logf("leader's segments: %d zeroed, %d fallocated", zeroed, fallocated)
		if zeroed == 0 {
			t.Fatal("no segment was made from a zeroed spare")
		}
	}
	snaps, err := tc.server(f).node.Snapshots().List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("follower did not install a snapshot (%v, %d snapshots)", err, len(snaps))
	}
}

func TestMinorityPartitionCannotCommit(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	old := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	tc.net.isolate(tc.cfgs[old].ID)
	// An append straight to the isolated leader's Raft never commits.
	os := tc.server(old)
	data := mustAppendCommand(t, "minority")
	f := os.raft.Apply(data, time.Second)
	if err := f.Error(); err == nil {
		t.Fatal("isolated leader committed an entry")
	}
	newLeader := tc.waitLeader()
	if newLeader == old {
		t.Fatal("isolated member still leads")
	}
	seqs, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("majority")})
	if err != nil {
		t.Fatal(err)
	}
	tc.net.heal()
	tc.waitConverged()
	evs, _, err := c.Journal().Read(ctx, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if string(e.Payload) == "minority" {
			t.Fatal("an entry proposed in the minority was committed")
		}
	}
	if evs[len(evs)-1].Seq != seqs[0] || string(evs[len(evs)-1].Payload) != "majority" {
		t.Fatalf("journal after heal: %+v", evs)
	}
}

func mustAppendCommand(t *testing.T, payload string) []byte {
	t.Helper()
	data, err := fsm.EncodeCommand(fsmpb.CommandType_COMMAND_TYPE_APPEND, &fsmpb.AppendCommand{Ops: []*fsmpb.AppendOp{{Events: []*fsmpb.JournalEvent{{Type: "t", Payload: []byte(payload)}}}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRemovedMemberCannotRejoin(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	victim := tc.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tc.client(ctx)
	if _, err := c.Cluster().RemoveServer(ctx, tc.cfgs[victim].ID); err != nil {
		t.Fatal(err)
	}
	vs := tc.server(victim)
	select {
	case err := <-vs.fatalCh:
		if !errors.Is(err, ErrRemoved) {
			t.Fatalf("removed member stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("removed member did not stop")
	}
	tc.kill(victim)
	// Restarting it with its data is refused.
	if s, err := New(tc.cfgs[victim]); !errors.Is(err, ErrRemoved) {
		if s != nil {
			s.shutdown()
		}
		t.Fatalf("restart of a removed member: %v", err)
	}
	// The remaining two keep committing.
	if _, err := c.Journal().Append(ctx, client.Event{Type: "t", Payload: []byte("after removal")}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 2 {
		t.Fatalf("members after removal: %d", len(st.Members))
	}
}

func TestForeignClusterRefused(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A data dir of this cluster cannot be opened as another cluster.
	cfg := tc.cfgs[leader]
	cfg.ClusterID = "other-cluster"
	if s, err := New(cfg); !errors.Is(err, ErrForeignData) {
		if s != nil {
			s.shutdown()
		}
		t.Fatalf("foreign data dir: %v", err)
	}

	// A member of another cluster joining the gossip and asked to be added
	// as a voter never becomes part of this cluster.
	other := testConfig(t, "x1", t.TempDir())
	other.ClusterID = "other-cluster"
	other.Join = []string{tc.cfgs[0].GossipAddr}
	os, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	defer os.shutdown()
	c := tc.client(ctx)
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	_, _ = c.Cluster().AddVoter(actx, "x1", other.RaftAddr)
	acancel()
	for _, m := range tc.server(leader).members.Members() {
		if m.Meta.ID == "x1" {
			t.Fatal("gossip admitted a member of another cluster")
		}
	}
	if os.raft.LastIndex() != 0 {
		t.Fatal("a member of another cluster received Raft entries")
	}
	if _, err := c.Cluster().RemoveServer(ctx, "x1"); err != nil {
		t.Fatalf("cleanup remove: %v", err)
	}

	// Member RPCs carrying the wrong cluster id are refused.
	conn, err := grpc.NewClient(tc.cfgs[leader].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pc := clusterpb.NewPeerClient(conn)
	_, err = pc.ForwardAppend(metadata.AppendToOutgoingContext(ctx, MDClusterID, "other-cluster"), &clusterpb.ForwardAppendRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("wrong cluster id: %v", err)
	}
	_, err = pc.ForwardAppend(ctx, &clusterpb.ForwardAppendRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("missing cluster id: %v", err)
	}
	// A client that names another cluster is refused too.
	bad, err := client.New(ctx, client.Config{Endpoints: tc.endpoints(), ClusterID: "other-cluster"})
	if err == nil {
		_, err = bad.Journal().Append(ctx, client.Event{Type: "t"})
		bad.Close()
	}
	if !errors.Is(err, client.ErrClusterMismatch) {
		t.Fatalf("client of another cluster: %v", err)
	}
}

func TestFollowerForwardsAndReadsLinearizably(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(tc.cfgs[f].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc := pb.NewJournalClient(conn)
	// Concurrent appends to a follower are forwarded in batches; each
	// read from the same follower sees its own acknowledged write.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := jc.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{{Type: "fwd", Payload: []byte(fmt.Sprint(i))}}})
			if err != nil {
				errs <- err
				return
			}
			rr, err := jc.Read(ctx, &pb.ReadRequest{From: resp.FirstSeq, Max: 1})
			if err != nil {
				errs <- err
				return
			}
			if len(rr.Events) != 1 || string(rr.Events[0].Payload) != fmt.Sprint(i) {
				errs <- fmt.Errorf("read-your-write failed for %d: %+v", i, rr.Events)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Cluster operations are forwarded too.
	cc := pb.NewClusterClient(conn)
	resp, err := cc.TransferLeadership(ctx, &pb.TransferLeadershipRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.LeaderId == "" || resp.LeaderId == tc.cfgs[leader].ID {
		t.Fatalf("transfer leadership: %+v", resp)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(i int, c *Config) { c.MaxEventBytes = 1024; c.MaxRequestBytes = 64 << 10 })
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(tc.cfgs[leader].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc := pb.NewJournalClient(conn)
	ev := func(ty string, n int) *pb.Event { return &pb.Event{Type: ty, Payload: make([]byte, n)} }
	before := tc.server(leader).fsm.AppliedIndex()
	for _, tcase := range []struct {
		name string
		req  *pb.AppendRequest
		code codes.Code
	}{
		{"no events", &pb.AppendRequest{}, codes.InvalidArgument},
		{"empty type", &pb.AppendRequest{Events: []*pb.Event{ev("", 1)}}, codes.InvalidArgument},
		{"payload over cap", &pb.AppendRequest{Events: []*pb.Event{ev("t", 1025)}}, codes.InvalidArgument},
		{"seq without client", &pb.AppendRequest{RequestSeq: 3, Events: []*pb.Event{ev("t", 1)}}, codes.InvalidArgument},
		{"client without seq", &pb.AppendRequest{ClientId: "c", Events: []*pb.Event{ev("t", 1)}}, codes.InvalidArgument},
		{"acked beyond seq", &pb.AppendRequest{ClientId: "c", RequestSeq: 2, AckedSeq: 2, Events: []*pb.Event{ev("t", 1)}}, codes.InvalidArgument},
		{"request over size", &pb.AppendRequest{Events: []*pb.Event{ev("t", 1000), ev("t", 1000), ev("t", 1000)}}, codes.OK},
	} {
		t.Run(tcase.name, func(t *testing.T) {
			_, err := jc.Append(ctx, tcase.req)
			if status.Code(err) != tcase.code {
				t.Fatalf("got %v, want %v", err, tcase.code)
			}
		})
	}
	big := &pb.AppendRequest{}
	for i := 0; i < 100; i++ {
		big.Events = append(big.Events, ev("t", 1000))
	}
	if _, err := jc.Append(ctx, big); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "exceeds the 65536-byte cap") {
		t.Fatalf("request over the message cap: %v", err)
	}
	if r, err := jc.Read(ctx, &pb.ReadRequest{Max: 1 << 30}); err != nil || r.End != pb.ReadEnd_READ_END_SAFE_POS {
		t.Fatalf("read max above the server's bound: %v %v", r, err)
	}
	if _, err := jc.Read(ctx, &pb.ReadRequest{Consistency: 42}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("read unknown consistency: %v", err)
	}
	cc := pb.NewClusterClient(conn)
	if _, err := cc.AddVoter(ctx, &pb.AddServerRequest{Id: "../x", RaftAddr: "127.0.0.1:1"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad member id: %v", err)
	}
	if _, err := cc.AddVoter(ctx, &pb.AddServerRequest{Id: "x", RaftAddr: "nonsense"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad raft address: %v", err)
	}
	if _, err := cc.RemoveServer(ctx, &pb.RemoveServerRequest{Id: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("remove unknown member: %v", err)
	}
	if _, err := cc.TransferLeadership(ctx, &pb.TransferLeadershipRequest{Id: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("transfer to unknown member: %v", err)
	}
	// Only the one valid append changed the state.
	after := tc.server(leader).fsm.AppliedIndex()
	if after != before+1 {
		t.Fatalf("applied index moved from %d to %d; want exactly one entry", before, after)
	}
	// Garbage on every port: connections are dropped, nothing changes.
	garbage := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(garbage)
	cfg := tc.cfgs[leader]
	for _, addr := range []string{cfg.RaftAddr, cfg.GossipAddr, cfg.GRPCAddr, cfg.HTTPAddr} {
		for _, prefix := range [][]byte{nil, []byte("LBRF\x01\x0ctest-cluster")} {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conn.Write(append(prefix, garbage...))
			conn.Close()
		}
	}
	if u, err := net.Dial("udp", cfg.GossipAddr); err == nil {
		u.Write(garbage)
		u.Close()
	}
	if got := tc.server(leader).fsm.AppliedIndex(); got != after {
		t.Fatalf("garbage moved the applied index from %d to %d", after, got)
	}
	// The member still serves.
	if _, err := jc.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{ev("t", 1)}}); err != nil {
		t.Fatal(err)
	}
}

func TestRetriedAppendAppliedOnceAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(i int) pb.JournalClient {
		conn, err := grpc.NewClient(tc.cfgs[i].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewJournalClient(conn)
	}
	req := &pb.AppendRequest{ClientId: "retrier", RequestSeq: 1, Events: []*pb.Event{{Type: "t", Payload: []byte("once")}, {Type: "t", Payload: []byte("twice?")}}}
	first, err := dial(leader).Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.client(ctx).Cluster().TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	next := tc.waitLeader()
	if next == leader {
		t.Fatal("leadership did not move")
	}
	// The same request again, to the new leader and through a follower.
	for _, i := range []int{next, leader} {
		again, err := dial(i).Append(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.FirstSeq != first.FirstSeq || again.Count != first.Count {
			t.Fatalf("retry via member %d got seqs %d+%d, first attempt %d+%d", i, again.FirstSeq, again.Count, first.FirstSeq, first.Count)
		}
	}
	rr, err := dial(next).Read(ctx, &pb.ReadRequest{From: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rr.NextSeq != first.FirstSeq+uint64(first.Count) || len(rr.Events) != int(first.Count) {
		t.Fatalf("journal after retries: next seq %d, %d events", rr.NextSeq, len(rr.Events))
	}
	// Once acked, the request is refused by the state machine itself:
	// the caller gets that refusal, through the leader and a follower.
	ack := &pb.AppendRequest{ClientId: "retrier", RequestSeq: 2, AckedSeq: 1, Events: []*pb.Event{{Type: "t", Payload: []byte("acks 1")}}}
	if _, err := dial(next).Append(ctx, ack); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{next, leader} {
		if r, err := dial(i).Append(ctx, req); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("acked request again via member %d: %v (reply %v), want FailedPrecondition", i, err, r)
		}
	}
}
