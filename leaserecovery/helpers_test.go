package leaserecovery

import (
	"errors"
	"testing"
	"time"
)

// t0 is the reference time of every test.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// wantErr checks err has kind and reason; KindUnknown means no error.
func wantErr(t *testing.T, err error, kind ErrorKind, reason string) {
	t.Helper()
	if kind == KindUnknown {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %v (%s)", kind, reason)
	}
	if KindOf(err) != kind || ReasonOf(err) != reason {
		t.Fatalf("error %v: kind %v reason %q, want %v %q", err, KindOf(err), ReasonOf(err), kind, reason)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("errors.Is(%v, %v) is false", err, kind)
	}
}

func complete(id, gs uint64, n int64, live int) Block {
	return Block{ID: id, GS: gs, NumBytes: n, State: BlockComplete, LiveReplicas: live}
}

func committed(id, gs uint64, n int64, live int) Block {
	return Block{ID: id, GS: gs, NumBytes: n, State: BlockCommitted, LiveReplicas: live}
}

func underConstruction(id, gs uint64, n int64, expected ...NodeID) Block {
	return Block{ID: id, GS: gs, NumBytes: n, State: BlockUnderConstruction, Expected: expected}
}

func underRecovery(id, gs uint64, n int64, rid uint64, deadline time.Time, expected ...NodeID) Block {
	return Block{ID: id, GS: gs, NumBytes: n, State: BlockUnderRecovery, Expected: expected,
		Recovery: Recovery{ID: rid, Primary: "a", Attempt: 1, Chosen: []NodeID{"a"}, Deadline: deadline}}
}

func openFile(blocks ...Block) File {
	return File{Path: "/f", Blocks: blocks, UnderConstruction: true, LeaseHolder: "client-1", MinReplication: 1}
}

func closedFile(blocks ...Block) File {
	return File{Path: "/f", Blocks: blocks, MinReplication: 1}
}

func secs(n int64) time.Duration { return time.Duration(n) * time.Second }
