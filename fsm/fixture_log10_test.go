package fsm

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// format10FixtureLogs is the history testdata/snapshot-v5-log10.bin was
// written from (by the build before the journal settings held by the
// cluster: log format 10, snapshot format 5): the format-5 fixture's
// history, then entries one second apart (entry i proposed at i seconds,
// with a session clock of i seconds from format 10 on): a SET_FORMAT to 9,
// a CONFIGURE_JOURNAL of 8 events per segment and an idle timeout of 600 s,
// a SET_FORMAT to 10, two opened sessions with three appends each, a
// consumer registered and acked to the first of them.
func format10FixtureLogs(t testing.TB) []*raft.Log {
	logs := format5FixtureLogs(t)
	idx := uint64(len(logs))
	add := func(version uint32, typ pb.CommandType, m proto.Message) uint64 {
		t.Helper()
		idx++
		at := int64(idx) * int64(time.Second)
		data, err := EncodeCommandAt(version, typ, m, at, at)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
		return idx
	}
	add(SessionCloseFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: SessionIdleFormat})
	add(SessionIdleFormat, pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: 8, SegmentBytes: 1 << 20, SessionIdleTimeoutSeconds: 600})
	add(SessionIdleFormat, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: LeaderClockFormat})
	var ids []string
	for _, c := range []string{"fixture-d", "fixture-e"} {
		ids = append(ids, SessionID(c, add(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_OPEN_SESSION, &pb.OpenSessionCommand{ClientId: c})))
	}
	for seq := uint64(1); seq <= 3; seq++ {
		for _, id := range ids {
			o := op(id, seq, seq-1, "log10")
			o.SessionEstablished = seq > 1
			add(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{o}})
		}
	}
	f := New(nil)
	f.ApplyBatch(logs)
	var first uint64
	f.View(func(s *State) { first = s.FirstSeq() })
	add(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_CONSUMER, &pb.ConsumerCommand{Op: pb.ConsumerOp_CONSUMER_OP_REGISTER, Name: "fixture-reader", Seq: first, FromGiven: true})
	add(LeaderClockFormat, pb.CommandType_COMMAND_TYPE_CONSUMER, &pb.ConsumerCommand{Op: pb.ConsumerOp_CONSUMER_OP_ACK, Name: "fixture-reader", Seq: first + 1})
	return logs
}
