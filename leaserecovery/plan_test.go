package leaserecovery

import (
	"slices"
	"testing"
)

// recBlock is the block of every plan test: coordinator GS 100, recovery id 105.
var recBlock = Block{ID: 7, GS: 100, NumBytes: 90, State: BlockUnderRecovery, Recovery: Recovery{ID: 105}}

func rep(n NodeID, s ReplicaState, gs uint64, length int64) ReplicaReply {
	return ReplicaReply{Node: n, Kind: ReplyReplica, State: s, GS: gs, NumBytes: length}
}

func replyOf(n NodeID, k ReplyKind) ReplicaReply { return ReplicaReply{Node: n, Kind: k} }

func nodesOf(rs []ReplicaReply) []NodeID {
	out := make([]NodeID, len(rs))
	for i, r := range rs {
		out[i] = r.Node
	}
	return out
}

func TestPlanRecovery(t *testing.T) {
	const F, B, W, U, T = ReplicaFinalized, ReplicaRBW, ReplicaRWR, ReplicaRUR, ReplicaTemporary
	tests := []struct {
		name    string
		rule    string
		block   Block
		replies []ReplicaReply
		action  PlanAction
		best    ReplicaState
		nodes   []NodeID
		length  int64
		kind    ErrorKind
		reason  string
	}{
		// The table of §R4.1 step 6.
		{"three RBW of different lengths", "§4.1 step 6 RBW, §7.5", recBlock,
			[]ReplicaReply{rep("a", B, 100, 100), rep("b", B, 100, 120), rep("c", B, 100, 150)}, PlanSync, B, []NodeID{"a", "b", "c"}, 100, 0, ""},
		{"RBW of equal lengths", "§4.1 step 6 RBW", recBlock,
			[]ReplicaReply{rep("a", B, 100, 64), rep("b", B, 100, 64)}, PlanSync, B, []NodeID{"a", "b"}, 64, 0, ""},
		{"only RWR", "§4.1 step 6 RWR, §7.7", recBlock,
			[]ReplicaReply{rep("a", W, 100, 512), rep("b", W, 100, 1024), rep("c", W, 100, 1000)}, PlanSync, W, []NodeID{"a", "b", "c"}, 512, 0, ""},
		{"RBW and shorter RWR", "§4.1 step 6 RBW: RWR excluded", recBlock,
			[]ReplicaReply{rep("a", W, 100, 10), rep("b", B, 100, 80), rep("c", B, 100, 70)}, PlanSync, B, []NodeID{"b", "c"}, 70, 0, ""},
		{"finalized, RBW equal, shorter, longer, RWR", "§4.1 step 6 FINALIZED", recBlock,
			[]ReplicaReply{rep("a", F, 100, 200), rep("b", B, 100, 200), rep("c", B, 100, 150), rep("d", B, 100, 250), rep("e", W, 100, 200)},
			PlanSync, F, []NodeID{"a", "b"}, 200, 0, ""},
		{"two finalized of one length", "§4.1 step 5", recBlock,
			[]ReplicaReply{rep("a", F, 100, 200), rep("b", F, 100, 200)}, PlanSync, F, []NodeID{"a", "b"}, 200, 0, ""},
		{"finalized after a close recovery, higher GS", "§4.1 step 1: GS ≥ block GS", recBlock,
			[]ReplicaReply{rep("a", F, 101, 200), rep("b", B, 100, 200)}, PlanSync, F, []NodeID{"a", "b"}, 200, 0, ""},
		{"finalized lengths differ", "§4.1 step 5, §7.6", recBlock,
			[]ReplicaReply{rep("a", F, 100, 150), rep("b", F, 100, 140)}, 0, 0, nil, 0, KindFailedPrecondition, ReasonInconsistentLength},
		{"finalized lengths differ among others", "§4.1 step 5", recBlock,
			[]ReplicaReply{rep("a", F, 100, 150), rep("b", B, 100, 150), rep("c", F, 100, 151)}, 0, 0, nil, 0, KindFailedPrecondition, ReasonInconsistentLength},
		{"single RBW", "§4.1 step 6", recBlock, []ReplicaReply{rep("a", B, 100, 33)}, PlanSync, B, []NodeID{"a"}, 33, 0, ""},
		{"single finalized", "§4.1 step 6", recBlock, []ReplicaReply{rep("a", F, 100, 33)}, PlanSync, F, []NodeID{"a"}, 33, 0, ""},
		{"RBW ahead of the coordinator GS", "§5.3 ordering: DN GS > NN GS accepted", recBlock,
			[]ReplicaReply{rep("a", B, 103, 90), rep("b", B, 100, 95)}, PlanSync, B, []NodeID{"a", "b"}, 90, 0, ""},

		// Candidates and errors (§R4.1 steps 1-4).
		{"stale replica is an error, others proceed", "§4.1 step 1, §7.8", recBlock,
			[]ReplicaReply{rep("a", B, 99, 500), rep("b", B, 100, 120), rep("c", B, 100, 130)}, PlanSync, B, []NodeID{"b", "c"}, 120, 0, ""},
		{"stale replica is the only location", "§4.1 step 2, §7.8", recBlock,
			[]ReplicaReply{rep("a", B, 99, 500)}, 0, 0, nil, 0, KindUnavailable, ReasonAllFailed},
		{"failed call, others proceed", "§4.1 step 1", recBlock,
			[]ReplicaReply{replyOf("a", ReplyFailed), rep("b", F, 100, 64)}, PlanSync, F, []NodeID{"b"}, 64, 0, ""},
		{"all failed", "§4.1 step 2", recBlock,
			[]ReplicaReply{replyOf("a", ReplyFailed), replyOf("b", ReplyFailed)}, 0, 0, nil, 0, KindUnavailable, ReasonAllFailed},
		{"GS at the recovery id", "§2.12 step 4: the node would refuse", recBlock,
			[]ReplicaReply{rep("a", B, 105, 10), rep("b", B, 100, 20)}, PlanSync, B, []NodeID{"b"}, 20, 0, ""},
		{"negative length", "malformed reply is an error", recBlock,
			[]ReplicaReply{rep("a", B, 100, -1), rep("b", B, 100, 20)}, PlanSync, B, []NodeID{"b"}, 20, 0, ""},
		{"unknown reply kind", "malformed reply is an error", recBlock,
			[]ReplicaReply{{Node: "a", Kind: ReplyKind(9)}}, 0, 0, nil, 0, KindUnavailable, ReasonAllFailed},
		{"newer recovery owns a replica", "§4.1 step 1, §7.9: abort, no commit", recBlock,
			[]ReplicaReply{rep("a", B, 100, 100), replyOf("b", ReplyRecoveryInProgress)}, 0, 0, nil, 0, KindAborted, ReasonPreempted},
		{"preemption wins over failures", "§4.1 step 1", recBlock,
			[]ReplicaReply{replyOf("a", ReplyFailed), replyOf("b", ReplyRecoveryInProgress)}, 0, 0, nil, 0, KindAborted, ReasonPreempted},
		{"all RUR", "§4.1 step 3: none is RWR or better", recBlock,
			[]ReplicaReply{rep("a", U, 100, 10), rep("b", U, 100, 10)}, 0, 0, nil, 0, KindFailedPrecondition, ReasonNoRWROrBetter},
		{"temporary only", "§4.1 step 3", recBlock,
			[]ReplicaReply{rep("a", T, 100, 10)}, 0, 0, nil, 0, KindFailedPrecondition, ReasonNoRWROrBetter},
		{"RUR next to RBW", "§4.1 step 1: RUR never a source", recBlock,
			[]ReplicaReply{rep("a", U, 100, 500), rep("b", B, 100, 20)}, PlanSync, B, []NodeID{"b"}, 20, 0, ""},
		{"zero-length finalized next to RBW", "§4.1 step 1: length 0 is no candidate", recBlock,
			[]ReplicaReply{rep("a", F, 100, 0), rep("b", B, 100, 10)}, PlanSync, B, []NodeID{"b"}, 10, 0, ""},
		{"finalized next to zero-length RBW", "§4.1 step 1", recBlock,
			[]ReplicaReply{rep("a", F, 100, 10), rep("b", B, 100, 0)}, PlanSync, F, []NodeID{"a"}, 10, 0, ""},
		{"zero bytes everywhere", "§4.1 step 4, §7.2: delete", recBlock,
			[]ReplicaReply{rep("a", B, 100, 0), rep("b", B, 100, 0), rep("c", B, 100, 0)}, PlanDelete, 0, nil, 0, 0, ""},
		{"no replica anywhere", "§4.1 step 4", recBlock,
			[]ReplicaReply{replyOf("a", ReplyNoReplica), replyOf("b", ReplyNoReplica)}, PlanDelete, 0, nil, 0, 0, ""},
		{"no replica and zero length", "§4.1 step 4", recBlock,
			[]ReplicaReply{replyOf("a", ReplyNoReplica), rep("b", F, 100, 0)}, PlanDelete, 0, nil, 0, 0, ""},
		{"no data found but a node failed", "§4.1 step 4 every DN: do not delete", recBlock,
			[]ReplicaReply{replyOf("a", ReplyNoReplica), replyOf("b", ReplyFailed)}, 0, 0, nil, 0, KindUnavailable, ReasonIncompleteReplies},
		{"zero length and a stale replica", "§4.1 step 4: stale counts as failed", recBlock,
			[]ReplicaReply{rep("a", B, 100, 0), rep("b", F, 99, 100)}, 0, 0, nil, 0, KindUnavailable, ReasonIncompleteReplies},

		// Malformed input.
		{"recovery id not above GS", "§3.3 recovery id is a fresh GS", Block{ID: 7, GS: 100, Recovery: Recovery{ID: 100}},
			[]ReplicaReply{rep("a", B, 100, 1)}, 0, 0, nil, 0, KindInvalidArgument, ReasonBadRecoveryID},
		{"no locations", "§3.3 no command without locations", recBlock, nil, 0, 0, nil, 0, KindInvalidArgument, ReasonNoLocations},
		{"repeated node", "input", recBlock,
			[]ReplicaReply{rep("a", B, 100, 1), rep("a", B, 100, 2)}, 0, 0, nil, 0, KindInvalidArgument, ReasonBadNodes},
		{"empty node", "input", recBlock, []ReplicaReply{rep("", B, 100, 1)}, 0, 0, nil, 0, KindInvalidArgument, ReasonBadNodes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRecovery(tt.block, tt.replies)
			wantErr(t, err, tt.kind, tt.reason)
			if err != nil {
				return
			}
			if p.Action != tt.action || p.NewLength != tt.length || !slices.Equal(nodesOf(p.Participants), tt.nodes) {
				t.Fatalf("%s: %v length %d participants %v, want %v %d %v", tt.rule, p.Action, p.NewLength, nodesOf(p.Participants), tt.action, tt.length, tt.nodes)
			}
			if p.Action == PlanSync && p.BestState != tt.best {
				t.Fatalf("best state %v, want %v", p.BestState, tt.best)
			}
			if p.Reason == "" {
				t.Fatal("plan without a reason")
			}
		})
	}
}

