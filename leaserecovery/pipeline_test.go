package leaserecovery

import (
	"slices"
	"testing"
)

// pipeFile is an open file whose last block is being written at GS 20.
func pipeFile(edit func(*File)) *File {
	f := openFile(complete(1, 10, 100, 1), underConstruction(2, 20, 50, "a", "b", "c"))
	if edit != nil {
		edit(&f)
	}
	return &f
}

func TestCheckUpdateBlockForPipeline(t *testing.T) {
	tests := []struct {
		name   string
		rule   string
		file   *File
		block  uint64
		caller string
		kind   ErrorKind
		reason string
	}{
		{"writer asks for a new GS", "§5.3 step 6", pipeFile(nil), 2, "client-1", 0, ""},
		{"no such block", "§5.3 step 6", pipeFile(nil), 3, "client-1", KindNotFound, ReasonBlockNotFound},
		{"file deleted", "§5.3 step 6", nil, 2, "client-1", KindNotFound, ReasonBlockNotFound},
		{"file closed", "§5.3 step 6", pipeFile(func(f *File) { f.UnderConstruction = false }), 2, "client-1", KindFailedPrecondition, ReasonNotUnderConstruction},
		{"not the lease holder", "§5.3 step 6, §7.13 lease mismatch", pipeFile(nil), 2, "client-2", KindFailedPrecondition, ReasonLeaseMismatch},
		{"empty caller", "§5.3 step 6", pipeFile(nil), 2, "", KindFailedPrecondition, ReasonLeaseMismatch},
		{"not the last block", "§9.4", pipeFile(nil), 1, "client-1", KindFailedPrecondition, ReasonNotLastBlock},
		{"under recovery", "§5.3 step 6, §7.13 Unexpected BlockUCState", pipeFile(func(f *File) { f.Blocks[1].State = BlockUnderRecovery }), 2, "client-1", KindFailedPrecondition, ReasonUnexpectedState},
		{"committed", "§5.3 step 6", pipeFile(func(f *File) { f.Blocks[1].State = BlockCommitted }), 2, "client-1", KindFailedPrecondition, ReasonUnexpectedState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, CheckUpdateBlockForPipeline(tt.file, tt.block, tt.caller), tt.kind, tt.reason)
		})
	}
}

