package fsm

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/protobuf/proto"
)

// FuzzReadSnapshot: any byte string either restores or fails with a clear
// error; it never panics or allocates without bound.
func FuzzReadSnapshot(f *testing.F) {
	st := New(nil)
	st.ApplyBatch(randomLogs(f, 3, 50))
	snap, _ := st.Snapshot()
	var sink memSink
	snap.Persist(&sink)
	f.Add(sink.Bytes())
	f.Add(snapshotBytes(f, &FSM{state: newBase(f).s}))
	f.Add([]byte("LBKSNAP\n\x00\x00\x00\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err == nil && s == nil {
			t.Fatal("nil state without error")
		}
	})
}

// FuzzApply: an arbitrary committed entry either applies or halts the FSM;
// it never panics.
func FuzzApply(f *testing.F) {
	f.Add(appendEntry(f, 1, op("c", 1, 0, "a")).Data)
	f.Add([]byte{0x08, 0x01, 0x10, 0x02})
	f.Add(nsEntry(f, 1, 1, &pb.NamespaceCommand{Op: opRegister("n1", "a:1", "a:2", "")}).Data)
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(nil)
		m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
	})
}

// FuzzNamespaceCommand: arbitrary NamespaceCommand bytes, applied to a
// state with files, blocks, a recovery and nodes, never panic; a payload
// that does not decode halts (an error from Apply); a refused or unchanged
// op changes nothing but the applied index; an accepted one writes exactly
// one audit event.
func FuzzNamespaceCommand(f *testing.F) {
	d := newBase(f)
	for _, op := range []*pb.NamespaceOp{
		opCreate("/x/y", "w", true),
		opAdd("/open/f", "c1", ref(d.open, 10), []uint64{d.open.Id}, "n1", "n2"),
		opComplete("/open/f", "c1", ref(d.open, 10), d.open.Id),
		opAppend("/closed/f", "w", "n1"),
		opDelete("/", true),
		opAbandon("/open/f", "c1", d.open.Id),
		opPipelineGS("/open/f", "c1", d.open.Id),
		opPipeline("/open/f", "c1", d.open.Id, d.open.Gs, d.s.NextGS()-1, 10, "n1"),
		opRecover("/open/f", d.open.Id, "n1", d.now+1e9),
		opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 10, true, false, "n1"),
		opRelease("/open/f", "c1"),
		opRegister("n9", "a:1", "a:2", "i"),
	} {
		b, _ := proto.Marshal(&pb.NamespaceCommand{ClientId: "f", RequestSeq: 1, Op: op})
		f.Add(b, d.now)
	}
	f.Add([]byte{0xff, 0x01}, int64(0))
	snap := snapshotBytes(f, &FSM{state: d.s})
	f.Fuzz(func(t *testing.T, payload []byte, now int64) {
		s, err := ReadSnapshot(bytes.NewReader(snap))
		if err != nil {
			t.Fatal(err)
		}
		before, next := s.digest(false), s.NextSeq()
		resp, err := s.Apply(s.AppliedIndex()+1, &pb.Command{Version: NamespaceFormat, Type: pb.CommandType_COMMAND_TYPE_NAMESPACE, Payload: payload, ProposedUnixNanos: now})
		if err != nil {
			return // undecodable: the FSM halts
		}
		r := resp.(NamespaceResult)
		if r.Err != nil || r.Duplicate || r.Result.Unchanged {
			if s.digest(false) != before || s.NextSeq() != next {
				t.Fatalf("refused or unchanged op changed the state: %v", r.Err)
			}
			return
		}
		if s.NextSeq() != next+1 || !ReservedEventType(s.Read(next, 1)[0].Type) {
			t.Fatal("accepted op without exactly one audit event")
		}
		// The state still snapshots and restores.
		if _, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, &FSM{state: s}))); err != nil {
			t.Fatal(err)
		}
	})
}
