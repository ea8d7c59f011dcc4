package coordserver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// forwardOps queues n one-event ops on server s's forward batcher, one
// Enqueue at a time (so in this order), and returns each op's result.
func forwardOps(t *testing.T, s *Server, client string, n int) []fsm.Result {
	t.Helper()
	waits := make([]func(context.Context) []fsm.Result, n)
	for i := range waits {
		op := &fsmpb.AppendOp{ClientId: client, RequestSeq: uint64(i + 1), Events: []*fsmpb.JournalEvent{{Type: "order", Payload: []byte(fmt.Sprint(i))}}}
		waits[i] = s.forwardB.Enqueue([]*fsmpb.AppendOp{op})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([]fsm.Result, n)
	for i, w := range waits {
		out[i] = w(ctx)[0]
	}
	return out
}

// checkInOrder fails unless every op succeeded and their seqs rise in the
// order they were queued.
func checkInOrder(t *testing.T, rs []fsm.Result) {
	t.Helper()
	var last uint64
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("op %d: %v", i, r.Err)
		}
		if r.FirstSeq <= last {
			t.Fatalf("op %d got seq %d after seq %d: forwarded batches left their order", i, r.FirstSeq, last)
		}
		last = r.FirstSeq
	}
}

// A follower keeps several forwarded batches in flight on its
// ForwardStream, and they enter the log in the order it queued them; the
// same through ForwardAppend, one at a time, for a leader without the
// stream.
func TestForwardStreamKeepsOrder(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	f := tc.server(tc.followers(leader)[0])

	checkInOrder(t, forwardOps(t, f, "stream", 3000))
	f.fwd.mu.Lock()
	st := f.fwd.stream
	f.fwd.mu.Unlock()
	if st == nil || st.addr != tc.cfgs[leader].GRPCAddr {
		t.Fatalf("the follower forwarded without a stream to the leader (%+v)", st)
	}

	f.fwd.mu.Lock()
	f.fwd.unary[tc.cfgs[leader].GRPCAddr] = true
	f.fwd.mu.Unlock()
	checkInOrder(t, forwardOps(t, f, "unary", 1000))
}

// fakeLeader serves Peer with ForwardAppend only (an older build), or with
// a ForwardStream that never answers.
type fakeLeader struct {
	clusterpb.UnimplementedPeerServer
	streams atomic.Int32
	silent  bool
	unary   atomic.Int32
}

func (l *fakeLeader) ForwardAppend(ctx context.Context, req *clusterpb.ForwardAppendRequest) (*clusterpb.ForwardAppendResponse, error) {
	n := l.unary.Add(1)
	out := make([]*clusterpb.AppendResult, len(req.Ops))
	for i := range out {
		out[i] = &clusterpb.AppendResult{FirstSeq: uint64(n), Count: 1, Index: uint64(n)}
	}
	return &clusterpb.ForwardAppendResponse{Results: out}, nil
}

func (l *fakeLeader) ForwardStream(stream clusterpb.Peer_ForwardStreamServer) error {
	if !l.silent {
		return l.UnimplementedPeerServer.ForwardStream(stream)
	}
	l.streams.Add(1)
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

func startFakeLeader(t *testing.T, l *fakeLeader, applyTimeout time.Duration) (addr string, fwd *forwarder) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	clusterpb.RegisterPeerServer(srv, l)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &Server{ctx: ctx, cfg: Config{ClusterID: "c", ApplyTimeout: applyTimeout}, peers: newPeerConns("c", insecure.NewCredentials(), 1<<20)}
	t.Cleanup(s.peers.close)
	fwd = newForwarder(s)
	t.Cleanup(fwd.close)
	return lis.Addr().String(), fwd
}

func oneOp() []*fsmpb.AppendOp {
	return []*fsmpb.AppendOp{{Events: []*fsmpb.JournalEvent{{Type: "t"}}}}
}

// A leader without ForwardStream: the batches sent on the stream fail as
// Unavailable (their clients retry) and later batches go by ForwardAppend.
func TestForwardStreamFallsBackToUnary(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{}
	addr, fwd := startFakeLeader(t, l, 10*time.Second)
	sink := forwardSink{f: fwd, id: "fake", addr: addr}
	_, err := sink.Start(oneOp())()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("batch on a stream the leader lacks: %v, want Unavailable", err)
	}
	for i := 1; i <= 3; i++ {
		rs, err := sink.Start(oneOp())()
		if err != nil || len(rs) != 1 || rs[0].FirstSeq != uint64(i) {
			t.Fatalf("unary forward %d: %v %+v", i, err, rs)
		}
	}
	if n := l.unary.Load(); n != 3 {
		t.Fatalf("%d ForwardAppend calls, want 3", n)
	}
	// A leader change (a restart on a newer build, say) makes the follower
	// try the stream again.
	fwd.leaderChanged("other")
	if _, err := (forwardSink{f: fwd, id: "other", addr: addr}).Start(oneOp())(); status.Code(err) != codes.Unavailable {
		t.Fatalf("batch after a leader change: %v, want the stream tried again (Unavailable)", err)
	}
	if n := l.unary.Load(); n != 3 {
		t.Fatalf("%d ForwardAppend calls after the leader change, want 3", n)
	}
}

