package nodeserver

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeCoord is a NodeLink server that records every call: the wire peer
// of the node's coordinator link.
type fakeCoord struct {
	clusterpb.UnimplementedNodeLinkServer
	addr string

	mu         sync.Mutex
	events     []string
	registers  []*clusterpb.NodeRegisterRequest
	fulls      []*clusterpb.NodeBlockReportRequest
	incs       []*clusterpb.NodeIncrementalReportRequest
	heartbeats []*clusterpb.NodeHeartbeatRequest
	hbTimes    []time.Time
	commits    []*clusterpb.CommitBlockSyncRequest
	hbCommands []*clusterpb.NodeCommand // sent with the next heartbeat reply
	commitErrs []error                  // returned by the commits in turn; then OK
	commitErr  error                    // returned by every commit past commitErrs
	hbErrs     []error                  // returned by the heartbeats in turn
}

func startFakeCoord(t *testing.T) *fakeCoord {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCoord{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	clusterpb.RegisterNodeLinkServer(srv, fc)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return fc
}

func (f *fakeCoord) Register(_ context.Context, req *clusterpb.NodeRegisterRequest) (*clusterpb.NodeRegisterResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "register")
	f.registers = append(f.registers, req)
	return &clusterpb.NodeRegisterResponse{Node: req.GetNode()}, nil
}

func (f *fakeCoord) Heartbeat(_ context.Context, req *clusterpb.NodeHeartbeatRequest) (*clusterpb.NodeHeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "heartbeat")
	f.heartbeats = append(f.heartbeats, req)
	f.hbTimes = append(f.hbTimes, time.Now())
	if len(f.hbErrs) > 0 {
		err := f.hbErrs[0]
		f.hbErrs = f.hbErrs[1:]
		return nil, err
	}
	cmds := f.hbCommands
	f.hbCommands = nil
	return &clusterpb.NodeHeartbeatResponse{Commands: cmds}, nil
}

func (f *fakeCoord) BlockReport(_ context.Context, req *clusterpb.NodeBlockReportRequest) (*clusterpb.NodeReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "full")
	f.fulls = append(f.fulls, req)
	return &clusterpb.NodeReportResponse{}, nil
}

func (f *fakeCoord) IncrementalReport(_ context.Context, req *clusterpb.NodeIncrementalReportRequest) (*clusterpb.NodeReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "incremental")
	f.incs = append(f.incs, req)
	return &clusterpb.NodeReportResponse{}, nil
}

func (f *fakeCoord) CommitBlockSynchronization(_ context.Context, req *clusterpb.CommitBlockSyncRequest) (*clusterpb.CommitBlockSyncResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "commit")
	f.commits = append(f.commits, req)
	if len(f.commitErrs) > 0 {
		err := f.commitErrs[0]
		f.commitErrs = f.commitErrs[1:]
		return nil, err
	}
	if f.commitErr != nil {
		return nil, f.commitErr
	}
	return &clusterpb.CommitBlockSyncResponse{}, nil
}

func (f *fakeCoord) queue(cmds ...*clusterpb.NodeCommand) {
	f.mu.Lock()
	f.hbCommands = append(f.hbCommands, cmds...)
	f.mu.Unlock()
}

func (f *fakeCoord) counts() (registers, fulls, incs, heartbeats, commits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.registers), len(f.fulls), len(f.incs), len(f.heartbeats), len(f.commits)
}

// lastFull is the latest full report's replicas by block id.
func (f *fakeCoord) lastFull() map[uint64]*pb.ReportedReplica {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uint64]*pb.ReportedReplica{}
	if len(f.fulls) == 0 {
		return out
	}
	for _, s := range f.fulls[len(f.fulls)-1].GetStorages() {
		for _, r := range s.GetReplicas() {
			out[r.GetBlockId()] = r
		}
	}
	return out
}

// sawChange reports whether an incremental report carried change kind of
// block id.
func (f *fakeCoord) sawChange(id uint64, kind clusterpb.ReplicaChange) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.incs {
		for _, c := range r.GetChanges() {
			if c.GetReplica().GetBlockId() == id && c.GetChange() == kind {
				return true
			}
		}
	}
	return false
}

func withCoord(interval time.Duration, addrs ...string) func(*Config) {
	return func(c *Config) {
		c.CoordEndpoints = addrs
		c.HeartbeatInterval = interval
	}
}