func TestCheckUpdatePipeline(t *testing.T) {
	ok := PipelineUpdate{Caller: "client-1", BlockID: 2, OldGS: 20, NewGS: 22, NewLength: 60, Nodes: []NodeID{"a", "c", "d"}}
	with := func(edit func(*PipelineUpdate)) PipelineUpdate {
		u := ok
		u.Nodes = slices.Clone(ok.Nodes)
		edit(&u)
		return u
	}
	tests := []struct {
		name   string
		rule   string
		file   *File
		u      PipelineUpdate
		kind   ErrorKind
		reason string
	}{
		{"pipeline recovered", "§5.3 step 8", pipeFile(nil), ok, 0, ""},
		{"same length", "§5.3 step 8 newLen ≥ stored", pipeFile(nil), with(func(u *PipelineUpdate) { u.NewLength = 50 }), 0, ""},
		{"new GS not above old", "§5.3 step 8 older state", pipeFile(nil), with(func(u *PipelineUpdate) { u.NewGS = 20 }), KindInvalidArgument, ReasonBadGS},
		{"negative length", "invariant 7", pipeFile(nil), with(func(u *PipelineUpdate) { u.NewLength = -1 }), KindInvalidArgument, ReasonBadLength},
		{"no nodes", "input", pipeFile(nil), with(func(u *PipelineUpdate) { u.Nodes = nil }), KindInvalidArgument, ReasonNoTargets},
		{"repeated node", "input", pipeFile(nil), with(func(u *PipelineUpdate) { u.Nodes = []NodeID{"a", "a"} }), KindInvalidArgument, ReasonBadNodes},
		{"GS never allocated", "§9.2", pipeFile(nil), with(func(u *PipelineUpdate) { u.NewGS = 31 }), KindInvalidArgument, ReasonGSNotAllocated},
		{"stale update", "§5.3 step 8, §9.4: the stored GS moved on", pipeFile(func(f *File) { f.Blocks[1].GS = 21 }), ok, KindFailedPrecondition, ReasonGSMismatch},
		{"length shrinks", "§5.3 step 8 newLen ≥ stored, invariant 4", pipeFile(nil), with(func(u *PipelineUpdate) { u.NewLength = 49 }), KindOutOfRange, ReasonLengthShrinks},
		{"not the lease holder", "§5.3 step 6", pipeFile(nil), with(func(u *PipelineUpdate) { u.Caller = "client-2" }), KindFailedPrecondition, ReasonLeaseMismatch},
		{"under recovery", "§7.13 the old writer is fenced", pipeFile(func(f *File) { f.Blocks[1].State = BlockUnderRecovery }), ok, KindFailedPrecondition, ReasonUnexpectedState},
		{"file closed", "§5.3 step 6", pipeFile(func(f *File) { f.UnderConstruction = false }), ok, KindFailedPrecondition, ReasonNotUnderConstruction},
		{"no such block", "§5.3 step 6", pipeFile(nil), with(func(u *PipelineUpdate) { u.BlockID = 9 }), KindNotFound, ReasonBlockNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckUpdatePipeline(tt.file, tt.u, 30)
			wantErr(t, err, tt.kind, tt.reason)
			if err != nil {
				return
			}
			if got.ID != 2 || got.GS != tt.u.NewGS || got.NumBytes != tt.u.NewLength || got.State != BlockUnderConstruction || !slices.Equal(got.Expected, tt.u.Nodes) {
				t.Fatalf("%s: %+v", tt.rule, got)
			}
			if &got.Expected[0] == &tt.u.Nodes[0] {
				t.Fatal("block aliases the request")
			}
		})
	}
}

