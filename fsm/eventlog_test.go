package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// refLog is the obvious model of eventLog: every event as a message.
type refLog struct {
	first, next uint64
	evs         []*pb.StoredEvent // evs[i].Seq == first+i
}

func (r *refLog) read(from uint64, max int) []*pb.StoredEvent {
	from = max64(from, r.first)
	if from >= r.next || max <= 0 {
		return nil
	}
	i := from - r.first
	return r.evs[i:min(uint64(len(r.evs)), i+uint64(max))]
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func sameEvents(t *testing.T, what string, got, want []*pb.StoredEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s: event %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestEventLogMatchesModel drives eventLog and the model with the same
// random appends (small and block-filling payloads, repeated and distinct
// types and clients), trims and resets, and compares reads from random
// seqs, and views captured earlier against the model as it was then.
func TestEventLogMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			var l eventLog
			ref := &refLog{first: 1, next: 1}
			type captured struct {
				views []eventBlock
				first uint64
				want  []*pb.StoredEvent
			}
			var caps []captured
			for step := 0; step < 2000; step++ {
				switch r := rng.Intn(100); {
				case r < 85:
					size := rng.Intn(600)
					if rng.Intn(200) == 0 {
						size = blockMaxBytes/2 + rng.Intn(blockMaxBytes) // rolls blocks by bytes
					}
					p := make([]byte, size)
					rng.Read(p)
					e := &pb.StoredEvent{
						Seq:        ref.next,
						Type:       fmt.Sprintf("type-%d", rng.Intn(4)),
						Payload:    p,
						ClientId:   fmt.Sprintf("client-%d", rng.Intn(300)),
						RequestSeq: rng.Uint64(),
						Index:      uint64(step),
					}
					if rng.Intn(10) == 0 {
						e.ClientId = ""
					}
					l.add(e.Seq, e.Type, e.Payload, e.ClientId, e.RequestSeq, e.Index)
					ref.evs = append(ref.evs, e)
					ref.next++
				case r < 93:
					to := ref.first + uint64(rng.Int63n(int64(ref.next-ref.first)+1))
					l.trimTo(to)
					ref.evs = ref.evs[to-ref.first:]
					ref.first = to
				case r < 94:
					l.reset()
					ref.evs, ref.first = nil, ref.next
				default:
					caps = append(caps, captured{views: l.view(), first: ref.first, want: append([]*pb.StoredEvent(nil), ref.evs...)})
				}
				if len(l.blocks) > 0 && l.blocks[0].first > ref.first && ref.first < ref.next {
					t.Fatalf("step %d: oldest block starts at %d, first held seq %d", step, l.blocks[0].first, ref.first)
				}
				for _, b := range l.blocks {
					if len(b.meta) > blockMaxEvents || len(b.meta) == 0 {
						t.Fatalf("step %d: block of %d events", step, len(b.meta))
					}
				}
				from := ref.first + uint64(rng.Int63n(int64(ref.next-ref.first)+2))
				max := 1 + rng.Intn(700)
				got := l.read(from, int(min(uint64(max), ref.next-min(from, ref.next))))
				sameEvents(t, fmt.Sprintf("step %d read(%d, %d)", step, from, max), got, ref.read(from, max))
			}
			for i, c := range caps {
				var got []*pb.StoredEvent
				eachEvent(c.views, c.first, func(e *pb.StoredEvent) bool { got = append(got, e); return true })
				sameEvents(t, fmt.Sprintf("view %d", i), got, c.want)
			}
		})
	}
}

// TestSnapshotViewUnchangedByLaterApplies captures a snapshot, applies
// appends, a trim and a reset before persisting it, and checks the
// persisted snapshot restores the state at capture.
func TestSnapshotViewUnchangedByLaterApplies(t *testing.T) {
	j := newJournal(t, 100)
	j.append(700)
	j.trim(301, 1<<40) // through segment 3: part of a block is trimmed
	snap, err := j.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var want [32]byte
	j.f.View(func(s *State) { want = s.Hash() })
	j.append(300)
	j.trim(801, 1<<40)
	j.do(pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{})
	j.append(10)
	var buf bytes.Buffer
	if err := snap.(*snapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	var got [32]byte
	g.View(func(s *State) {
		got = s.Hash()
		if s.FirstSeq() != 301 || s.EventCount() != 400 {
			t.Fatalf("restored first seq %d, %d events; want 301, 400", s.FirstSeq(), s.EventCount())
		}
		evs := s.Read(1, 1000)
		if len(evs) != 400 || evs[0].Seq != 301 || evs[399].Seq != 700 {
			t.Fatalf("restored read: %d events", len(evs))
		}
	})
	if got != want {
		t.Fatal("the snapshot persisted after later applies differs from the state at capture")
	}
}
