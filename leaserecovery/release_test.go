package leaserecovery

import (
	"slices"
	"testing"
	"time"
)

func TestDecideRelease(t *testing.T) {
	later, earlier := t0.Add(time.Minute), t0.Add(-time.Minute)
	withMin := func(f File, n int) File { f.MinReplication = n; return f }
	bad := Block{ID: 9, GS: 1, State: BlockStateUnspecified}
	tests := []struct {
		name   string
		rule   string
		file   File
		want   ReleaseAction
		kind   ErrorKind
		reason string
	}{
		{"closed file", "§3.5 recoverLease on a closed file", closedFile(complete(1, 1, 10, 1)), ReleaseAlreadyClosed, 0, ""},
		{"no blocks", "§3.2 rule 1, §7.3 zero blocks", openFile(), ReleaseClose, 0, ""},
		{"all complete", "§3.2 rule 1, §7.3", openFile(complete(1, 1, 10, 1), complete(2, 2, 10, 1)), ReleaseClose, 0, ""},
		{"all complete, none replicated", "§3.2 rule 1 counts states only", openFile(complete(1, 1, 10, 0)), ReleaseClose, 0, ""},
		{"three incomplete blocks", "§3.2 rule 2",
			openFile(committed(1, 1, 10, 1), committed(2, 2, 10, 1), underConstruction(3, 3, 0, "a")), 0, KindInternal, ReasonBadBlockStates},
		{"penultimate under construction", "§3.2 rule 2: incomplete penultimate must be COMMITTED",
			openFile(underConstruction(1, 1, 10, "a"), underConstruction(2, 2, 0, "a")), 0, KindInternal, ReasonBadBlockStates},
		{"penultimate under recovery", "§3.2 rule 2",
			openFile(underRecovery(1, 1, 10, 5, later, "a"), committed(2, 2, 0, 1)), 0, KindInternal, ReasonBadBlockStates},
		{"last committed, replicated", "§3.2 rule 4 COMMITTED, §7.4", openFile(committed(1, 1, 10, 1)), ReleaseClose, 0, ""},
		{"last committed, no replica", "§3.2 rule 4 COMMITTED, §7.4: no recovery id",
			openFile(committed(1, 1, 10, 0)), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"last committed below min replication", "§3.2 rule 4 COMMITTED",
			withMin(openFile(committed(1, 1, 10, 1)), 2), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"last committed at min replication 2", "§3.2 rule 4 COMMITTED",
			withMin(openFile(committed(1, 1, 10, 2)), 2), ReleaseClose, 0, ""},
		{"min replication 0 counts as 1", "§3.2 rule 3",
			withMin(openFile(committed(1, 1, 10, 0)), 0), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"penultimate committed, not replicated", "§3.2 rule 3 penultimateOK",
			openFile(committed(1, 1, 10, 0), committed(2, 2, 10, 1)), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"penultimate complete, no live replica", "§3.2 rule 3: penultimate needs live replicas",
			openFile(complete(1, 1, 10, 0), committed(2, 2, 10, 1)), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"penultimate and last committed, replicated", "§3.2 rules 3-4",
			openFile(complete(1, 1, 10, 1), committed(2, 2, 10, 1), committed(3, 3, 10, 1)), ReleaseClose, 0, ""},
		{"last complete after committed penultimate", "§3.2 rule 4: completed out of order",
			openFile(committed(1, 1, 10, 1), complete(2, 2, 10, 1)), ReleaseClose, 0, ""},
		{"last complete, committed penultimate not replicated", "§3.2 rule 3",
			openFile(committed(1, 1, 10, 0), complete(2, 2, 10, 1)), 0, KindUnavailable, ReasonCommittedNotReplicated},
		{"no locations, no data", "§3.2 rule 4b, §7.1",
			openFile(complete(1, 1, 10, 1), underConstruction(2, 2, 0)), ReleaseRemoveLastBlock, 0, ""},
		{"under recovery, no locations, no data", "§3.2 rule 4b",
			openFile(underRecovery(2, 2, 0, 5, later)), ReleaseRemoveLastBlock, 0, ""},
		{"pipeline set up, zero bytes", "§3.2 rule 4b needs both, §7.2",
			openFile(underConstruction(1, 1, 0, "a", "b", "c")), ReleaseStartRecovery, 0, ""},
		{"no expected, but reported replica", "§3.2 rule 4a: locations from the blocks map",
			openFile(Block{ID: 1, GS: 1, State: BlockUnderConstruction, LiveReplicas: 1}), ReleaseStartRecovery, 0, ""},
		{"no expected, length recorded", "§3.2 rule 4b needs length 0",
			openFile(underConstruction(1, 1, 512)), ReleaseStartRecovery, 0, ""},
		{"under construction with data", "§3.2 rule 4c",
			openFile(complete(1, 1, 10, 1), underConstruction(2, 2, 100, "a", "b")), ReleaseStartRecovery, 0, ""},
		{"penultimate committed unreplicated, last under construction", "§3.2: penultimateOK only gates COMMITTED",
			openFile(committed(1, 1, 10, 0), underConstruction(2, 2, 100, "a")), ReleaseStartRecovery, 0, ""},
		{"attempt running", "§3.2 rule 4c, §7.14: no new id",
			openFile(underRecovery(1, 1, 100, 5, later, "a")), ReleaseInProgress, 0, ""},
		{"attempt deadline now", "§3.2 rule 4c: timed out at the deadline",
			openFile(underRecovery(1, 1, 100, 5, t0, "a")), ReleaseStartRecovery, 0, ""},
		{"attempt timed out", "§3.2 rule 4c, §7.10",
			openFile(underRecovery(1, 1, 100, 5, earlier, "a")), ReleaseStartRecovery, 0, ""},
		{"under recovery without deadline", "§3.2 rule 4c: no attempt in flight",
			openFile(underRecovery(1, 1, 100, 5, time.Time{}, "a")), ReleaseStartRecovery, 0, ""},
		{"last block in unknown state", "invariant", openFile(bad), 0, KindInternal, ReasonUnknownBlockState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecideRelease(tt.file, t0)
			wantErr(t, err, tt.kind, tt.reason)
			if d.Action != tt.want {
				t.Fatalf("%s: action %v, want %v (%s)", tt.rule, d.Action, tt.want, d.Reason)
			}
			if err == nil && d.Reason == "" {
				t.Fatal("decision without a reason")
			}
		})
	}
}

