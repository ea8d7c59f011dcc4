package coordserver

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// TestHeldBackBy checks what the "journal full" refusal says holds the
// oldest sealed segment: the consumer furthest behind among those that
// have not acked it, or, once every consumer has, the snapshot trim waits
// for; never a consumer that has acked it.
func TestHeldBackBy(t *testing.T) {
	t.Parallel()
	f := fsm.New(nil)
	idx := uint64(0)
	do := func(ty fsmpb.CommandType, m proto.Message) {
		t.Helper()
		idx++
		data, err := fsm.EncodeCommand(ty, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(error); ok {
			t.Fatalf("%v: %v", ty, r)
		}
	}
	held := func() (s string) {
		f.View(func(st *fsm.State) { s = heldBackBy(st) })
		return s
	}
	do(fsmpb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL, &pb.JournalConfig{EventsPerSegment: 4, SegmentBytes: 1 << 30})
	consumer := func(op fsmpb.ConsumerOp, name string, seq uint64) {
		do(fsmpb.CommandType_COMMAND_TYPE_CONSUMER, &fsmpb.ConsumerCommand{Op: op, Name: name, Seq: seq})
	}
	consumer(fsmpb.ConsumerOp_CONSUMER_OP_REGISTER, "a", 0)
	consumer(fsmpb.ConsumerOp_CONSUMER_OP_REGISTER, "b", 0)
	if got := held(); got != "" {
		t.Fatalf("empty journal: %q", got)
	}
	for i := 0; i < 3; i++ {
		do(fsmpb.CommandType_COMMAND_TYPE_APPEND, &fsmpb.AppendCommand{Ops: []*fsmpb.AppendOp{{Events: []*fsmpb.JournalEvent{{Type: "t", Payload: []byte("p")}}}}})
	}
	if got := held(); got != "" {
		t.Fatalf("only an open segment: %q", got)
	}
	for i := 0; i < 7; i++ { // seqs 1..10: segments 1..4, 5..8 sealed, 9..10 open
		do(fsmpb.CommandType_COMMAND_TYPE_APPEND, &fsmpb.AppendCommand{Ops: []*fsmpb.AppendOp{{Events: []*fsmpb.JournalEvent{{Type: "t", Payload: []byte("p")}}}}})
	}
	for _, c := range []struct {
		name string
		seq  uint64
		want string
	}{
		{"b", 2, `consumer "a" acked seq 0 of 10`},
		{"a", 3, `consumer "b" acked seq 2 of 10`},
		{"b", 9, `consumer "a" acked seq 3 of 10`},
		// a has acked the oldest segment (1..4); b is further ahead:
		// neither holds it.
		{"a", 4, "every consumer has acked the oldest segment (seqs 1..4); the automatic trim drops it once a snapshot covers it"},
	} {
		consumer(fsmpb.ConsumerOp_CONSUMER_OP_ACK, c.name, c.seq)
		if got := held(); !strings.Contains(got, c.want) {
			t.Fatalf("after %s acked %d: %q, want %q", c.name, c.seq, got, c.want)
		}
	}
}
