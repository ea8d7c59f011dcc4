package fsm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// ns is a small driver over one State for namespace table tests: every op
// goes through the encoded command envelope, at a proposed time that moves
// one millisecond per entry.
type ns struct {
	t   testing.TB
	s   *State
	idx uint64
	now int64
}

const t0 = int64(1_700_000_000_000_000_000)

func newNS(t testing.TB) *ns { return &ns{t: t, s: NewState(), now: t0} }

// nsEntry encodes a namespace command as a Raft log entry, in the oldest
// log format that carries it.
func nsEntry(t testing.TB, index uint64, now int64, c *pb.NamespaceCommand) *raft.Log {
	t.Helper()
	version := uint32(NamespaceFormat)
	if isCacheOp(c.Op) {
		version = CacheFormat
	}
	data, err := EncodeCommandVersion(version, pb.CommandType_COMMAND_TYPE_NAMESPACE, c, now)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

func (d *ns) cmd(c *pb.NamespaceCommand) NamespaceResult {
	d.t.Helper()
	d.idx++
	d.now += 1e6
	cmd, err := DecodeCommand(nsEntry(d.t, d.idx, d.now, c).Data)
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := d.s.Apply(d.idx, cmd)
	if err != nil {
		d.t.Fatalf("apply: %v", err)
	}
	return resp.(NamespaceResult)
}

func (d *ns) do(op *pb.NamespaceOp) NamespaceResult {
	d.t.Helper()
	return d.cmd(&pb.NamespaceCommand{Op: op})
}

// ok applies op and requires it accepted with one audit event of typ.
func (d *ns) ok(typ string, op *pb.NamespaceOp) *pb.NamespaceResult {
	d.t.Helper()
	next := d.s.NextSeq()
	r := d.do(op)
	if r.Err != nil {
		d.t.Fatalf("%s: %v", typ, r.Err)
	}
	if r.Result.Unchanged {
		d.t.Fatalf("%s: unchanged", typ)
	}
	evs := d.s.Read(next, 10)
	if len(evs) != 1 || evs[0].Type != typ || r.Seq != next || d.s.NextSeq() != next+1 {
		d.t.Fatalf("%s: audit events %v (seq %d)", typ, evs, r.Seq)
	}
	var ev pb.NamespaceEvent
	if err := proto.Unmarshal(evs[0].Payload, &ev); err != nil || !proto.Equal(ev.Op, op) || !proto.Equal(ev.Result, r.Result) || ev.UnixNanos != d.now {
		d.t.Fatalf("%s: audit payload %v, %v", typ, &ev, err)
	}
	return r.Result
}

// refuse applies op and requires the error (errors.Is want, KindOf kind)
// and that nothing but the applied index changed.
func (d *ns) refuse(op *pb.NamespaceOp, want error, kind Kind) error {
	d.t.Helper()
	before, next := d.s.digest(false), d.s.NextSeq()
	r := d.do(op)
	if !errors.Is(r.Err, want) || KindOf(r.Err) != kind {
		d.t.Fatalf("got %v (kind %v), want %v (kind %v)", r.Err, KindOf(r.Err), want, kind)
	}
	if d.s.digest(false) != before || d.s.NextSeq() != next || r.Seq != 0 || r.Result != nil {
		d.t.Fatalf("refused op %v changed the state", op)
	}
	return r.Err
}

// unchanged applies op and requires success without any change.
func (d *ns) unchanged(op *pb.NamespaceOp) *pb.NamespaceResult {
	d.t.Helper()
	before, next := d.s.digest(false), d.s.NextSeq()
	r := d.do(op)
	if r.Err != nil || !r.Result.Unchanged || d.s.digest(false) != before || d.s.NextSeq() != next {
		d.t.Fatalf("want an unchanged success: %+v", r)
	}
	return r.Result
}

// Op constructors.

func opRegister(id, grpc, gossip, instance string) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_RegisterNode{RegisterNode: &pb.RegisterNodeOp{Node: &pb.NodeRecord{
		Id: id, GrpcAddr: grpc, GossipAddr: gossip, HttpAddr: "h-" + id, InstanceId: instance, StorageIds: []string{"s-" + id}}}}}
}

func opCreate(path, client string, overwrite bool) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_CreateFile{CreateFile: &pb.CreateFileOp{
		Path: path, Replication: 3, BlockSize: 4096, ClientName: client, Overwrite: overwrite}}}
}

