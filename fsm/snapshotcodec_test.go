package fsm

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// TestEventRecordMatchesProto: the hand-written event records are the bytes
// proto's deterministic marshal writes (so snapshots of equal states stay
// equal byte for byte across builds), and decode back to the same event.
func TestEventRecordMatchesProto(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	pick := func(vals ...uint64) uint64 { return vals[r.Intn(len(vals))] }
	str := func() string {
		return []string{"", "put", "ü-type", strings.Repeat("t", 200)}[r.Intn(4)]
	}
	for i := 0; i < 5000; i++ {
		payload := make([]byte, []int{0, 1, 127, 128, 256, 20000}[r.Intn(6)])
		r.Read(payload)
		e := &pb.StoredEvent{
			Seq:        pick(0, 1, 127, 128, uint64(r.Int63()), 1<<64-1),
			Type:       str(),
			Payload:    payload,
			ClientId:   str(),
			RequestSeq: pick(0, 1, 300, uint64(r.Int63())),
			Index:      pick(0, 5, 1<<35, 1<<64-1),
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.SnapshotRecord{Record: &pb.SnapshotRecord_Event{Event: e}})
		if err != nil {
			t.Fatal(err)
		}
		got := appendEventRecord(nil, e.Seq, e.Type, e.Payload, e.ClientId, e.RequestSeq, e.Index)
		if !bytes.Equal(got, want) {
			t.Fatalf("event %v:\n got  %x\n want %x", e, got, want)
		}
		v, ok := decodeEventRecord(got)
		if !ok || v.seq != e.Seq || v.typ != e.Type || !bytes.Equal(v.payload, e.Payload) || v.clientID != e.ClientId || v.requestSeq != e.RequestSeq || v.index != e.Index {
			t.Fatalf("event %v decoded to %+v (ok %v)", e, v, ok)
		}
	}
	// Records of another kind, or of another shape, are left to proto.
	other, _ := proto.Marshal(&pb.SnapshotRecord{Record: &pb.SnapshotRecord_Consumer{Consumer: &pb.Consumer{Name: "c", AckedSeq: 1}}})
	for _, b := range [][]byte{other, {}, {0x0a, 0x02, 0x08, 0x01, 0x0a, 0x02, 0x10, 0x05}, {0x0a, 0x02, 0x12, 0xff}} {
		if v, ok := decodeEventRecord(b); ok {
			t.Errorf("%x decoded as an event record: %+v", b, v)
		}
	}
}
