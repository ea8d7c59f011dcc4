package fsm

import (
	"bytes"
	"math"
	"testing"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// TestEncodeCommandSameBytes: the one-pass envelope is byte for byte what
// marshalling the sub-command and then the envelope gives, for every
// format, empty and zero fields, negative times and large batches.
func TestEncodeCommandSameBytes(t *testing.T) {
	big := &pb.AppendCommand{}
	for i := range 300 {
		op := &pb.AppendOp{ClientId: "c", RequestSeq: uint64(i + 1)}
		for range 3 {
			op.Events = append(op.Events, &pb.JournalEvent{Type: "t", Payload: bytes.Repeat([]byte{byte(i)}, 256)})
		}
		big.Ops = append(big.Ops, op)
	}
	subs := []struct {
		t   pb.CommandType
		sub proto.Message
	}{
		{pb.CommandType_COMMAND_TYPE_APPEND, big},
		{pb.CommandType_COMMAND_TYPE_APPEND, &pb.AppendCommand{Ops: []*pb.AppendOp{{ClientId: "x", Events: []*pb.JournalEvent{{Type: "", Payload: nil}}}}}},
		{pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &pb.RegisterMemberCommand{}}, // an empty payload
		{pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: CommandVersion}},
		{0, &pb.SetFormatCommand{Version: 1}}, // type 0 is left out
	}
	times := []int64{0, 1, -1, 1_700_000_000_000_000_000, math.MinInt64, math.MaxInt64}
	for version := uint32(MinCommandVersion); version <= CommandVersion; version++ {
		for _, s := range subs {
			for _, proposed := range times {
				for _, clock := range times {
					got, err := EncodeCommandAt(version, s.t, s.sub, proposed, clock)
					if err != nil {
						t.Fatal(err)
					}
					payload, err := proto.Marshal(s.sub) // after EncodeCommandAt filled in the CRCs
					if err != nil {
						t.Fatal(err)
					}
					cmd := &pb.Command{Version: version, Type: s.t, Payload: payload, ProposedUnixNanos: proposed}
					if version >= LeaderClockFormat {
						cmd.SessionClockUnixNanos = clock
					}
					want, err := proto.Marshal(cmd)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("format %d, %s, proposed %d, clock %d: %d bytes differ from proto.Marshal's %d", version, s.t, proposed, clock, len(got), len(want))
					}
					dec, err := DecodeCommand(got)
					if err != nil || dec.Version != version || dec.Type != s.t || dec.ProposedUnixNanos != proposed || !bytes.Equal(dec.Payload, payload) {
						t.Fatalf("format %d, %s: decoded %v, %v", version, s.t, dec, err)
					}
				}
			}
		}
	}
}

func BenchmarkEncodeAppend(b *testing.B) {
	a := &pb.AppendCommand{}
	for i := range 33 {
		a.Ops = append(a.Ops, &pb.AppendOp{ClientId: "sdk-0123456789abcdef01234567@17", RequestSeq: uint64(i + 1), Events: []*pb.JournalEvent{{Type: "bench", Payload: bytes.Repeat([]byte{'a'}, 256)}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeCommandAt(CommandVersion, pb.CommandType_COMMAND_TYPE_APPEND, a, 1, 2); err != nil {
			b.Fatal(err)
		}
	}
}