func opAdd(path, client string, prev *pb.BlockRef, replicated []uint64, targets ...string) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_AddBlock{AddBlock: &pb.AddBlockOp{
		Path: path, ClientName: client, Previous: prev, Targets: targets, ReplicatedBlocks: replicated}}}
}

func opComplete(path, client string, last *pb.BlockRef, replicated ...uint64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_CompleteFile{CompleteFile: &pb.CompleteFileOp{
		Path: path, ClientName: client, Last: last, ReplicatedBlocks: replicated}}}
}

func opAppend(path, client string, targets ...string) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_AppendFile{AppendFile: &pb.AppendFileOp{Path: path, ClientName: client, Targets: targets}}}
}

func opDelete(path string, recursive bool) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_DeleteFile{DeleteFile: &pb.DeleteFileOp{Path: path, Recursive: recursive}}}
}

func opAbandon(path, client string, id uint64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_AbandonBlock{AbandonBlock: &pb.AbandonBlockOp{Path: path, ClientName: client, BlockId: id}}}
}

func opPipelineGS(path, client string, id uint64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_UpdateBlockForPipeline{UpdateBlockForPipeline: &pb.UpdateBlockForPipelineOp{Path: path, ClientName: client, BlockId: id}}}
}

func opPipeline(path, client string, id, oldGS, newGS, length uint64, nodes ...string) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_UpdatePipeline{UpdatePipeline: &pb.UpdatePipelineOp{
		Path: path, ClientName: client, BlockId: id, OldGs: oldGS, NewGs: newGS, NewLength: length, NewNodes: nodes}}}
}

func opRecover(path string, id uint64, primary string, deadline int64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_StartRecovery{StartRecovery: &pb.StartRecoveryOp{
		Path: path, BlockId: id, Primary: primary, DeadlineUnixNanos: deadline, Reason: "hard limit"}}}
}

func opCommitSync(id, oldGS, rid, length uint64, closeFile, deleteBlock bool, targets ...string) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_CommitBlockSync{CommitBlockSync: &pb.CommitBlockSyncOp{
		BlockId: id, OldGs: oldGS, RecoveryId: rid, NewGs: rid, NewLength: length, CloseFile: closeFile, DeleteBlock: deleteBlock, Targets: targets}}}
}

func opRelease(path, holder string, replicated ...uint64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_ReleaseLease{ReleaseLease: &pb.ReleaseLeaseOp{Path: path, Holder: holder, ReplicatedBlocks: replicated}}}
}

func ref(b *pb.BlockRecord, n uint64) *pb.BlockRef {
	return &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: n}
}

// base builds the state most table tests start from:
//
//	nodes n1..n4
//	/closed/f   closed, one full block and one partial (100 bytes)
//	/open/f     open by c1, one UNDER_CONSTRUCTION block on n1 n2 n3
//	/rec/f      open by c2, its block UNDER_RECOVERY (primary n1)
type baseState struct {
	*ns
	closed1, closed2, open, rec *pb.BlockRecord
	recID                       uint64
}

func newBase(t testing.TB) *baseState {
	d := &baseState{ns: newNS(t)}
	for i := 1; i <= 4; i++ {
		d.ok(EventNodeRegistered, opRegister(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d:7400", i), fmt.Sprintf("10.0.0.%d:7200", i), fmt.Sprintf("inst-%d", i)))
	}
	d.ok(EventCreate, opCreate("/closed/f", "c1", false))
	d.closed1 = d.ok(EventAddBlock, opAdd("/closed/f", "c1", nil, nil, "n1", "n2", "n3")).Block
	d.closed2 = d.ok(EventAddBlock, opAdd("/closed/f", "c1", ref(d.closed1, 4096), nil, "n2", "n3", "n4")).Block
	d.ok(EventComplete, opComplete("/closed/f", "c1", ref(d.closed2, 100), d.closed1.Id, d.closed2.Id))
	d.closed1, _ = d.s.Block(d.closed1.Id)
	d.closed2, _ = d.s.Block(d.closed2.Id)
	d.ok(EventCreate, opCreate("/open/f", "c1", false))
	d.open = d.ok(EventAddBlock, opAdd("/open/f", "c1", nil, nil, "n1", "n2", "n3")).Block
	d.ok(EventCreate, opCreate("/rec/f", "c2", false))
	b := d.ok(EventAddBlock, opAdd("/rec/f", "c2", nil, nil, "n1", "n2")).Block
	d.rec = d.ok(EventRecoveryStarted, opRecover("/rec/f", b.Id, "n1", d.now+100e9)).Block
	d.recID = d.rec.Recovery.RecoveryId
	return d
}