func TestCheckCommitBlock(t *testing.T) {
	ok := BlockCommit{Caller: "client-1", BlockID: 2, GS: 20, NumBytes: 64}
	with := func(edit func(*BlockCommit)) BlockCommit { c := ok; edit(&c); return c }
	tests := []struct {
		name   string
		rule   string
		file   *File
		c      BlockCommit
		noop   bool
		kind   ErrorKind
		reason string
	}{
		{"commit", "§5.1, §5.4", pipeFile(nil), ok, false, 0, ""},
		{"commit at the acked length", "§5.4", pipeFile(nil), with(func(c *BlockCommit) { c.NumBytes = 50 }), false, 0, ""},
		{"negative length", "invariant 7", pipeFile(nil), with(func(c *BlockCommit) { c.NumBytes = -1 }), false, KindInvalidArgument, ReasonBadLength},
		{"no such block", "§5.4", pipeFile(nil), with(func(c *BlockCommit) { c.BlockID = 9 }), false, KindNotFound, ReasonBlockNotFound},
		{"file deleted", "§5.4", nil, ok, false, KindNotFound, ReasonBlockNotFound},
		{"retried complete on a closed file", "§5.4 HDFS-3031", pipeFile(func(f *File) { f.UnderConstruction = false; f.Blocks[1].State = BlockComplete }), ok, true, 0, ""},
		{"complete on a closed file, other GS", "§5.4 HDFS-3031", pipeFile(func(f *File) { f.UnderConstruction = false; f.Blocks[1].GS = 25 }), ok, false, KindFailedPrecondition, ReasonNotUnderConstruction},
		{"complete on a closed file, not its last block", "§5.4", pipeFile(func(f *File) { f.UnderConstruction = false }), with(func(c *BlockCommit) { c.BlockID, c.GS = 1, 10 }), false, KindFailedPrecondition, ReasonNotUnderConstruction},
		{"not the lease holder", "§3.5 lease check", pipeFile(nil), with(func(c *BlockCommit) { c.Caller = "client-2" }), false, KindFailedPrecondition, ReasonLeaseMismatch},
		{"not the last block", "§9.4", pipeFile(nil), with(func(c *BlockCommit) { c.BlockID, c.GS = 1, 10 }), false, KindFailedPrecondition, ReasonNotLastBlock},
		{"under recovery", "§3.5, §7.13 whereas it is under recovery", pipeFile(func(f *File) { f.Blocks[1].State = BlockUnderRecovery }), ok, false, KindFailedPrecondition, ReasonUnderRecovery},
		{"already committed, same", "§5.4 retried commit", pipeFile(func(f *File) { f.Blocks[1].State, f.Blocks[1].NumBytes = BlockCommitted, 64 }), ok, true, 0, ""},
		{"already complete, same", "§5.4 retried commit", pipeFile(func(f *File) { f.Blocks[1].State, f.Blocks[1].NumBytes = BlockComplete, 64 }), ok, true, 0, ""},
		{"already committed, other length", "§5.4", pipeFile(func(f *File) { f.Blocks[1].State = BlockCommitted }), ok, false, KindFailedPrecondition, ReasonAlreadyCommitted},
		{"mismatching GS", "§5.1 commit block with mismatching GS", pipeFile(nil), with(func(c *BlockCommit) { c.GS = 19 }), false, KindFailedPrecondition, ReasonGSMismatch},
		{"length below acked", "invariant 4", pipeFile(nil), with(func(c *BlockCommit) { c.NumBytes = 49 }), false, KindOutOfRange, ReasonLengthShrinks},
		{"unknown block state", "invariant", pipeFile(func(f *File) { f.Blocks[1].State = BlockStateUnspecified }), ok, false, KindInternal, ReasonUnknownBlockState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckCommitBlock(tt.file, tt.c)
			wantErr(t, err, tt.kind, tt.reason)
			if got.Noop != tt.noop {
				t.Fatalf("%s: noop %v, want %v", tt.rule, got.Noop, tt.noop)
			}
			if err == nil && !tt.noop && (got.Block.State != BlockCommitted || got.Block.NumBytes != tt.c.NumBytes || got.Block.GS != tt.c.GS) {
				t.Fatalf("%s: block %+v", tt.rule, got.Block)
			}
		})
	}
}

func TestCanComplete(t *testing.T) {
	tests := []struct {
		name      string
		rule      string
		state     BlockState
		finalized int
		min       int
		want      bool
	}{
		{"committed, replicated", "§5.4, §6.2 step 5", BlockCommitted, 1, 1, true},
		{"committed, none", "§5.4", BlockCommitted, 0, 1, false},
		{"committed, below min", "§5.4", BlockCommitted, 1, 2, false},
		{"committed, above min", "§5.4", BlockCommitted, 3, 2, true},
		{"min 0 counts as 1", "§5.4", BlockCommitted, 0, 0, false},
		{"under construction", "§0 only COMMITTED completes", BlockUnderConstruction, 3, 1, false},
		{"under recovery", "§0", BlockUnderRecovery, 3, 1, false},
		{"already complete", "§0", BlockComplete, 3, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CanComplete(Block{State: tt.state}, tt.finalized, tt.min); got != tt.want {
				t.Fatalf("%s: %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}

func TestCanClose(t *testing.T) {
	tests := []struct {
		name string
		rule string
		file File
		want bool
	}{
		{"every block complete", "§5.4", openFile(complete(1, 1, 1, 1), complete(2, 2, 1, 1)), true},
		{"no blocks", "§5.4", openFile(), true},
		{"last committed", "§5.4 num-committed-allowed 0", openFile(complete(1, 1, 1, 1), committed(2, 2, 1, 1)), false},
		{"penultimate committed", "§5.4", openFile(committed(1, 1, 1, 1), complete(2, 2, 1, 1)), false},
		{"last under construction", "§5.4", openFile(underConstruction(1, 1, 1, "a")), false},
		{"already closed", "§5.4", closedFile(complete(1, 1, 1, 1)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CanClose(tt.file); got != tt.want {
				t.Fatalf("%s: %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}
