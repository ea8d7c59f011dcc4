package fsm

import (
	"bytes"
	"encoding/hex"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// TestDigestIsStable pins state digests to the values earlier builds
// computed: members on different builds compare them (coord journal
// verify, checkpoints), so the bytes a digest hashes must not change
// unless the state itself does.
func TestDigestIsStable(t *testing.T) {
	states := map[string]func() *State{
		"base namespace": func() *State { return newBase(t).s },
		"trimmed": func() *State { // the retained events start inside a block
			j := newJournal(t, 10)
			j.append(300)
			j.consumer(pb.ConsumerOp_CONSUMER_OP_REGISTER, "c", 1, true)
			j.consumer(pb.ConsumerOp_CONSUMER_OP_ACK, "c", 245, false)
			if r := j.trim(0, j.idx); r.Err != nil || r.TrimmedPos != 241 {
				t.Fatalf("trim: %+v", r)
			}
			j.append(10)
			return j.f.state
		},
		"large payloads": func() *State {
			f := New(nil)
			for idx := uint64(1); idx <= 3; idx++ {
				payload := bytes.Repeat([]byte{byte(idx)}, []int{70 << 10, 10, 300 << 10}[idx-1])
				f.Apply(appendEntry(t, idx, &pb.AppendOp{ClientId: "big", RequestSeq: idx, Events: []*pb.JournalEvent{{Type: "blob", Payload: payload}, {Type: "small", Payload: []byte("x")}}}))
			}
			return f.state
		},
	}
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		states["random "+string(rune('0'+seed))] = func() *State {
			f := New(nil)
			f.ApplyBatch(randomLogs(t, seed, 400))
			return f.state
		}
	}
	want := map[string]string{
		"random 1":       "6910616760424411cbfbea0026474d079142145043e6660dcf9c5289c9ad2ea5",
		"random 2":       "2d7b65beef0f4805eef2fa586cbd21d0259bfb80b9111364150e0e8ac1fc46cb",
		"random 3":       "63db12360a577c3c6c3a824e5ad812d92676cdc561ff0b13cbe756ddea5c4b12",
		"random 4":       "04170b9625cb7fec94a9cf383ea5ab51fbd347e015e57de575e57e393e08e388",
		"random 5":       "2ad948a60671c068c61324f720b123a984be0c09f382a0bab93ceae8503ad68a",
		"base namespace": "8a319dab2069f1ae110529fdd8d4c591247073069aad784abe9e687e3d07bd30",
		"trimmed":        "ca81aa9d3cbf64de4bea00e1da1ab6a0042bbb9be41754fc651ec27b5628ab50",
		"large payloads": "59b7edf3b540627ce7fc2cea0936835a6f76ff6f78d91fca22829d56530071c0",
	}
	for name, mk := range states {
		h := mk().Hash()
		if got := hex.EncodeToString(h[:]); got != want[name] {
			t.Errorf("%s: digest %s, want %s", name, got, want[name])
		}
	}
}
