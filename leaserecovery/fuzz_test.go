package leaserecovery

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// decodeReplies turns fuzz bytes into replies, 5 bytes each: kind, state, GS
// offset from the block's GS (signed), length (2 bytes; the high bit of the
// kind byte negates it). Bit 7 of the state byte reuses the previous node id.
func decodeReplies(gs uint64, data []byte) []ReplicaReply {
	var out []ReplicaReply
	for i := 0; i+5 <= len(data) && len(out) < 16; i += 5 {
		c := data[i : i+5]
		node := NodeID(fmt.Sprintf("n%d", len(out)))
		if c[1]&0x80 != 0 && len(out) > 0 {
			node = out[len(out)-1].Node
		}
		n := int64(c[3]) | int64(c[4])<<8
		if c[0]&0x80 != 0 {
			n = -n
		}
		out = append(out, ReplicaReply{
			Node:     node,
			Kind:     ReplyKind(c[0] % 5),
			State:    ReplicaState(c[1] & 0x7f % 6),
			GS:       gs + uint64(int64(int8(c[2]))),
			NumBytes: n,
		})
	}
	return out
}

func FuzzPlanRecovery(f *testing.F) {
	f.Add(uint64(100), uint8(5), []byte{0, 1, 0, 100, 0, 0, 1, 0, 120, 0, 0, 1, 0, 150, 0})
	f.Add(uint64(100), uint8(5), []byte{0, 0, 0, 150, 0, 0, 0, 0, 140, 0})
	f.Add(uint64(100), uint8(5), []byte{0, 0, 0, 200, 0, 0, 1, 0, 200, 0, 0, 1, 0, 100, 0, 0, 2, 0, 200, 0})
	f.Add(uint64(100), uint8(5), []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0xff, 0, 4, 0})
	f.Add(uint64(100), uint8(1), []byte{3, 1, 0, 1, 0})
	f.Add(uint64(0), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, gs uint64, delta uint8, data []byte) {
		b := Block{ID: 1, GS: gs, State: BlockUnderRecovery, Expected: []NodeID{"n0", "n1"}, Recovery: Recovery{ID: gs + uint64(delta)}}
		replies := decodeReplies(gs, data)
		p, err := PlanRecovery(b, replies)
		p2, err2 := PlanRecovery(b, slices.Clone(replies))
		if !reflect.DeepEqual(p, p2) || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("not deterministic: %+v %v / %+v %v", p, err, p2, err2)
		}
		if err != nil {
			if KindOf(err) == KindUnknown || ReasonOf(err) == "" {
				t.Fatalf("error without kind or reason: %v", err)
			}
			return
		}
		candidate := func(r ReplicaReply) bool {
			return r.Kind == ReplyReplica && r.GS >= b.GS && r.GS < b.Recovery.ID && r.NumBytes > 0
		}
		for _, r := range replies {
			if r.Kind == ReplyRecoveryInProgress {
				t.Fatalf("plan despite a preempting reply: %+v", p)
			}
		}
		switch p.Action {
		case PlanDelete:
			if len(p.Participants) != 0 || p.NewLength != 0 {
				t.Fatalf("delete plan with participants or length: %+v", p)
			}
			for _, r := range replies {
				if candidate(r) || (r.Kind != ReplyNoReplica && !(r.Kind == ReplyReplica && r.NumBytes == 0 && r.GS >= b.GS && r.GS < b.Recovery.ID)) {
					t.Fatalf("delete plan although %+v may hold data", r)
				}
			}
		case PlanSync:
			if len(p.Participants) == 0 || p.NewLength <= 0 {
				t.Fatalf("sync plan without participants or length: %+v", p)
			}
			for _, q := range p.Participants {
				if !slices.Contains(replies, q) {
					t.Fatalf("participant %+v not among the replies", q)
				}
				if !candidate(q) || !q.State.Recoverable() {
					t.Fatalf("participant %+v is not a usable candidate", q)
				}
				if p.NewLength > q.NumBytes {
					t.Fatalf("new length %d above participant %+v (recovery never grows a replica)", p.NewLength, q)
				}
			}
			for _, r := range replies {
				if candidate(r) && r.State == ReplicaFinalized {
					if p.NewLength != r.NumBytes || p.BestState != ReplicaFinalized || !slices.Contains(p.Participants, r) {
						t.Fatalf("finalized %+v: plan %+v", r, p)
					}
				}
			}
			// The commit built from the plan is accepted by the state that
			// started the recovery and synchronises to the plan's length.
			file := File{Path: "/f", Blocks: []Block{b}, UnderConstruction: true, LeaseHolder: "c"}
			req, err := BuildCommit(b, p, nodesOf(p.Participants))
			if err != nil {
				t.Fatalf("BuildCommit: %v", err)
			}
			out, err := CheckCommit(&file, req)
			if err != nil {
				t.Fatalf("CheckCommit(%+v): %v", req, err)
			}
			if out.Block.GS != b.Recovery.ID || out.Block.NumBytes != p.NewLength || out.Block.State != BlockComplete {
				t.Fatalf("commit outcome %+v", out)
			}
		default:
			t.Fatalf("plan action %v", p.Action)
		}
	})
}

