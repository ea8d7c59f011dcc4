package client

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

func TestRecoveryEventTypesAreFSMs(t *testing.T) {
	t.Parallel()
	if EventRecoveryStarted != fsm.EventRecoveryStarted || EventRecoveryCommitted != fsm.EventRecoveryCommitted {
		t.Fatalf("client %q %q, fsm %q %q", EventRecoveryStarted, EventRecoveryCommitted, fsm.EventRecoveryStarted, fsm.EventRecoveryCommitted)
	}
}

func startedEvent(t *testing.T, seq, block, gs, id uint64, attempt uint32, primary string, at int64) StoredEvent {
	t.Helper()
	ev := &fsmpb.NamespaceEvent{
		Op: &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_StartRecovery{StartRecovery: &fsmpb.StartRecoveryOp{
			Path: "/f", BlockId: block, Primary: primary, Reason: "lease expired"}}},
		Result: &fsmpb.NamespaceResult{Block: &fsmpb.BlockRecord{Id: block, Gs: gs, Recovery: &fsmpb.BlockRecovery{
			RecoveryId: id, Primary: primary, Attempt: attempt, DeadlineUnixNanos: at + 60e9, Reason: "lease expired"}}},
		UnixNanos: at,
	}
	b, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return StoredEvent{Seq: seq, Type: EventRecoveryStarted, Payload: b}
}

func committedEvent(t *testing.T, seq, block, oldGS, id, length uint64, at int64, targets ...string) StoredEvent {
	t.Helper()
	ev := &fsmpb.NamespaceEvent{
		Op: &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_CommitBlockSync{CommitBlockSync: &fsmpb.CommitBlockSyncOp{
			BlockId: block, RecoveryId: id, NewGs: id, NewLength: length, OldGs: oldGS, Targets: targets}}},
		Result:    &fsmpb.NamespaceResult{Closed: true},
		UnixNanos: at,
	}
	b, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return StoredEvent{Seq: seq, Type: EventRecoveryCommitted, Payload: b}
}

func TestDecodeRecoveryEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 5, time.UTC).UnixNano()
	ev, ok, err := DecodeRecoveryEvent(startedEvent(t, 7, 42, 1001, 1005, 2, "n2", at))
	want := RecoveryEvent{Seq: 7, Type: EventRecoveryStarted, Time: time.Unix(0, at), BlockID: 42, Path: "/f", GS: 1001,
		Attempt: &BlockRecovery{ID: 1005, Primary: "n2", Attempt: 2, Deadline: time.Unix(0, at+60e9), Reason: "lease expired"}}
	if err != nil || !ok || !reflect.DeepEqual(ev, want) {
		t.Fatalf("started: %+v %v %v\nwant %+v", ev, ok, err, want)
	}
	ev, ok, err = DecodeRecoveryEvent(committedEvent(t, 9, 42, 1001, 1005, 300, at, "n2", "n3"))
	want = RecoveryEvent{Seq: 9, Type: EventRecoveryCommitted, Time: time.Unix(0, at), BlockID: 42, GS: 1001,
		Commit: &RecoveryCommit{RecoveryID: 1005, OldGS: 1001, NewGS: 1005, Length: 300, Participants: []string{"n2", "n3"}, FileClosed: true}}
	if err != nil || !ok || !reflect.DeepEqual(ev, want) {
		t.Fatalf("committed: %+v %v %v\nwant %+v", ev, ok, err, want)
	}
	if _, ok, err := DecodeRecoveryEvent(StoredEvent{Seq: 1, Type: fsm.EventCreate, Payload: []byte("x")}); ok || err != nil {
		t.Fatalf("another type: %v %v", ok, err)
	}
	if _, _, err := DecodeRecoveryEvent(StoredEvent{Seq: 3, Type: EventRecoveryStarted, Payload: []byte{0xff}}); err == nil || !strings.Contains(err.Error(), "journal event 3") {
		t.Fatalf("a bad payload: %v", err)
	}
}

func TestFoldRecoveries(t *testing.T) {
	t.Parallel()
	var evs []RecoveryEvent
	for _, se := range []StoredEvent{
		committedEvent(t, 2, 9, 50, 51, 10, 2e9), // its start was trimmed
		startedEvent(t, 3, 42, 1001, 1002, 1, "n1", 3e9),
		startedEvent(t, 4, 43, 7, 1003, 1, "n3", 4e9),
		startedEvent(t, 5, 42, 1001, 1004, 2, "n2", 5e9),
		committedEvent(t, 6, 42, 1001, 1004, 300, 6e9, "n2", "n3"),
	} {
		ev, ok, err := DecodeRecoveryEvent(se)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		evs = append(evs, ev)
	}
	hs := FoldRecoveries(evs)
	if len(hs) != 3 || hs[0].BlockID != 9 || hs[1].BlockID != 42 || hs[2].BlockID != 43 {
		t.Fatalf("blocks out of first-recovered order: %+v", hs)
	}
	if h := hs[0]; len(h.Attempts) != 0 || h.Committed == nil || h.Committed.Seq != 2 {
		t.Fatalf("a commit alone: %+v", h)
	}
	if h := hs[1]; h.Path != "/f" || h.OldGS != 1001 || len(h.Attempts) != 2 || h.Attempts[1].Attempt.ID != 1004 ||
		h.Committed == nil || h.Committed.Commit.Length != 300 {
		t.Fatalf("two attempts and a commit: %+v", h)
	}
	if h := hs[2]; len(h.Attempts) != 1 || h.Committed != nil {
		t.Fatalf("in progress: %+v", h)
	}
	if hs := FoldRecoveries(nil); hs == nil || len(hs) != 0 {
		t.Fatalf("no events: %#v", hs)
	}
}
