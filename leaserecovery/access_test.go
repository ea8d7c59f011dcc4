package leaserecovery

import (
	"strings"
	"testing"
	"time"
)

func TestCheckWriteAccess(t *testing.T) {
	cfg := DefaultConfig()
	open := openFile(complete(1, 1, 10, 1), underConstruction(2, 2, 100, "a"))
	recovering := openFile(underRecovery(1, 1, 100, 5, t0, "a"))
	noHolder := open
	noHolder.LeaseHolder = ""
	fresh, soft, hard := t0.Add(-secs(10)), t0.Add(-secs(61)), t0.Add(-secs(1201))
	atSoft := t0.Add(-secs(60))
	tests := []struct {
		name    string
		rule    string
		file    File
		op      WriteOp
		caller  string
		renewed time.Time
		want    Access
		kind    ErrorKind
		reason  string
	}{
		{"append to closed file", "§3.5 not under construction", closedFile(complete(1, 1, 10, 1)), OpAppend, "c2", fresh, Access{Proceed: true}, 0, ""},
		{"recoverLease on closed file", "§3.5, §7.14: true", closedFile(), OpRecoverLease, "c2", fresh, Access{Proceed: true}, 0, ""},
		{"recoverLease by another client", "§3.5 forced", open, OpRecoverLease, "c2", fresh, Access{Release: true, NewHolder: "c2"}, 0, ""},
		{"recoverLease by the holder", "§3.5 forced ignores the holder", open, OpRecoverLease, "client-1", fresh, Access{Release: true, NewHolder: "client-1"}, 0, ""},
		{"recoverLease while recovering", "§3.5, §7.14: DecideRelease decides", recovering, OpRecoverLease, "c2", fresh, Access{Release: true, NewHolder: "c2"}, 0, ""},
		{"create by the holder", "§3.5 already the current lease holder", open, OpCreate, "client-1", soft, Access{}, KindFailedPrecondition, ReasonAlreadyLeaseHolder},
		{"append by the holder", "§3.5", open, OpAppend, "client-1", fresh, Access{}, KindFailedPrecondition, ReasonAlreadyLeaseHolder},
		{"append before soft limit", "§3.5, §7.15 currently owned", open, OpAppend, "c2", fresh, Access{}, KindFailedPrecondition, ReasonLeaseHeld},
		{"create at soft limit", "§3.1 expiry is strictly after", open, OpCreate, "c2", atSoft, Access{}, KindFailedPrecondition, ReasonLeaseHeld},
		{"truncate before soft limit", "§3.5", open, OpTruncate, "c2", fresh, Access{}, KindFailedPrecondition, ReasonLeaseHeld},
		{"append before soft limit, under recovery", "§3.5 RecoveryInProgress", recovering, OpAppend, "c2", fresh, Access{}, KindUnavailable, ReasonRecoveryInProgress},
		{"create after soft limit", "§3.5, §7.15: release, holder kept", open, OpCreate, "c2", soft, Access{Release: true}, 0, ""},
		{"append after hard limit", "§3.1 hard implies soft", open, OpAppend, "c2", hard, Access{Release: true}, 0, ""},
		{"append after soft limit, under recovery", "§3.5: DecideRelease decides", recovering, OpAppend, "c2", soft, Access{Release: true}, 0, ""},
		{"open file without blocks", "§3.5", openFile(), OpAppend, "c2", fresh, Access{}, KindFailedPrecondition, ReasonLeaseHeld},
		{"open file without holder", "§3.5 no leases found", noHolder, OpRecoverLease, "c2", fresh, Access{}, KindInternal, ReasonNoLeaseHolder},
		{"unknown op", "input", open, WriteOp(0), "c2", fresh, Access{}, KindInvalidArgument, ReasonBadOp},
		{"op out of range", "input", open, WriteOp(9), "c2", fresh, Access{}, KindInvalidArgument, ReasonBadOp},
		{"empty caller", "input", open, OpAppend, "", fresh, Access{}, KindInvalidArgument, ReasonBadCaller},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckWriteAccess(tt.file, AccessRequest{Op: tt.op, Caller: tt.caller, Now: t0, LeaseRenewed: tt.renewed}, cfg)
			wantErr(t, err, tt.kind, tt.reason)
			if got != tt.want {
				t.Fatalf("%s: %+v, want %+v", tt.rule, got, tt.want)
			}
		})
	}
}

// TestLeaseHeldSaysHowLong: the refusal names the holder, how long ago it
// renewed and when the lease frees itself, so the caller can tell a live
// writer from one that died.
func TestLeaseHeldSaysHowLong(t *testing.T) {
	cfg := DefaultConfig()
	open := openFile(underConstruction(1, 1, 100, "a"))
	_, err := CheckWriteAccess(open, AccessRequest{Op: OpCreate, Caller: "c2", Now: t0, LeaseRenewed: t0.Add(-secs(42))}, cfg)
	wantErr(t, err, KindFailedPrecondition, ReasonLeaseHeld)
	for _, want := range []string{open.LeaseHolder, "renewed 42s ago", "not renewed for " + cfg.SoftLimit.String(), "recoverLease"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestAnswerRelease(t *testing.T) {
	tests := []struct {
		name   string
		rule   string
		op     WriteOp
		action ReleaseAction
		closed bool
		kind   ErrorKind
		reason string
	}{
		{"recoverLease, closed now", "§3.5 true when closed synchronously", OpRecoverLease, ReleaseClose, true, 0, ""},
		{"recoverLease, empty block removed", "§3.5 case 4b", OpRecoverLease, ReleaseRemoveLastBlock, true, 0, ""},
		{"recoverLease, already closed", "§3.5", OpRecoverLease, ReleaseAlreadyClosed, true, 0, ""},
		{"recoverLease, recovery started", "§3.5 false, caller holds the lease", OpRecoverLease, ReleaseStartRecovery, false, 0, ""},
		{"recoverLease, in progress", "§7.14 false, no new id", OpRecoverLease, ReleaseInProgress, false, 0, ""},
		{"create, closed now", "§3.5 proceed", OpCreate, ReleaseClose, true, 0, ""},
		{"append, recovery started", "§3.5 RecoveryInProgress, §7.15", OpAppend, ReleaseStartRecovery, false, KindUnavailable, ReasonRecoveryInProgress},
		{"truncate, in progress", "§3.5", OpTruncate, ReleaseInProgress, false, KindUnavailable, ReasonRecoveryInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed, err := AnswerRelease(tt.op, ReleaseDecision{Action: tt.action})
			wantErr(t, err, tt.kind, tt.reason)
			if closed != tt.closed {
				t.Fatalf("%s: closed %v, want %v", tt.rule, closed, tt.closed)
			}
		})
	}
	for op := OpCreate; op <= OpRecoverLease; op++ {
		if op.String() == "" || WriteOp(99).String() != "WriteOp(99)" {
			t.Fatal("op names")
		}
	}
}