func FuzzReconcileReplica(f *testing.F) {
	f.Add(false, uint8(1), uint64(10), int64(100), uint8(0), uint64(10), int64(100), uint64(20), uint8(0))
	f.Add(true, uint8(1), uint64(10), int64(100), uint8(1), uint64(30), int64(5), uint64(20), uint8(0))
	f.Add(false, uint8(3), uint64(10), int64(50), uint8(2), uint64(9), int64(40), uint64(0), uint8(8))
	f.Add(false, uint8(4), uint64(10), int64(50), uint8(4), uint64(10), int64(-1), uint64(20), uint8(3))
	f.Fuzz(func(t *testing.T, nilStored bool, bs uint8, sgs uint64, slen int64, rs uint8, rgs uint64, rlen int64, maxGS uint64, flags uint8) {
		var stored *Block
		if !nilStored {
			stored = &Block{ID: 1, GS: sgs, NumBytes: slen, State: BlockState(bs % 6)}
		}
		r := ReportedReplica{Node: "a", ID: 1, GS: rgs, NumBytes: rlen, State: ReplicaState(rs % 6)}
		c := ReportContext{MaxGS: maxGS, Location: flags&1 != 0, Corrupt: flags&2 != 0, PendingInvalidation: flags&4 != 0, Postpone: flags&8 != 0}
		got := ReconcileReplica(stored, r, c)
		if got != ReconcileReplica(stored, r, c) {
			t.Fatal("not deterministic")
		}
		if got.Action <= reportUnspecified || got.Action > ReportQueue || got.Reason == "" {
			t.Fatalf("bad verdict %+v", got)
		}
		future := maxGS != 0 && rgs > maxGS
		switch {
		case future && got.Action != ReportQueue:
			t.Fatalf("future GS not queued: %+v", got)
		case !future && stored == nil && rlen >= 0 && got.Action != ReportInvalidate:
			t.Fatalf("unknown block not invalidated: %+v", got)
		case got.Action == ReportInvalidate && stored != nil:
			t.Fatalf("known block invalidated: %+v", got)
		case got.Action == ReportMarkCorrupt && c.Postpone:
			t.Fatalf("marked corrupt while postponing: %+v", got)
		case got.CheckComplete && (got.Action != ReportAddLocation || stored.State != BlockCommitted):
			t.Fatalf("CheckComplete on %+v", got)
		}
		switch got.Action {
		case ReportAddLocation, ReportAddLocationAndExpected:
			if r.State != ReplicaFinalized {
				t.Fatalf("%v replica added as a location", r.State)
			}
		}
		switch got.Action {
		case ReportAddLocation, ReportAddLocationAndExpected, ReportAddExpected:
			if c.PendingInvalidation || r.NumBytes < 0 {
				t.Fatalf("added despite %+v / %+v", c, r)
			}
			if got.Action != ReportAddLocation && stored.State == BlockComplete {
				t.Fatalf("expected list of a COMPLETE block: %+v", got)
			}
			if r.State > ReplicaRWR {
				t.Fatalf("%v replica accepted", r.State)
			}
			if !(r.State == ReplicaFinalized && stored.State == BlockUnderRecovery) && r.GS < stored.GS {
				t.Fatalf("stale replica accepted: stored %+v reported %+v", stored, r)
			}
			if r.State == ReplicaFinalized && (stored.State == BlockComplete || stored.State == BlockCommitted) &&
				(r.GS != stored.GS || r.NumBytes != stored.NumBytes) {
				t.Fatalf("mismatching finalized replica accepted: stored %+v reported %+v", stored, r)
			}
		}
	})
}