func TestBuildCommit(t *testing.T) {
	sync := Plan{Action: PlanSync, NewLength: 100,
		Participants: []ReplicaReply{rep("a", ReplicaRBW, 100, 100), rep("b", ReplicaRBW, 100, 120), rep("c", ReplicaRBW, 100, 150)}}
	tests := []struct {
		name   string
		rule   string
		plan   Plan
		synced []NodeID
		want   CommitRequest
		kind   ErrorKind
		reason string
	}{
		{"delete", "§4.1 step 4, §4.3 no usable replica", Plan{Action: PlanDelete}, nil,
			CommitRequest{BlockID: 7, OldGS: 100, NewGS: 105, RecoveryID: 105, CloseFile: true, DeleteBlock: true}, 0, ""},
		{"all synced", "§4.1 step 9, §4.3 normal", sync, []NodeID{"c", "b", "a"},
			CommitRequest{BlockID: 7, OldGS: 100, NewGS: 105, RecoveryID: 105, NewLength: 100, CloseFile: true, Targets: []NodeID{"a", "b", "c"}}, 0, ""},
		{"failed participant left out", "§4.1 step 9", sync, []NodeID{"c", "a"},
			CommitRequest{BlockID: 7, OldGS: 100, NewGS: 105, RecoveryID: 105, NewLength: 100, CloseFile: true, Targets: []NodeID{"a", "c"}}, 0, ""},
		{"non-participant ignored, repeats once", "§4.1 step 7", sync, []NodeID{"b", "z", "b"},
			CommitRequest{BlockID: 7, OldGS: 100, NewGS: 105, RecoveryID: 105, NewLength: 100, CloseFile: true, Targets: []NodeID{"b"}}, 0, ""},
		{"nobody synced", "§4.1 step 8: no commit", sync, nil, CommitRequest{}, KindUnavailable, ReasonCannotRecover},
		{"no plan", "input", Plan{}, nil, CommitRequest{}, KindInvalidArgument, ReasonBadPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BuildCommit(recBlock, tt.plan, tt.synced)
			wantErr(t, err, tt.kind, tt.reason)
			if got.BlockID != tt.want.BlockID || got.OldGS != tt.want.OldGS || got.NewGS != tt.want.NewGS || got.RecoveryID != tt.want.RecoveryID ||
				got.NewLength != tt.want.NewLength || got.CloseFile != tt.want.CloseFile || got.DeleteBlock != tt.want.DeleteBlock ||
				!slices.Equal(got.Targets, tt.want.Targets) {
				t.Fatalf("%s: %+v, want %+v", tt.rule, got, tt.want)
			}
		})
	}
}

