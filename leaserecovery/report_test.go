package leaserecovery

import "testing"

func TestReconcileReplica(t *testing.T) {
	const F, B, W, U, T = ReplicaFinalized, ReplicaRBW, ReplicaRWR, ReplicaRUR, ReplicaTemporary
	var (
		cmp = &Block{ID: 1, GS: 10, NumBytes: 100, State: BlockComplete}
		com = &Block{ID: 1, GS: 10, NumBytes: 100, State: BlockCommitted}
		uc  = &Block{ID: 1, GS: 10, NumBytes: 50, State: BlockUnderConstruction}
		ur  = &Block{ID: 1, GS: 10, NumBytes: 50, State: BlockUnderRecovery, Recovery: Recovery{ID: 12}}
		unk = &Block{ID: 1, GS: 10, NumBytes: 50}
	)
	ctx := ReportContext{MaxGS: 20}
	known := ReportContext{MaxGS: 20, Location: true}
	knownCorrupt := ReportContext{MaxGS: 20, Location: true, Corrupt: true}
	postpone := ReportContext{MaxGS: 20, Postpone: true}
	pending := ReportContext{MaxGS: 20, PendingInvalidation: true}
	r := func(s ReplicaState, gs uint64, n int64) ReportedReplica {
		return ReportedReplica{Node: "a", ID: 1, GS: gs, NumBytes: n, State: s}
	}
	tests := []struct {
		name     string
		rule     string
		stored   *Block
		rep      ReportedReplica
		ctx      ReportContext
		want     ReportAction
		reason   string
		complete bool
	}{
		// Steps 1-3 of §R6.2.
		{"GS from the future", "§7.32 queue, HDFS-6289", cmp, r(F, 21, 100), ctx, ReportQueue, ReportReasonFutureGS, false},
		{"new block not applied yet", "§7.32: queue before the lookup", nil, r(B, 21, 0), ctx, ReportQueue, ReportReasonFutureGS, false},
		{"future check disabled", "MaxGS 0", cmp, r(F, 21, 100), ReportContext{}, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"unknown block", "§6.2 step 1, §7.29", nil, r(F, 5, 100), ctx, ReportInvalidate, ReportReasonUnknownBlock, false},
		{"negative length", "invariant 7", cmp, r(F, 10, -1), ctx, ReportIgnore, ReportReasonMalformed, false},
		{"stored block of another id", "caller error", &Block{ID: 2, GS: 10, State: BlockComplete}, r(F, 10, 100), ctx, ReportIgnore, ReportReasonIDMismatch, false},
		{"pending invalidation", "§6.2 step 2", cmp, r(F, 9, 100), pending, ReportIgnore, ReportReasonPendingDelete, false},
		{"corrupt while catching up", "§6.2 step 3 standby queue, §9.7", cmp, r(F, 9, 100), postpone, ReportQueue, ReportReasonGSMismatch, false},
		{"valid while catching up", "§6.2 step 3 only corrupt reports wait", cmp, r(F, 10, 100), postpone, ReportAddLocation, ReportReasonNewLocation, false},
		{"unknown stored state", "invariant", unk, r(F, 10, 50), ctx, ReportIgnore, ReportReasonUnknownBlkState, false},

		// FINALIZED row.
		{"FINALIZED vs COMPLETE, match", "§6.2 step 5", cmp, r(F, 10, 100), ctx, ReportAddLocation, ReportReasonNewLocation, false},
		{"FINALIZED vs COMPLETE, known", "§6.2 step 5 not yet a location", cmp, r(F, 10, 100), known, ReportIgnore, ReportReasonKnownLocation, false},
		{"FINALIZED vs COMPLETE, was corrupt", "§6.2 step 5 previously corrupt", cmp, r(F, 10, 100), knownCorrupt, ReportAddLocation, ReportReasonNewLocation, false},
		{"FINALIZED vs COMPLETE, older GS", "§6.2 table", cmp, r(F, 9, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"FINALIZED vs COMPLETE, newer GS", "§6.2 table GS ≠", cmp, r(F, 11, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"FINALIZED vs COMPLETE, other length", "§6.2 table, §7.30", cmp, r(F, 10, 99), ctx, ReportMarkCorrupt, ReportReasonLengthMismatch, false},
		{"FINALIZED vs COMMITTED, match", "§6.2 step 5: then CanComplete", com, r(F, 10, 100), ctx, ReportAddLocation, ReportReasonNewLocation, true},
		{"FINALIZED vs COMMITTED, known", "§6.2 step 5", com, r(F, 10, 100), known, ReportIgnore, ReportReasonKnownLocation, false},
		{"FINALIZED vs COMMITTED, other GS", "§6.2 table", com, r(F, 11, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"FINALIZED vs COMMITTED, other length", "§6.2 table", com, r(F, 10, 101), ctx, ReportMarkCorrupt, ReportReasonLengthMismatch, false},
		{"FINALIZED vs UC, same GS", "§6.2 step 4, §7.28", uc, r(F, 10, 70), ctx, ReportAddLocationAndExpected, ReportReasonUnderConstr, false},
		{"FINALIZED vs UC, newer GS", "§6.2 table, §7.28 GS ≥", uc, r(F, 11, 70), ctx, ReportAddLocationAndExpected, ReportReasonUnderConstr, false},
		{"FINALIZED vs UC, known", "§6.2 step 4 update the UC entry", uc, r(F, 10, 70), known, ReportAddExpected, ReportReasonUnderConstr, false},
		{"FINALIZED vs UC, older GS", "§6.2 table, §7.28", uc, r(F, 9, 70), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},
		{"FINALIZED vs UR", "§6.2 table OK", ur, r(F, 10, 70), ctx, ReportAddLocationAndExpected, ReportReasonUnderConstr, false},
		{"FINALIZED vs UR, older GS", "§6.2 table: never corrupt", ur, r(F, 9, 70), ctx, ReportAddLocationAndExpected, ReportReasonUnderConstr, false},
		{"FINALIZED vs UR, at the recovery id", "§6.2 table", ur, r(F, 12, 70), ctx, ReportAddLocationAndExpected, ReportReasonUnderConstr, false},

		// RBW row.
		{"RBW vs COMPLETE, same GS", "§6.2 table ignore, HDFS-2791", cmp, r(B, 10, 100), ctx, ReportIgnore, ReportReasonLateRBW, false},
		{"RBW vs COMPLETE, older GS", "§6.2 table, §7.19", cmp, r(B, 9, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"RBW vs COMPLETE, newer GS", "§6.2 table GS ≠", cmp, r(B, 11, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"RBW vs COMMITTED", "§6.2 step 4", com, r(B, 10, 100), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RBW vs COMMITTED, older GS", "§6.2 table", com, r(B, 9, 100), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},
		{"RBW vs UC", "§6.2 step 4", uc, r(B, 10, 40), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RBW vs UC, ahead of the coordinator", "§5.3 ordering: DN before NN", uc, r(B, 11, 60), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RBW vs UC, older GS", "§6.2 table, §7.19", uc, r(B, 9, 40), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},
		{"RBW vs UR", "§6.2 step 4", ur, r(B, 10, 40), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RBW vs UR, older GS", "§6.2 table", ur, r(B, 9, 40), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},

		// RWR row.
		{"RWR vs COMPLETE, same GS", "§6.2 table invalid state", cmp, r(W, 10, 100), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
		{"RWR vs COMPLETE, other GS", "§6.2 table", cmp, r(W, 9, 100), ctx, ReportMarkCorrupt, ReportReasonGSMismatch, false},
		{"RWR vs COMMITTED", "§6.2 step 4", com, r(W, 10, 100), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RWR vs COMMITTED, older GS", "§6.2 table", com, r(W, 9, 100), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},
		{"RWR vs UC", "§6.2 step 4", uc, r(W, 10, 40), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RWR vs UC, older GS", "§6.2 table", uc, r(W, 9, 40), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},
		{"RWR vs UR", "§6.2 step 4", ur, r(W, 11, 40), ctx, ReportAddExpected, ReportReasonUnderConstr, false},
		{"RWR vs UR, older GS", "§6.2 table", ur, r(W, 9, 40), ctx, ReportMarkCorrupt, ReportReasonStaleGS, false},

		// RUR / TEMPORARY row: never reported, so always corrupt.
		{"RUR vs COMPLETE", "§6.2 table always corrupt", cmp, r(U, 10, 100), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
		{"RUR vs UR", "§6.2 table, §6.1 RUR reported as original", ur, r(U, 10, 40), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
		{"TEMPORARY vs UC", "§6.2 table, §6.1 never reported", uc, r(T, 10, 40), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
		{"TEMPORARY vs COMMITTED", "§6.2 table", com, r(T, 10, 100), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
		{"unknown replica state", "§6.2 table", cmp, r(ReplicaState(7), 10, 100), ctx, ReportMarkCorrupt, ReportReasonInvalidState, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReconcileReplica(tt.stored, tt.rep, tt.ctx)
			if got.Action != tt.want || got.Reason != tt.reason || got.CheckComplete != tt.complete {
				t.Fatalf("%s: %+v, want %v %q complete=%v", tt.rule, got, tt.want, tt.reason, tt.complete)
			}
		})
	}
}

func TestReportActionNames(t *testing.T) {
	for a := ReportAddLocation; a <= ReportQueue; a++ {
		if s := a.String(); s == "" || s[0] == 'R' {
			t.Errorf("action %d has no name", a)
		}
	}
	if ReportAction(99).String() != "ReportAction(99)" {
		t.Error("unknown action name")
	}
}
