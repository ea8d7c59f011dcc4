package console

import (
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// memJournal is an applied journal in memory: the index's port.
type memJournal struct {
	Source
	evs   []*pb.StoredEvent // seq i+first at index i
	first uint64
}

func (m *memJournal) Applied(from uint64, max int) ([]*pb.StoredEvent, uint64, uint64, <-chan struct{}) {
	next := m.first + uint64(len(m.evs))
	if from < m.first || from >= next || max <= 0 {
		return nil, m.first, next, nil
	}
	i := from - m.first
	return m.evs[i:min(uint64(len(m.evs)), i+uint64(max))], m.first, next, nil
}

func (m *memJournal) add(typ string, payload []byte) uint64 {
	seq := m.first + uint64(len(m.evs))
	m.evs = append(m.evs, &pb.StoredEvent{Seq: seq, Type: typ, Payload: payload})
	return seq
}

func (m *memJournal) trimTo(first uint64) {
	m.evs = m.evs[first-m.first:]
	m.first = first
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// catchUp runs the index over everything the journal holds.
func catchUp(x *index) {
	for {
		evs, first, next, _ := x.src.Applied(x.nextSeq(), readBatch)
		x.add(evs, first, next)
		if len(evs) == 0 {
			return
		}
	}
}

// TestIndex: the index counts retained events by type across a trim that
// cuts a chunk, and folds the recovery audit events into one record per
// block as coord recovery ls does, forgetting those trimmed.
func TestIndex(t *testing.T) {
	j := &memJournal{first: 1}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	start := func(block, rid uint64, primary string, attempt uint32, sec int) []byte {
		return mustMarshal(t, &fsmpb.NamespaceEvent{UnixNanos: at.Add(time.Duration(sec) * time.Second).UnixNano(),
			Op:     &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_StartRecovery{StartRecovery: &fsmpb.StartRecoveryOp{Path: "/f", BlockId: block}}},
			Result: &fsmpb.NamespaceResult{Block: &fsmpb.BlockRecord{Id: block, Gs: 7, Recovery: &fsmpb.BlockRecovery{RecoveryId: rid, Primary: primary, Attempt: attempt}}}})
	}
	for range 3*chunkSeqs + 10 {
		j.add("app.put", []byte("x"))
	}
	first := j.add(eventRecoveryStarted, start(1, 100, "n1", 1, 0))
	j.add(eventRecoveryStarted, start(1, 101, "n2", 2, 5))
	j.add(eventRecoveryStarted, start(2, 102, "n3", 1, 6))
	j.add(eventRecoveryCommitted, mustMarshal(t, &fsmpb.NamespaceEvent{UnixNanos: at.Add(9 * time.Second).UnixNano(),
		Op: &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CommitBlockSync{CommitBlockSync: &fsmpb.CommitBlockSyncOp{BlockId: 1, RecoveryId: 101, NewGs: 101, NewLength: 42, CloseFile: true, Targets: []string{"n1", "n2"}}}}}))
	j.add(eventRecoveryCommitted, []byte{0xff, 0xff}) // does not decode: counted, not folded
	x := newIndex(j)
	catchUp(x)
	st := x.state()
	if st.Indexed != j.first+uint64(len(j.evs))-1 {
		t.Fatalf("indexed through %d of %d", st.Indexed, len(j.evs))
	}
	want := []TypeCount{{"app.put", 3*chunkSeqs + 10}, {eventRecoveryStarted, 3}, {eventRecoveryCommitted, 2}}
	if !slices.Equal(st.Counts, want) {
		t.Fatalf("counts %v, want %v", st.Counts, want)
	}
	rs := x.recoveries(at.Add(time.Minute))
	if len(rs) != 2 || x.errors != 1 {
		t.Fatalf("%d recoveries, %d undecodable: %+v", len(rs), x.errors, rs)
	}
	r1, r2 := rs[0], rs[1]
	if r1.BlockID != 1 || len(r1.Attempts) != 2 || r1.Primary != "n2" || !r1.Committed || r1.Length != 42 || !r1.FileClosed ||
		r1.DurationMs != 9000 || r1.OldGS != 7 || r1.Outcome != "committed by recovery 101: length 42, GS 101, 2 replicas, file closed" {
		t.Fatalf("block 1: %+v", r1)
	}
	if r2.BlockID != 2 || r2.Committed || r2.Outcome != "in progress" || r2.DurationMs != 54000 {
		t.Fatalf("block 2: %+v", r2)
	}

	// A trim into the second chunk, past the first attempt of block 1.
	j.trimTo(chunkSeqs + 100)
	j.add("app.put", nil)
	catchUp(x)
	st = x.state()
	want = []TypeCount{{"app.put", 2*chunkSeqs + 10 - 99 + 1}, {eventRecoveryStarted, 3}, {eventRecoveryCommitted, 2}}
	if !slices.Equal(st.Counts, want) {
		t.Fatalf("after the trim: counts %v, want %v", st.Counts, want)
	}
	j.trimTo(first + 1)
	catchUp(x)
	if rs := x.recoveries(at); len(rs) != 2 || len(rs[0].Attempts) != 1 || rs[0].Attempts[0].RecoveryID != 101 {
		t.Fatalf("after trimming the first attempt: %+v", rs)
	}
}