// A plan's commit passes CheckCommit on the state that started the recovery.
func TestPlanCommitRoundTrip(t *testing.T) {
	f := openFile(complete(1, 50, 10, 1), Block{ID: 7, GS: 100, NumBytes: 90, State: BlockUnderRecovery,
		Expected: []NodeID{"a", "b", "c"}, Recovery: Recovery{ID: 105, Primary: "a", Attempt: 1}})
	replies := []ReplicaReply{rep("a", ReplicaRBW, 100, 100), rep("b", ReplicaRBW, 100, 120), replyOf("c", ReplyFailed)}
	p, err := PlanRecovery(f.Blocks[1], replies)
	if err != nil {
		t.Fatal(err)
	}
	req, err := BuildCommit(f.Blocks[1], p, nodesOf(p.Participants))
	if err != nil {
		t.Fatal(err)
	}
	out, err := CheckCommit(&f, req)
	if err != nil {
		t.Fatal(err)
	}
	if !out.CloseFile || out.Block.State != BlockComplete || out.Block.GS != 105 || out.Block.NumBytes != 100 ||
		!slices.Equal(out.Block.Expected, []NodeID{"a", "b"}) || !slices.Equal(out.Dropped, []NodeID{"c"}) {
		t.Fatalf("outcome %+v", out)
	}
}

func TestPlanEnumNames(t *testing.T) {
	for _, s := range []interface{ String() string }{PlanSync, PlanDelete, ReplyReplica, ReplyNoReplica, ReplyFailed, ReplyRecoveryInProgress} {
		if s.String() == "" {
			t.Fatal("empty name")
		}
	}
	if PlanAction(9).String() != "PlanAction(9)" || ReplyKind(9).String() != "ReplyKind(9)" {
		t.Fatal("unknown names")
	}
}
