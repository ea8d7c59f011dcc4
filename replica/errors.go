package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// ErrorKind classifies every error this package returns, so that a server can
// translate it into exactly one wire status. Suggested gRPC mapping:
//
//	KindNotFound           codes.NotFound
//	KindAlreadyExists      codes.AlreadyExists
//	KindInvalidState       codes.FailedPrecondition
//	KindRecoveryInProgress codes.Aborted
//	KindStaleGS            codes.FailedPrecondition
//	KindOutOfRange         codes.OutOfRange
//	KindDiskOutOfSpace     codes.ResourceExhausted
//	KindResourceExhausted  codes.ResourceExhausted
//	KindCorrupt            codes.DataLoss
//	KindInvalidArgument    codes.InvalidArgument
//	KindFailedPrecondition codes.FailedPrecondition
//	KindUnavailable        codes.Unavailable
//	KindDeadlineExceeded   codes.DeadlineExceeded
//	KindCanceled           codes.Canceled
//	KindAborted            codes.Aborted
//	KindIO                 codes.Internal
//
// The Reason of an *Error (a stable kebab-case word) tells cases of one kind
// apart, e.g. for a google.rpc.ErrorInfo.
type ErrorKind uint8

const (
	// KindUnknown is never returned on purpose; KindOf reports it for errors
	// that did not come from this package.
	KindUnknown ErrorKind = iota
	// KindNotFound: no replica (HDFS ReplicaNotFoundException, also used by
	// HDFS for "replica in a state this operation does not accept", see the
	// transition table), or no such block pool / volume.
	KindNotFound
	// KindAlreadyExists: HDFS ReplicaAlreadyExistsException.
	KindAlreadyExists
	// KindInvalidState: the replica is in a state the operation cannot use
	// ("unexpected replica state").
	KindInvalidState
	// KindRecoveryInProgress: a recovery with an equal or higher recovery id
	// owns the replica (HDFS RecoveryInProgressException).
	KindRecoveryInProgress
	// KindStaleGS: a generation stamp does not match or is out of range.
	KindStaleGS
	// KindOutOfRange: a length or offset does not match the replica.
	KindOutOfRange
	// KindDiskOutOfSpace: no volume has room (HDFS DiskOutOfSpaceException).
	KindDiskOutOfSpace
	// KindResourceExhausted: another budget is spent (locked memory).
	KindResourceExhausted
	// KindCorrupt: a checksum does not verify or a file is malformed.
	KindCorrupt
	// KindInvalidArgument: a malformed request (bad block pool id, misaligned
	// packet, ...). Nothing was changed.
	KindInvalidArgument
	// KindFailedPrecondition: the request is well formed but the replica or
	// pool is not in a condition to accept it.
	KindFailedPrecondition
	// KindUnavailable: the volume failed, the dataset is closed or failed.
	KindUnavailable
	// KindDeadlineExceeded: the existing writer could not be stopped in time.
	KindDeadlineExceeded
	// KindCanceled: the caller's context was canceled.
	KindCanceled
	// KindAborted: this writer was stopped by a newer operation (recovery).
	KindAborted
	// KindIO: an unexpected I/O error.
	KindIO
)

var kindNames = [...]string{
	KindUnknown:            "unknown",
	KindNotFound:           "not found",
	KindAlreadyExists:      "already exists",
	KindInvalidState:       "unexpected replica state",
	KindRecoveryInProgress: "recovery in progress",
	KindStaleGS:            "bad generation stamp",
	KindOutOfRange:         "out of range",
	KindDiskOutOfSpace:     "disk out of space",
	KindResourceExhausted:  "resource exhausted",
	KindCorrupt:            "corrupt",
	KindInvalidArgument:    "invalid argument",
	KindFailedPrecondition: "failed precondition",
	KindUnavailable:        "unavailable",
	KindDeadlineExceeded:   "deadline exceeded",
	KindCanceled:           "canceled",
	KindAborted:            "aborted",
	KindIO:                 "i/o error",
}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error makes a kind usable as a sentinel: errors.Is(err, replica.KindNotFound).
func (k ErrorKind) Error() string { return "replica: " + k.String() }

// Sentinels, one per kind, for errors.Is.
var (
	ErrNotFound           error = KindNotFound
	ErrAlreadyExists      error = KindAlreadyExists
	ErrInvalidState       error = KindInvalidState
	ErrRecoveryInProgress error = KindRecoveryInProgress
	ErrStaleGS            error = KindStaleGS
	ErrOutOfRange         error = KindOutOfRange
	ErrDiskOutOfSpace     error = KindDiskOutOfSpace
	ErrResourceExhausted  error = KindResourceExhausted
	ErrCorrupt            error = KindCorrupt
	ErrInvalidArgument    error = KindInvalidArgument
	ErrFailedPrecondition error = KindFailedPrecondition
	ErrUnavailable        error = KindUnavailable
	ErrDeadlineExceeded   error = KindDeadlineExceeded
	ErrCanceled           error = KindCanceled
	ErrAborted            error = KindAborted
	ErrIO                 error = KindIO
)

// Error is the one error type of this package.
type Error struct {
	Kind    ErrorKind
	Reason  string // stable kebab-case word, e.g. "non-rbw-replica"
	Op      string // operation, e.g. "recover-rbw"
	Pool    string // block pool id, if known
	BlockID uint64 // 0 if not about one block
	Msg     string // human detail
	Err     error  // underlying cause, may be nil
}

func (e *Error) Error() string {
	s := "replica: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	if e.BlockID != 0 || e.Pool != "" {
		s += fmt.Sprintf("%s/blk_%d: ", e.Pool, e.BlockID)
	}
	s += e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the kind sentinels (ErrNotFound, KindNotFound, ...).
func (e *Error) Is(target error) bool {
	k, ok := target.(ErrorKind)
	return ok && k == e.Kind
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

// at fills in where an error happened, keeping fields already set.
func at(err error, op, pool string, id uint64) error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		e = ioErr(err)
	} else {
		c := *e
		e = &c
	}
	if e.Op == "" {
		e.Op = op
	}
	if e.Pool == "" {
		e.Pool = pool
	}
	if e.BlockID == 0 {
		e.BlockID = id
	}
	return e
}

// ioErr classifies an error from the file system or the context.
func ioErr(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Kind: KindCanceled, Reason: "canceled", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: KindDeadlineExceeded, Reason: "deadline", Err: err}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &Error{Kind: KindDiskOutOfSpace, Reason: "disk-out-of-space", Err: err}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Kind: KindIO, Reason: "file-missing", Err: err}
	}
	return &Error{Kind: KindIO, Reason: "io", Err: err}
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return ioErr(err)
	}
	return nil
}
