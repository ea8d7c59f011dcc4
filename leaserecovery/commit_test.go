package leaserecovery

import (
	"slices"
	"testing"
)

func TestCheckCommit(t *testing.T) {
	ur := Block{ID: 2, GS: 100, NumBytes: 90, State: BlockUnderRecovery, Expected: []NodeID{"a", "b", "c"},
		Recovery: Recovery{ID: 105, Primary: "a", Attempt: 1, Chosen: []NodeID{"a"}}}
	base := openFile(complete(1, 50, 10, 1), ur)
	ok := CommitRequest{BlockID: 2, OldGS: 100, NewGS: 105, RecoveryID: 105, NewLength: 100, CloseFile: true, Targets: []NodeID{"a", "b"}}
	del := CommitRequest{BlockID: 2, OldGS: 100, NewGS: 105, RecoveryID: 105, CloseFile: true, DeleteBlock: true}

	with := func(edit func(*CommitRequest)) CommitRequest {
		r := ok
		r.Targets = slices.Clone(ok.Targets)
		edit(&r)
		return r
	}
	file := func(edit func(*File)) *File {
		f := base
		f.Blocks = slices.Clone(base.Blocks)
		edit(&f)
		return &f
	}
	synced := func(state BlockState, gs uint64, n int64, open bool) *File {
		return file(func(f *File) {
			f.Blocks[1] = Block{ID: 2, GS: gs, NumBytes: n, State: state, Expected: []NodeID{"a", "b"}}
			f.UnderConstruction = open
		})
	}
	completed := Block{ID: 2, GS: 105, NumBytes: 100, State: BlockComplete, Expected: []NodeID{"a", "b"}}

	tests := []struct {
		name   string
		rule   string
		file   *File
		req    CommitRequest
		want   CommitOutcome
		kind   ErrorKind
		reason string
	}{
		{"close", "§4.2 steps 6-7, §9.5 always COMPLETE", &base, ok,
			CommitOutcome{CloseFile: true, Block: completed, Dropped: []NodeID{"c"}}, 0, ""},
		{"keep open", "§4.2 step 6 closeFile=false", &base, with(func(r *CommitRequest) { r.CloseFile = false }),
			CommitOutcome{Block: Block{ID: 2, GS: 105, NumBytes: 100, State: BlockUnderConstruction, Expected: []NodeID{"a", "b"}}, Dropped: []NodeID{"c"}}, 0, ""},
		{"target outside the pipeline", "§4.2 step 6: expected := targets", &base, with(func(r *CommitRequest) { r.Targets = []NodeID{"a", "d"} }),
			CommitOutcome{CloseFile: true, Block: Block{ID: 2, GS: 105, NumBytes: 100, State: BlockComplete, Expected: []NodeID{"a", "d"}}, Dropped: []NodeID{"b", "c"}}, 0, ""},
		{"recovery shrinks the block", "§4.2: length from the primary", &base, with(func(r *CommitRequest) { r.NewLength = 10 }),
			CommitOutcome{CloseFile: true, Block: Block{ID: 2, GS: 105, NumBytes: 10, State: BlockComplete, Expected: []NodeID{"a", "b"}}, Dropped: []NodeID{"c"}}, 0, ""},
		{"delete and close", "§4.2 step 6 deleteBlock, §7.2", &base, del, CommitOutcome{RemoveBlock: true, CloseFile: true}, 0, ""},
		{"delete, already gone", "§4.2 step 2, §7.12", file(func(f *File) { f.Blocks = f.Blocks[:1]; f.UnderConstruction = false }), del, CommitOutcome{Noop: true}, 0, ""},
		{"delete, file gone", "§4.2 step 2", nil, del, CommitOutcome{Noop: true}, 0, ""},
		{"retry after success", "§4.2 step 4, §7.11", synced(BlockComplete, 105, 100, false), ok, CommitOutcome{Noop: true}, 0, ""},
		{"retry after success, file reopened", "§4.2 step 4", synced(BlockComplete, 105, 100, true), ok, CommitOutcome{Noop: true}, 0, ""},
		{"retry of a keep-open commit", "§4.2 step 4", synced(BlockUnderConstruction, 105, 100, true), with(func(r *CommitRequest) { r.CloseFile = false }), CommitOutcome{Noop: true}, 0, ""},

		{"new GS is not the recovery id", "§4.3 newGS = R", &base, with(func(r *CommitRequest) { r.NewGS = 106 }), CommitOutcome{}, KindInvalidArgument, ReasonBadGS},
		{"new GS not above old", "invariant 3", &base, with(func(r *CommitRequest) { r.OldGS = 105 }), CommitOutcome{}, KindInvalidArgument, ReasonBadGS},
		{"negative length", "invariant 7", &base, with(func(r *CommitRequest) { r.NewLength = -1 }), CommitOutcome{}, KindInvalidArgument, ReasonBadLength},
		{"delete with a length", "§4.3", &base, func() CommitRequest { r := del; r.NewLength = 5; return r }(), CommitOutcome{}, KindInvalidArgument, ReasonBadLength},
		{"delete with targets", "§4.3", &base, func() CommitRequest { r := del; r.Targets = []NodeID{"a"}; return r }(), CommitOutcome{}, KindInvalidArgument, ReasonTargetsWithDelete},
		{"no targets", "§4.1 step 8: no success, no commit", &base, with(func(r *CommitRequest) { r.Targets = nil }), CommitOutcome{}, KindInvalidArgument, ReasonNoTargets},
		{"repeated target", "input", &base, with(func(r *CommitRequest) { r.Targets = []NodeID{"a", "a"} }), CommitOutcome{}, KindInvalidArgument, ReasonBadNodes},
		{"empty target", "input", &base, with(func(r *CommitRequest) { r.Targets = []NodeID{""} }), CommitOutcome{}, KindInvalidArgument, ReasonBadNodes},

		{"no such block", "§4.2 step 2", file(func(f *File) { f.Blocks = f.Blocks[:1] }), ok, CommitOutcome{}, KindNotFound, ReasonBlockNotFound},
		{"file deleted", "§4.2 step 3", nil, ok, CommitOutcome{}, KindNotFound, ReasonBlockNotFound},
		{"already synchronised, other length", "§4.2 step 4", synced(BlockComplete, 105, 99, false), ok, CommitOutcome{}, KindFailedPrecondition, ReasonLengthMismatch},
		{"delete for a block synchronised by this id", "§4.2 step 4", synced(BlockComplete, 105, 100, false), del, CommitOutcome{}, KindFailedPrecondition, ReasonLengthMismatch},
		{"file closed by another recovery", "§4.2 step 4", synced(BlockComplete, 106, 100, false), ok, CommitOutcome{}, KindFailedPrecondition, ReasonNotUnderConstruction},
		{"block under construction again", "§4.2 step 5", synced(BlockUnderConstruction, 101, 100, true), ok, CommitOutcome{}, KindFailedPrecondition, ReasonNotUnderRecovery},
		{"block committed", "§4.2", synced(BlockCommitted, 100, 100, true), ok, CommitOutcome{}, KindFailedPrecondition, ReasonNotUnderRecovery},
		{"under recovery in a closed file", "§9.4", file(func(f *File) { f.UnderConstruction = false }), ok, CommitOutcome{}, KindFailedPrecondition, ReasonNotUnderConstruction},
		{"not the last block", "§9.4", file(func(f *File) { f.Blocks = append(f.Blocks, underConstruction(3, 110, 0, "a")) }), ok, CommitOutcome{}, KindFailedPrecondition, ReasonNotLastBlock},
		{"preempted by a newer recovery", "§4.2 step 5, §7.9, §7.10, invariant 5", file(func(f *File) { f.Blocks[1].Recovery.ID = 106 }), ok, CommitOutcome{}, KindAborted, ReasonRecoveryIDMismatch},
		{"recovery id from the future", "§4.2 step 5", &base, with(func(r *CommitRequest) { r.NewGS, r.RecoveryID = 107, 107 }), CommitOutcome{}, KindAborted, ReasonRecoveryIDMismatch},
		{"old GS differs", "§4.2", &base, with(func(r *CommitRequest) { r.OldGS = 99 }), CommitOutcome{}, KindInvalidArgument, ReasonOldGSMismatch},
		{"close with a committed penultimate", "§5.4 close needs every block COMPLETE", file(func(f *File) { f.Blocks[0] = committed(1, 50, 10, 1) }), ok, CommitOutcome{}, KindUnavailable, ReasonPenultimateNotComplete},
		{"delete and close with a committed penultimate", "§5.4", file(func(f *File) { f.Blocks[0] = committed(1, 50, 10, 1) }), del, CommitOutcome{}, KindUnavailable, ReasonPenultimateNotComplete},
		{"keep open with a committed penultimate", "§4.2 step 7 not closing", file(func(f *File) { f.Blocks[0] = committed(1, 50, 10, 1) }), with(func(r *CommitRequest) { r.CloseFile = false }),
			CommitOutcome{Block: Block{ID: 2, GS: 105, NumBytes: 100, State: BlockUnderConstruction, Expected: []NodeID{"a", "b"}}, Dropped: []NodeID{"c"}}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckCommit(tt.file, tt.req)
			wantErr(t, err, tt.kind, tt.reason)
			if !sameOutcome(got, tt.want) {
				t.Fatalf("%s: %+v, want %+v", tt.rule, got, tt.want)
			}
		})
	}
}

