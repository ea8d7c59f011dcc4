package leaserecovery

import (
	"errors"
	"fmt"
)

// ErrorKind classifies every error this package returns. Each kind maps to
// exactly one gRPC code (the server translates at the edge; this package
// never imports gRPC):
//
//	KindInvalidArgument    codes.InvalidArgument    malformed request; nothing changed
//	KindNotFound           codes.NotFound           no such file or block
//	KindFailedPrecondition codes.FailedPrecondition state does not allow it; do not retry blindly
//	KindAborted            codes.Aborted            fenced: a newer recovery owns the block
//	KindOutOfRange         codes.OutOfRange         a length moves the wrong way
//	KindUnavailable        codes.Unavailable        try again later (recovery running, replicas not reported)
//	KindInternal           codes.Internal           a metadata invariant is broken
//
// The Reason of an *Error (a stable kebab-case word, the Reason* constants)
// tells cases of one kind apart, e.g. in a google.rpc.ErrorInfo. HDFS's
// exceptions map to (kind, reason) pairs: AlreadyBeingCreatedException is
// ReasonAlreadyLeaseHolder, ReasonLeaseHeld or ReasonCommittedNotReplicated;
// RecoveryInProgressException is ReasonRecoveryInProgress (client side) or
// ReasonPreempted (primary side).
type ErrorKind uint8

const (
	// KindUnknown is never returned; KindOf reports it for foreign errors.
	KindUnknown ErrorKind = iota
	KindInvalidArgument
	KindNotFound
	KindFailedPrecondition
	KindAborted
	KindOutOfRange
	KindUnavailable
	KindInternal
)

var kindNames = [...]string{
	KindUnknown:            "unknown",
	KindInvalidArgument:    "invalid argument",
	KindNotFound:           "not found",
	KindFailedPrecondition: "failed precondition",
	KindAborted:            "aborted",
	KindOutOfRange:         "out of range",
	KindUnavailable:        "unavailable",
	KindInternal:           "internal",
}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error makes a kind usable as a sentinel: errors.Is(err, KindAborted).
func (k ErrorKind) Error() string { return "leaserecovery: " + k.String() }

// Sentinels, one per kind, for errors.Is.
var (
	ErrInvalidArgument    error = KindInvalidArgument
	ErrNotFound           error = KindNotFound
	ErrFailedPrecondition error = KindFailedPrecondition
	ErrAborted            error = KindAborted
	ErrOutOfRange         error = KindOutOfRange
	ErrUnavailable        error = KindUnavailable
	ErrInternal           error = KindInternal
)

// Reasons. Each names one rule; the comment gives its kind and its section
// of docs/design.md.
const (
	// Malformed input to any rule.
	ReasonBadConfig = "bad-config" // InvalidArgument: Config.Validate
	ReasonBadOp     = "bad-op"     // InvalidArgument: unknown WriteOp
	ReasonBadCaller = "bad-caller" // InvalidArgument: empty client name
	ReasonBadPlan   = "bad-plan"   // InvalidArgument: BuildCommit without a plan

	// Lease release and competing writers (§R3.2, §R3.5).
	ReasonBadBlockStates         = "bad-block-states"         // Internal, §R3.2 rule 2
	ReasonCommittedNotReplicated = "committed-not-replicated" // Unavailable, §R3.2 rule 4 COMMITTED
	ReasonAlreadyLeaseHolder     = "already-lease-holder"     // FailedPrecondition, §R3.5
	ReasonLeaseHeld              = "lease-held"               // FailedPrecondition, §R3.5 soft limit not expired
	ReasonRecoveryInProgress     = "recovery-in-progress"     // Unavailable, §R3.5
	ReasonNoLeaseHolder          = "no-lease-holder"          // Internal, §R3.5 "under construction but no leases found"

	// Starting an attempt (§R3.3, §R9.1).
	ReasonBadRecoveryID = "bad-recovery-id" // InvalidArgument: not above the block's GS and current recovery id

	// The primary's plan (§R4.1).
	ReasonNoLocations        = "no-locations"                // InvalidArgument: nothing to recover from
	ReasonBadNodes           = "bad-nodes"                   // InvalidArgument: empty or duplicated node id
	ReasonPreempted          = "preempted"                   // Aborted, §R4.1 step 1 RecoveryInProgress
	ReasonAllFailed          = "all-failed"                  // Unavailable, §R4.1 step 2
	ReasonNoRWROrBetter      = "no-rwr-or-better"            // FailedPrecondition, §R4.1 step 3
	ReasonIncompleteReplies  = "incomplete-replies"          // Unavailable: no data found but some nodes failed
	ReasonInconsistentLength = "inconsistent-finalized-size" // FailedPrecondition, §R4.1 step 5
	ReasonCannotRecover      = "cannot-recover"              // Unavailable, §R4.1 step 8

	// commitBlockSynchronization (§R4.2, §R9.4).
	ReasonBadGS                  = "bad-gs"                      // InvalidArgument
	ReasonBadLength              = "bad-length"                  // InvalidArgument
	ReasonNoTargets              = "no-targets"                  // InvalidArgument
	ReasonTargetsWithDelete      = "targets-with-delete"         // InvalidArgument
	ReasonOldGSMismatch          = "old-gs-mismatch"             // InvalidArgument
	ReasonBlockNotFound          = "block-not-found"             // NotFound
	ReasonNotUnderConstruction   = "file-not-under-construction" // FailedPrecondition
	ReasonNotLastBlock           = "not-last-block"              // FailedPrecondition
	ReasonNotUnderRecovery       = "not-under-recovery"          // FailedPrecondition
	ReasonLengthMismatch         = "length-mismatch"             // FailedPrecondition
	ReasonRecoveryIDMismatch     = "recovery-id-mismatch"        // Aborted
	ReasonPenultimateNotComplete = "penultimate-not-complete"    // Unavailable

	// Pipeline update, commit and complete (§R5.3, §R5.4, §R9.4).
	ReasonLeaseMismatch     = "lease-mismatch"         // FailedPrecondition
	ReasonUnexpectedState   = "unexpected-block-state" // FailedPrecondition
	ReasonUnderRecovery     = "under-recovery"         // FailedPrecondition
	ReasonGSMismatch        = "gs-mismatch"            // FailedPrecondition
	ReasonGSNotAllocated    = "gs-not-allocated"       // InvalidArgument
	ReasonLengthShrinks     = "length-shrinks"         // OutOfRange
	ReasonAlreadyCommitted  = "already-committed"      // FailedPrecondition
	ReasonUnknownBlockState = "unknown-block-state"    // Internal
)

// Error is the one error type of this package.
type Error struct {
	Kind   ErrorKind
	Reason string // one of the Reason* constants
	Msg    string // human detail
}

func (e *Error) Error() string {
	s := "leaserecovery: " + e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Is matches the kind sentinels (ErrAborted, KindAborted, ...) and an *Error
// target with the same kind and, if the target has one, the same reason.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case ErrorKind:
		return t == e.Kind
	case *Error:
		return t.Kind == e.Kind && (t.Reason == "" || t.Reason == e.Reason)
	}
	return false
}

// KindOf returns the kind of err (KindUnknown for nil or foreign errors).
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k ErrorKind
	if errors.As(err, &k) {
		return k
	}
	return KindUnknown
}

// ReasonOf returns the Reason of err, or "".
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func newErr(kind ErrorKind, reason, format string, args ...any) *Error {
	return &Error{Kind: kind, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}
