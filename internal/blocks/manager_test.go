package blocks

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
)

// The manager's ports, in memory: a leadership that is what the test says
// it is, and a proposer that applies each op to a local state machine at
// the next index, as the leader's Raft would once it committed it.

type fakeLeader struct {
	term   atomic.Uint64
	leader atomic.Bool
}

func (l *fakeLeader) Term() uint64      { return l.term.Load() }
func (l *fakeLeader) IsLeader() bool    { return l.leader.Load() }
func (l *fakeLeader) LeaderReady() bool { return l.leader.Load() }
func (l *fakeLeader) LogFormat() uint32 { return fsm.CommandVersion }

type localProposer struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func (p *localProposer) ProposeNamespace(op *fsmpb.NamespaceOp) (fsm.NamespaceResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idx++
	now := time.Now().UnixNano()
	data, err := fsm.EncodeCommandAt(fsm.CommandVersion, fsmpb.CommandType_COMMAND_TYPE_NAMESPACE, &fsmpb.NamespaceCommand{Op: op}, now, now)
	if err != nil {
		return fsm.NamespaceResult{}, err
	}
	resp := p.f.Apply(&raft.Log{Index: p.idx, Term: 1, Type: raft.LogCommand, Data: data})
	if err, ok := resp.(error); ok {
		return fsm.NamespaceResult{}, err
	}
	r := resp.(fsm.NamespaceResult)
	return r, r.Err
}

// testEnv is a manager over a state machine of its own, leading term 1.
type testEnv struct {
	t    testing.TB
	m    *Manager
	f    *fsm.FSM
	lead *fakeLeader
	prop *localProposer
}

func testLogger() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 100}))
}

func newTestEnv(t testing.TB, cfg Config) *testEnv {
	t.Helper()
	f := fsm.New(func(err error) { t.Errorf("state machine halted: %v", err) })
	e := &testEnv{t: t, f: f, lead: &fakeLeader{}, prop: &localProposer{f: f}}
	e.lead.term.Store(1)
	e.lead.leader.Store(true)
	// The log format that carries the namespace and cache directives.
	e.prop.idx++
	data, err := fsm.EncodeCommand(fsmpb.CommandType_COMMAND_TYPE_SET_FORMAT, &fsmpb.SetFormatCommand{Version: fsm.CommandVersion}, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: e.prop.idx, Term: 1, Type: raft.LogCommand, Data: data})
	e.m = New(cfg, testLogger(), f, e.lead, e.prop)
	return e
}

func nodeID(i int) string { return fmt.Sprintf("n%d", i) }

// register registers node id with one storage s1 of free bytes.
func (e *testEnv) register(id string, free uint64) {
	e.t.Helper()
	if _, err := e.m.Register(&fsmpb.NodeRecord{Id: id, GrpcAddr: "127.0.0.1:9001", StorageIds: []string{"s1"}, InstanceId: "inst-" + id},
		[]Storage{{ID: "s1", Capacity: 1000, Free: free}}); err != nil {
		e.t.Fatalf("register %s: %v", id, err)
	}
}
