package leaserecovery

import (
	"fmt"
	"time"
)

// WriteOp is an operation that needs a file's lease (§R3.5).
type WriteOp uint8

const (
	writeOpUnspecified WriteOp = iota
	OpCreate                   // create with overwrite of an existing file
	OpAppend
	OpTruncate
	OpRecoverLease // the forced variant: take the lease over now
)

func (o WriteOp) String() string {
	switch o {
	case OpCreate:
		return "create"
	case OpAppend:
		return "append"
	case OpTruncate:
		return "truncate"
	case OpRecoverLease:
		return "recover-lease"
	}
	return fmt.Sprintf("WriteOp(%d)", uint8(o))
}

// AccessRequest is a client's attempt to write a file that may be open.
type AccessRequest struct {
	Op     WriteOp
	Caller string // client name
	Now    time.Time
	// LeaseRenewed is when the holder last renewed its lease (leader-local
	// soft state, §R9.6: a new leader treats every lease as just renewed).
	LeaseRenewed time.Time
}

// Access is the verdict of CheckWriteAccess.
type Access struct {
	// Proceed: the file is not under construction; the operation goes
	// ahead (recoverLease answers true).
	Proceed bool
	// Release: release the holder's lease first: run DecideRelease, apply
	// its decision with NewHolder, then answer with AnswerRelease.
	Release bool
	// NewHolder takes the lease if the release leaves the file open: the
	// caller of recoverLease; "" keeps the current holder and renews it
	// (§R3.2 rule 4d).
	NewHolder string
}

// CheckWriteAccess decides whether req may write f, HDFS
// recoverLeaseInternal (§R3.5, §R7.14, §R7.15). It runs on the leader: lease
// renewal times are leader soft state. Rules, in order:
//   - file not under construction → Proceed;
//   - no lease holder on an open file → KindInternal ReasonNoLeaseHolder;
//   - recoverLease (forced) → Release with NewHolder = caller, whoever holds
//     the lease;
//   - caller already holds the lease → KindFailedPrecondition
//     ReasonAlreadyLeaseHolder;
//   - holder's lease past the soft limit → Release, holder kept;
//   - else last block UNDER_RECOVERY → KindUnavailable
//     ReasonRecoveryInProgress;
//   - else → KindFailedPrecondition ReasonLeaseHeld ("currently owned by").
func CheckWriteAccess(f File, req AccessRequest, cfg Config) (Access, error) {
	if req.Op == writeOpUnspecified || req.Op > OpRecoverLease {
		return Access{}, newErr(KindInvalidArgument, ReasonBadOp, "unknown write operation %v", req.Op)
	}
	if req.Caller == "" {
		return Access{}, newErr(KindInvalidArgument, ReasonBadCaller, "%v %s: empty client name", req.Op, f.Path)
	}
	if !f.UnderConstruction {
		return Access{Proceed: true}, nil
	}
	if f.LeaseHolder == "" {
		return Access{}, newErr(KindInternal, ReasonNoLeaseHolder, "%s is under construction but has no lease holder", f.Path)
	}
	if req.Op == OpRecoverLease {
		return Access{Release: true, NewHolder: req.Caller}, nil
	}
	if req.Caller == f.LeaseHolder {
		return Access{}, newErr(KindFailedPrecondition, ReasonAlreadyLeaseHolder,
			"%v %s: %s is already the current lease holder", req.Op, f.Path, req.Caller)
	}
	if cfg.SoftExpired(req.LeaseRenewed, req.Now) {
		return Access{Release: true}, nil
	}
	if n := len(f.Blocks); n > 0 && f.Blocks[n-1].State == BlockUnderRecovery {
		return Access{}, newErr(KindUnavailable, ReasonRecoveryInProgress,
			"%v %s: another recovery is in progress by %s, try again later", req.Op, f.Path, f.LeaseHolder)
	}
	age := req.Now.Sub(req.LeaseRenewed).Round(time.Second)
	return Access{}, newErr(KindFailedPrecondition, ReasonLeaseHeld,
		"%v %s: the lease is currently owned by %s, renewed %s ago; it is free once not renewed for %s, or at once by recoverLease",
		req.Op, f.Path, f.LeaseHolder, age, cfg.SoftLimit)
}

// AnswerRelease is the answer to op once the release decision d is applied
// (§R3.5): a closed file lets every op proceed (closed is true); an open one
// makes recoverLease answer false and create/append/truncate fail with
// KindUnavailable ReasonRecoveryInProgress ("try again later").
func AnswerRelease(op WriteOp, d ReleaseDecision) (closed bool, err error) {
	if d.Closes() {
		return true, nil
	}
	if op == OpRecoverLease {
		return false, nil
	}
	return false, newErr(KindUnavailable, ReasonRecoveryInProgress, "%v: lease recovery is in progress, try again later", op)
}