func TestReleaseDecisionCloses(t *testing.T) {
	want := map[ReleaseAction]bool{
		ReleaseAlreadyClosed: true, ReleaseClose: true, ReleaseRemoveLastBlock: true,
		ReleaseStartRecovery: false, ReleaseInProgress: false, releaseUnspecified: false,
	}
	for a, w := range want {
		if got := (ReleaseDecision{Action: a}).Closes(); got != w {
			t.Errorf("%v.Closes() = %v, want %v", a, got, w)
		}
		if a != releaseUnspecified && a.String() == "" {
			t.Errorf("%d has no name", a)
		}
	}
	if ReleaseAction(42).String() != "ReleaseAction(42)" {
		t.Error("unknown action name")
	}
}

func TestBeginRecovery(t *testing.T) {
	deadline := t0.Add(90 * time.Second)
	choice := PrimaryChoice{Node: "b", Chosen: []NodeID{"a", "b"}}
	tests := []struct {
		name        string
		rule        string
		block       Block
		id          uint64
		choice      PrimaryChoice
		wantAttempt int
		kind        ErrorKind
		reason      string
	}{
		{"first attempt", "§3.3, §9.1", underConstruction(1, 10, 100, "a", "b"), 11, choice, 1, 0, ""},
		{"next attempt", "§3.2 rule 4c, §7.10: a new id", underRecovery(1, 10, 100, 11, t0, "a", "b"), 12, choice, 2, 0, ""},
		{"no alive primary", "§3.3, §7.17: no command", underConstruction(1, 10, 100, "a"), 11, PrimaryChoice{}, 1, 0, ""},
		{"id equal to GS", "invariant 3", underConstruction(1, 10, 100, "a"), 10, choice, 0, KindInvalidArgument, ReasonBadRecoveryID},
		{"id below GS", "invariant 3", underConstruction(1, 10, 100, "a"), 9, choice, 0, KindInvalidArgument, ReasonBadRecoveryID},
		{"id equal to current", "§2.12 step 5: newer preempts", underRecovery(1, 10, 100, 12, t0, "a"), 12, choice, 0, KindInvalidArgument, ReasonBadRecoveryID},
		{"id below current", "§9.3", underRecovery(1, 10, 100, 12, t0, "a"), 11, choice, 0, KindInvalidArgument, ReasonBadRecoveryID},
		{"committed block", "§3.2: no recovery for a committed block", committed(1, 10, 100, 0), 11, choice, 0, KindFailedPrecondition, ReasonUnexpectedState},
		{"complete block", "§0", complete(1, 10, 100, 1), 11, choice, 0, KindFailedPrecondition, ReasonUnexpectedState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.block
			inExpected := slices.Clone(in.Expected)
			got, err := BeginRecovery(in, tt.id, tt.choice, deadline)
			wantErr(t, err, tt.kind, tt.reason)
			if err != nil {
				return
			}
			want := Recovery{ID: tt.id, Primary: tt.choice.Node, Attempt: tt.wantAttempt, Chosen: tt.choice.Chosen, Deadline: deadline}
			if got.State != BlockUnderRecovery || got.Recovery.ID != want.ID || got.Recovery.Primary != want.Primary ||
				got.Recovery.Attempt != want.Attempt || !slices.Equal(got.Recovery.Chosen, want.Chosen) || !got.Recovery.Deadline.Equal(deadline) {
				t.Fatalf("%s: got %+v, want recovery %+v", tt.rule, got, want)
			}
			if got.GS != in.GS || got.NumBytes != in.NumBytes || !slices.Equal(got.Expected, inExpected) {
				t.Fatalf("GS, length or expected changed: %+v", got)
			}
			if len(got.Expected) > 0 && &got.Expected[0] == &in.Expected[0] {
				t.Fatal("expected locations alias the input")
			}
		})
	}
}
