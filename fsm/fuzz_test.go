package fsm

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
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
	// Log format 5: a session with dropped results.
	dropped := NewState()
	dropped.logFormat = SessionFloorFormat
	sess := dropped.session("d", 1)
	dropped.keep(sess, keptResult{requestSeq: 9, firstSeq: 1, count: 1}, 0, SessionFloorFormat)
	sess.droppedThrough = 7
	f.Add(snapshotBytes(f, &FSM{state: dropped}))
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
	if data, err := EncodeCommandVersion(SessionOpenFormat, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: "c"}, 0); err == nil {
		f.Add(data)
	}
	if data, err := EncodeCommandVersion(SessionCloseFormat, pb.CommandType_COMMAND_TYPE_CLOSE_SESSION, &pb.CloseSessionCommand{SessionId: "c@1"}, 0); err == nil {
		f.Add(data)
	}
	if data, err := EncodeCommandVersion(SessionIdleFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat}, 1); err == nil {
		f.Add(data)
	}
	if data, err := EncodeCommandVersion(SessionIdleFormat, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: 1, SegmentBytes: 1, SessionIdleTimeoutSeconds: 1}, 1); err == nil {
		f.Add(data)
	}
	if data, err := EncodeCommandAt(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: LeaderClockFormat}, 1, 2); err == nil {
		f.Add(data)
	}
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

// FuzzDecodeAppend: the hand decoders of the APPEND hot path
// (appenddecode.go) accept exactly what proto.Unmarshal of pb.Command and
// pb.AppendCommand accepts, and read the same values from it; so a member
// with them applies, and halts on, the same entries as one without.
func FuzzDecodeAppend(f *testing.F) {
	c := &pb.AppendCommand{Ops: []*pb.AppendOp{
		{ClientId: "c1", RequestSeq: 7, AckedSeq: 5, SessionEstablished: true, Events: []*pb.JournalEvent{{Type: "a", Payload: []byte("xyz")}, {Type: "b"}}},
		{Events: []*pb.JournalEvent{{Type: "c", Payload: []byte{0, 1, 2}}}},
		{},
	}}
	env, err := EncodeCommandVersion(CommandVersion, pb.CommandType_COMMAND_TYPE_APPEND, c, 1234)
	if err != nil {
		f.Fatal(err)
	}
	inner, _ := proto.Marshal(c)
	f.Add(env)
	f.Add(inner)
	f.Add(appendEntry(f, 1, op("c", 1, 0, "a")).Data)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0xff})                   // op with a client id that is not UTF-8
	f.Add([]byte{0x0a, 0x04, 0x22, 0x02, 0x0a, 0x00})       // event with an empty type
	f.Add([]byte{0x0b, 0x0c, 0x08, 0x01})                   // a group
	f.Add([]byte{0x08, 0x96, 0x01, 0x10, 0x01, 0x18, 0x05}) // varints where bytes are due
	f.Add([]byte{0x0a, 0x05, 0x22, 0x03, 0x1d, 0x01, 0x02}) // truncated fixed32
	f.Add([]byte{0x0a, 0x03, 0x28, 0x96, 0x01})             // session_established as a varint over 1
	f.Fuzz(func(t *testing.T, data []byte) {
		var pc pb.Command
		perr := proto.Unmarshal(data, &pc)
		e, err := decodeEnvelope(data)
		if (perr == nil) != (err == nil) {
			t.Fatalf("envelope: proto says %v, decodeEnvelope %v", perr, err)
		}
		if err == nil && (e.version != pc.Version || e.typ != pc.Type || !bytes.Equal(e.payload, pc.Payload) || e.nanos != pc.ProposedUnixNanos || e.clock != pc.SessionClockUnixNanos) {
			t.Fatalf("envelope: decoded %+v, proto %v", e, &pc)
		}

		var pa pb.AppendCommand
		perr = proto.Unmarshal(data, &pa)
		var a appendView
		err = a.decode(data)
		if (perr == nil) != (err == nil) {
			t.Fatalf("append: proto says %v, decode %v", perr, err)
		}
		if err != nil {
			return
		}
		if len(a.ops) != len(pa.Ops) {
			t.Fatalf("append: %d ops, proto %d", len(a.ops), len(pa.Ops))
		}
		for i, op := range a.ops {
			po := pa.Ops[i]
			if op.clientID != po.ClientId || op.requestSeq != po.RequestSeq || op.ackedSeq != po.AckedSeq || op.established != po.SessionEstablished || op.n != len(po.Events) {
				t.Fatalf("op %d: decoded %+v, proto %v", i, op, po)
			}
			for j, ev := range a.events[op.first : op.first+op.n] {
				pe := po.Events[j]
				if ev.typ != pe.Type || !bytes.Equal(ev.payload, pe.Payload) || ev.crc != pe.Crc32C {
					t.Fatalf("op %d event %d: decoded %+v, proto %v", i, j, ev, pe)
				}
			}
		}
	})
}

// FuzzDecodeEventRecord: whatever decodeEventRecord reads, proto.Unmarshal
// of a SnapshotRecord reads too, to the same event; what it declines goes
// to proto (ReadSnapshot's fallback), so a snapshot restores to the same
// state, or fails the same way, as one read by proto alone.
func FuzzDecodeEventRecord(f *testing.F) {
	f.Add(appendEventRecord(nil, 7, "put", []byte("payload"), "c1", 3, 42))
	f.Add(appendEventRecord(nil, 0, "", nil, "", 0, 0))
	f.Add(appendEventRecord(nil, 1<<63, "ü", []byte{0}, "ß", 1<<40, 1))
	f.Add([]byte{0x0a, 0x02, 0x12, 0xff})                         // a type that is not UTF-8
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01, 0x12, 0x00})             // an event, then a session
	f.Add([]byte{0x0a, 0x04, 0x08, 0x01, 0x08, 0x02})             // seq twice: the last wins
	f.Add([]byte{0x0a, 0x03, 0x0b, 0x0c, 0x08})                   // an unknown group inside
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01, 0x0a, 0x02, 0x10, 0x05}) // two event fields: proto merges them
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := decodeEventRecord(data)
		if !ok {
			return
		}
		var rec pb.SnapshotRecord
		if err := proto.Unmarshal(data, &rec); err != nil {
			t.Fatalf("decoded %+v where proto fails: %v", e, err)
		}
		pe := rec.GetEvent()
		if pe == nil {
			t.Fatalf("decoded %+v where proto reads %v", e, &rec)
		}
		if e.seq != pe.Seq || e.typ != pe.Type || !bytes.Equal(e.payload, pe.Payload) || e.clientID != pe.ClientId || e.requestSeq != pe.RequestSeq || e.index != pe.Index {
			t.Fatalf("decoded %+v, proto %v", e, pe)
		}
	})
}