// writeReplica writes data into a new replica of id at gs through the
// store: FINALIZED, or RBW with every byte acked and synced.
func writeReplica(t testing.TB, n *testNode, id, gs uint64, data []byte, finalize bool) {
	t.Helper()
	ctx := testCtx(t)
	w, err := n.srv.Store().CreateRbw(ctx, testPool, replica.Block{ID: id, GS: gs}, replica.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 64 << 10 {
		p := data[off:min(len(data), off+64<<10)]
		if err := w.WritePacket(ctx, int64(off), p, blockio.Checksums(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetBytesAcked(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if finalize {
		if _, err := w.Finalize(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func notRegistered() error {
	st, _ := status.New(codes.FailedPrecondition, "node not registered").WithDetails(&errdetails.ErrorInfo{Reason: reasonNodeNotRegistered})
	return st.Err()
}

// The link registers, sends a full report of what is on disk, heartbeats
// at the interval, reports writes incrementally, and runs the commands of
// a heartbeat reply: invalidate, full report, re-register.
func TestCoordLinkLifecycle(t *testing.T) {
	fc := startFakeCoord(t)
	dir := t.TempDir()
	// A replica on disk from an earlier run of the node.
	first := startNode(t, "n1", func(c *Config) { c.DataDir = dir })
	data := randomBytes(10_000, 3)
	writeReplica(t, first, 1, 1001, data, true)
	if err := first.srv.Close(); err != nil {
		t.Fatal(err)
	}

	const interval = 100 * time.Millisecond
	n := startNode(t, "n1", func(c *Config) { c.DataDir = dir }, withCoord(interval, fc.addr))
	waitFor(t, "register and full report", func() bool { r, f, _, _, _ := fc.counts(); return r >= 1 && f >= 1 })
	fc.mu.Lock()
	reg := fc.registers[0]
	firstTwo := slices.Clone(fc.events[:2])
	fc.mu.Unlock()
	if !slices.Equal(firstTwo, []string{"register", "full"}) {
		t.Fatalf("first calls %v, want register then full", firstTwo)
	}
	rec := reg.GetNode()
	if rec.GetId() != "n1" || rec.GetGrpcAddr() != n.addr || rec.GetHttpAddr() != n.srv.HTTPAddr() ||
		rec.GetGossipAddr() != n.srv.AdvertisedGossip() || rec.GetInstanceId() == "" || len(rec.GetStorageIds()) != 1 || len(reg.GetStorages()) != 1 {
		t.Fatalf("register %v", reg)
	}
	if r := fc.lastFull()[1]; r == nil || r.GetGs() != 1001 || r.GetNumBytes() != int64(len(data)) || r.GetState() != pb.ReplicaState_REPLICA_STATE_FINALIZED {
		t.Fatalf("full report: blk_1 %v", r)
	}

	waitFor(t, "heartbeats", func() bool { _, _, _, h, _ := fc.counts(); return h >= 3 })
	fc.mu.Lock()
	hb, times := fc.heartbeats[0], slices.Clone(fc.hbTimes)
	fc.mu.Unlock()
	if hb.GetNodeId() != "n1" || len(hb.GetStorages()) != 1 || hb.GetStorages()[0].GetCapacity() == 0 || hb.GetStorages()[0].GetStorageId() != rec.GetStorageIds()[0] {
		t.Fatalf("heartbeat %v", hb)
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < interval/2 {
			t.Fatalf("heartbeats %v apart, interval %v", d, interval)
		}
	}

	// A write is reported incrementally.
	writeReplica(t, n, 2, 1002, randomBytes(3000, 4), true)
	waitFor(t, "incremental report of blk_2", func() bool {
		return fc.sawChange(2, clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVING) && fc.sawChange(2, clusterpb.ReplicaChange_REPLICA_CHANGE_RECEIVED)
	})

	// Invalidate deletes it; a DELETED change follows.
	fc.queue(&clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_Invalidate{Invalidate: &clusterpb.InvalidateCommand{Blocks: []*fsmpb.BlockRef{{Id: 2, Gs: 1002, NumBytes: 3000}}}}})
	waitFor(t, "blk_2 deleted", func() bool { _, err := n.srv.Store().GetReplica(testPool, 2); return err != nil })
	waitFor(t, "DELETED of blk_2", func() bool { return fc.sawChange(2, clusterpb.ReplicaChange_REPLICA_CHANGE_DELETED) })

	// SendFullReport: a new full report, without blk_2.
	_, fulls, _, _, _ := fc.counts()
	fc.queue(&clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_SendFullReport{SendFullReport: &clusterpb.SendFullReportCommand{}}})
	waitFor(t, "full report on command", func() bool { _, f, _, _, _ := fc.counts(); return f > fulls })
	if got := fc.lastFull(); got[1] == nil || got[2] != nil {
		t.Fatalf("full report after invalidate: %v", got)
	}

	// ReRegister: register again (same instance), then a full report.
	regs, fulls, _, _, _ := fc.counts()
	fc.queue(&clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_ReRegister{ReRegister: &clusterpb.ReRegisterCommand{}}})
	waitFor(t, "re-register and full report", func() bool { r, f, _, _, _ := fc.counts(); return r > regs && f > fulls })
	fc.mu.Lock()
	again := fc.registers[len(fc.registers)-1]
	fc.mu.Unlock()
	if again.GetNode().GetInstanceId() != rec.GetInstanceId() {
		t.Fatalf("instance id changed within one process: %q, %q", rec.GetInstanceId(), again.GetNode().GetInstanceId())
	}

	// A coordinator that forgot the node: it registers again.
	regs, _, _, _, _ = fc.counts()
	fc.mu.Lock()
	fc.hbErrs = []error{notRegistered()}
	fc.mu.Unlock()
	waitFor(t, "register after NODE_NOT_REGISTERED", func() bool { r, _, _, _, _ := fc.counts(); return r > regs })
}

// An endpoint that is down gives way to the next one.
func TestCoordLinkFailover(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	fc := startFakeCoord(t)
	startNode(t, "n1", withCoord(50*time.Millisecond, dead, fc.addr))
	waitFor(t, "register via the second endpoint", func() bool { r, f, _, h, _ := fc.counts(); return r >= 1 && f >= 1 && h >= 2 })
}

// A command for a task key already running is ignored; past the bound of
// its kind commands are dropped (the other kind is not affected), and the
// next task to end asks for a heartbeat at once.
func TestCoordLinkTaskBounds(t *testing.T) {
	fc := startFakeCoord(t)
	n := startNode(t, "n1", withCoord(10*time.Minute, fc.addr))
	l := n.srv.link
	release := make(chan struct{})
	var mu sync.Mutex
	ran := 0
	task := func(context.Context) {
		mu.Lock()
		ran++
		mu.Unlock()
		<-release
	}
	const limit = 3
	if !l.startTask("transfer/a", limit, task) {
		t.Fatal("first task not started")
	}
	if l.startTask("transfer/a", limit, task) {
		t.Fatal("duplicate task started")
	}
	for i := 1; i < limit; i++ {
		if !l.startTask("transfer/"+string(rune('a'+i)), limit, task) {
			t.Fatalf("task %d not started", i)
		}
	}
	if l.startTask("transfer/z", limit, task) {
		t.Fatal("task past the bound started")
	}
	if !l.startTask("recover/a", limit, task) {
		t.Fatal("a full kind blocked another kind")
	}
	_, _, _, beats, _ := fc.counts()
	close(release)
	waitFor(t, "tasks done", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.running) == 0 })
	mu.Lock()
	if ran != limit+1 {
		t.Fatalf("%d tasks ran, want %d", ran, limit+1)
	}
	mu.Unlock()
	// The heartbeat interval is 10 minutes: only the dropped command's
	// early heartbeat can arrive.
	waitFor(t, "an early heartbeat for the dropped command", func() bool { _, _, _, h, _ := fc.counts(); return h > beats })
	if !l.startTask("transfer/a", limit, task) {
		t.Fatal("a finished key may run again")
	}
}

func TestConfigCoordValidation(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"bad endpoint": func(c *Config) { c.CoordEndpoints = []string{"nohost"} },
		"no host":      func(c *Config) { c.CoordEndpoints = []string{":7100"} },
		"interval":     func(c *Config) { c.CoordEndpoints = []string{"c1:7100"}; c.HeartbeatInterval = 0 },
		"bad join":     func(c *Config) { c.Join = []string{"x"} },
	} {
		cfg := testConfig(t, "n1")
		mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := testConfig(t, "n1")
	cfg.CoordEndpoints, cfg.Join = []string{"c1:7100", "10.0.0.1:7100"}, []string{"g1:7600"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