// A leader that holds a batch past ApplyTimeout: the batches on that
// stream fail as Unavailable and the next batch opens a new stream.
func TestForwardStreamGivesUpOnSilentLeader(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{silent: true}
	addr, fwd := startFakeLeader(t, l, 300*time.Millisecond)
	sink := forwardSink{f: fwd, id: "fake", addr: addr}
	w1 := sink.Start(oneOp())
	w2 := sink.Start(oneOp())
	var wg sync.WaitGroup
	for _, w := range []func() ([]fsm.Result, error){w1, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w(); status.Code(err) != codes.Unavailable {
				t.Errorf("batch held by a silent leader: %v, want Unavailable", err)
			}
		}()
	}
	wg.Wait()
	_ = sink.Start(oneOp())
	eventually(t, 5*time.Second, "a second stream", func() bool { return l.streams.Load() == 2 })
}

// When another member becomes leader, the batches on the stream to the old
// one fail at once (as Unavailable, their clients retry) instead of
// waiting out the apply timeout, and the next batch opens a new stream.
func TestForwardStreamFailsOnLeaderChange(t *testing.T) {
	t.Parallel()
	l := &fakeLeader{silent: true}
	addr, fwd := startFakeLeader(t, l, time.Hour)
	sink := forwardSink{f: fwd, id: "old", addr: addr}
	w := sink.Start(oneOp())
	eventually(t, 5*time.Second, "the stream", func() bool { return l.streams.Load() == 1 })
	fwd.leaderChanged("old") // the same leader: nothing happens
	fwd.mu.Lock()
	st := fwd.stream
	fwd.mu.Unlock()
	if st == nil || st.broken() {
		t.Fatal("the stream to the leader failed when the leader did not change")
	}
	fwd.leaderChanged("new")
	if _, err := w(); status.Code(err) != codes.Unavailable {
		t.Fatalf("batch to the old leader: %v, want Unavailable", err)
	}
	_ = forwardSink{f: fwd, id: "new", addr: addr}.Start(oneOp())
	eventually(t, 5*time.Second, "a stream to the new leader", func() bool { return l.streams.Load() == 2 })
}

// The leader answers a refused batch on the stream with the code on every
// op and goes on with the next; a member that is not the leader refuses
// with NotLeader; a stream naming another cluster is refused.
func TestForwardStreamBadInput(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, MDClusterID, tc.cfgs[leader].ClusterID)
	open := func(i int) clusterpb.Peer_ForwardStreamClient {
		conn, err := grpc.NewClient(tc.cfgs[i].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		st, err := clusterpb.NewPeerClient(conn).ForwardStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	exchange := func(st clusterpb.Peer_ForwardStreamClient, ops []*fsmpb.AppendOp) []*clusterpb.AppendResult {
		t.Helper()
		if err := st.Send(&clusterpb.ForwardAppendRequest{Ops: ops}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != len(ops) {
			t.Fatalf("%d results for %d ops", len(resp.Results), len(ops))
		}
		return resp.Results
	}
	before := tc.server(leader).fsm.AppliedIndex()
	st := open(leader)
	bad := []*fsmpb.AppendOp{{Events: []*fsmpb.JournalEvent{{Type: "ok"}}}, {Events: nil}}
	for _, r := range exchange(st, bad) {
		if codes.Code(r.Code) != codes.InvalidArgument || r.Count != 0 {
			t.Fatalf("bad batch: %+v, want InvalidArgument on every op", r)
		}
	}
	if got := tc.server(leader).fsm.AppliedIndex(); got != before {
		t.Fatalf("a refused batch changed the log: applied %d -> %d", before, got)
	}
	for _, r := range exchange(st, oneOp()) {
		if r.Code != 0 || r.Count != 1 {
			t.Fatalf("good batch after a bad one: %+v", r)
		}
	}

	fst := open(tc.followers(leader)[0])
	for _, r := range exchange(fst, oneOp()) {
		if codes.Code(r.Code) != codes.Unavailable || r.Reason != ReasonNotLeader {
			t.Fatalf("batch to a follower: %+v, want Unavailable NOT_LEADER", r)
		}
	}

	conn, err := grpc.NewClient(tc.cfgs[leader].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other, err := clusterpb.NewPeerClient(conn).ForwardStream(metadata.AppendToOutgoingContext(context.Background(), MDClusterID, "other-cluster"))
	if err == nil {
		_, err = other.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stream naming another cluster: %v, want FailedPrecondition", err)
	}
}