func sameOutcome(a, b CommitOutcome) bool {
	return a.Noop == b.Noop && a.RemoveBlock == b.RemoveBlock && a.CloseFile == b.CloseFile &&
		sameBlock(a.Block, b.Block) && slices.Equal(a.Dropped, b.Dropped)
}

func sameBlock(a, b Block) bool {
	return a.ID == b.ID && a.GS == b.GS && a.NumBytes == b.NumBytes && a.State == b.State &&
		slices.Equal(a.Expected, b.Expected) && a.LiveReplicas == b.LiveReplicas &&
		a.Recovery.ID == b.Recovery.ID && a.Recovery.Primary == b.Recovery.Primary && a.Recovery.Attempt == b.Recovery.Attempt &&
		slices.Equal(a.Recovery.Chosen, b.Recovery.Chosen) && a.Recovery.Deadline.Equal(b.Recovery.Deadline)
}

// The outcome never aliases the request or the stored state.
func TestCheckCommitCopies(t *testing.T) {
	f := openFile(Block{ID: 2, GS: 100, State: BlockUnderRecovery, Expected: []NodeID{"a"}, Recovery: Recovery{ID: 105}})
	req := CommitRequest{BlockID: 2, OldGS: 100, NewGS: 105, RecoveryID: 105, NewLength: 1, CloseFile: true, Targets: []NodeID{"a"}}
	out, err := CheckCommit(&f, req)
	if err != nil {
		t.Fatal(err)
	}
	out.Block.Expected[0] = "x"
	if req.Targets[0] != "a" || f.Blocks[0].Expected[0] != "a" {
		t.Fatal("outcome aliases its inputs")
	}
}
