package fsm

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
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

// TestCheckpointDigestAfterApply: a checkpoint's digest is computed after
// its apply, from a capture, while later entries keep changing the state
// (appends, a trim that drops the captured segments, namespace records
// replaced); it must equal the state's digest at the checkpoint's index.
// Under -race this also shows the capture shares nothing that later
// applies write.
func TestCheckpointDigestAfterApply(t *testing.T) {
	j := newJournal(t, 64)
	j.consumer(pb.ConsumerOp_CONSUMER_OP_REGISTER, "c", 1, true)
	nsOp := func(i int, op *pb.NamespaceOp) {
		j.idx++
		r, ok := j.f.Apply(nsEntry(t, j.idx, t0+int64(j.idx)*1e6, &pb.NamespaceCommand{Op: op})).(NamespaceResult)
		if !ok || r.Err != nil {
			t.Fatalf("namespace op %d: %+v", i, r)
		}
	}
	for i := range 20 {
		nsOp(i, opRegister(fmt.Sprintf("n%d", i), "g", "gossip", "i1"))
		nsOp(i, opCreate(fmt.Sprintf("/f%d", i), "w", false))
	}
	j.append(5000)

	cp, ok := j.do(pb.CommandType_COMMAND_TYPE_CHECKPOINT, &pb.CheckpointCommand{}).(*Checkpoint)
	if !ok || cp.Index != j.idx {
		t.Fatalf("checkpoint result %+v", cp)
	}
	var want [32]byte
	j.f.View(func(s *State) { want = s.Hash() })

	j.append(2000)
	j.consumer(pb.ConsumerOp_CONSUMER_OP_ACK, "c", 6000, false)
	if r := j.trim(0, j.idx); r.Err != nil || r.TrimmedPos <= 5000 {
		t.Fatalf("trim: %+v", r)
	}
	for i := range 20 {
		nsOp(i, opRegister(fmt.Sprintf("n%d", i), "g2", "gossip", "i1"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, found, err := j.f.CheckpointDigest(ctx, cp.Index)
	if err != nil || !found || got != want {
		t.Fatalf("checkpoint digest %x (found %v, %v), want %x", got, found, err, want)
	}
	var now [32]byte
	j.f.View(func(s *State) { now = s.Hash() })
	if now == want {
		t.Fatal("the state did not change after the checkpoint: the test shows nothing")
	}

	// The last 16 checkpoints are kept; others are not found.
	for range keepCheckpoints {
		j.do(pb.CommandType_COMMAND_TYPE_CHECKPOINT, &pb.CheckpointCommand{})
	}
	for _, idx := range []uint64{cp.Index, j.idx + 1} {
		if _, found, err := j.f.CheckpointDigest(ctx, idx); found || err != nil {
			t.Fatalf("checkpoint at %d: found %v, %v", idx, found, err)
		}
	}
	j.f.View(func(s *State) { now = s.Hash() })
	if d, found, err := j.f.CheckpointDigest(ctx, j.idx); !found || err != nil || d != now {
		t.Fatalf("last checkpoint: %x found %v, %v; want %x", d, found, err, now)
	}
}

// TestCheckpointDigestWaitEndsWithContext: a caller whose context ends
// before the digest is computed gets the context's error.
func TestCheckpointDigestWaitEndsWithContext(t *testing.T) {
	cp := newCheckpoint(7, captureSnapshot(NewState()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cp.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	cp.compute()
	if d, err := cp.Wait(ctx); err != nil || d != NewState().Hash() {
		t.Fatalf("after compute: %x, %v", d, err)
	}
}

// TestCheckpointsExpireUnhashed: checkpoints applied faster than their
// digests are computed (here 40 in one batch, so none is hashed between
// them) hold at most keepCheckpoints captures: the older ones expire and
// their waiters are told so; the kept ones are hashed, and then the FSM
// holds no capture and no digest goroutine.
func TestCheckpointsExpireUnhashed(t *testing.T) {
	f := New(nil)
	f.Apply(appendEntry(t, 1, op("c", 1, 0, "a", "b")))
	var logs []*raft.Log
	for i := range 40 {
		logs = append(logs, cmdEntry(t, uint64(2+i), pb.CommandType_COMMAND_TYPE_CHECKPOINT, &pb.CheckpointCommand{}))
	}
	out := f.ApplyBatch(logs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, r := range out {
		cp := r.(*Checkpoint)
		d, err := cp.Wait(ctx)
		switch {
		case i < 40-keepCheckpoints && !errors.Is(err, ErrCheckpointExpired):
			t.Fatalf("checkpoint %d: %x, %v; want expired", cp.Index, d, err)
		case i >= 40-keepCheckpoints && (err != nil || d == [32]byte{}):
			t.Fatalf("checkpoint %d: %x, %v", cp.Index, d, err)
		}
	}
	var want [32]byte
	f.View(func(s *State) { want = s.Hash() })
	if d, found, err := f.CheckpointDigest(ctx, 41); !found || err != nil || d != want {
		t.Fatalf("last checkpoint: %x found %v, %v; want %x", d, found, err, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.RLock()
		busy := f.digesting
		held := 0
		for _, c := range f.checkpoints {
			if c.pending() {
				held++
			}
		}
		f.mu.RUnlock()
		if !busy && held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("digesting %v, %d captures held", busy, held)
		}
		runtime.Gosched()
	}
}
