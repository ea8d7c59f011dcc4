package client

import (
	"errors"
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors; test with errors.Is. Errors returned by the SDK that came
// from a server are *Error values, which match these sentinels by reason or
// code.
var (
	ErrNoLeader           = errors.New("logbook: no leader")
	ErrNotLeader          = errors.New("logbook: not the leader")
	ErrClusterMismatch    = errors.New("logbook: cluster id mismatch")
	ErrOutOfRange         = errors.New("logbook: out of range")
	ErrInvalidArgument    = errors.New("logbook: invalid argument")
	ErrNotFound           = errors.New("logbook: not found")
	ErrUnavailable        = errors.New("logbook: unavailable")
	ErrTooLarge           = errors.New("logbook: resource exhausted")
	ErrFailedPrecondition = errors.New("logbook: failed precondition")
	ErrClosed             = errors.New("logbook: client closed")
	// ErrSessionExpired: the cluster no longer holds this client's
	// exactly-once session (it was evicted as least recently used among
	// 65,536, or replaced by a forced import). A request refused so at its
	// first attempt was applied nowhere, and Append and the file-system
	// calls send it again in a new session without surfacing this error;
	// a request refused after earlier attempts (one of which may have been
	// applied) and a Submit future fail with it. The client has started a
	// new session either way: later calls work. It also matches
	// ErrFailedPrecondition.
	ErrSessionExpired = errors.New("logbook: session expired")
	// ErrJournalFull: the retained journal is over the leader's retention
	// quota (coord serve --journal-max-retained-bytes), usually because a
	// registered consumer stopped acking; the append was not applied, and
	// appends are taken again once trim brings the journal under the
	// quota. Not retried by the SDK. It also matches ErrTooLarge.
	ErrJournalFull = errors.New("logbook: journal full")
	// ErrBlockTokenExpired: a storage node refused the block access token
	// the coordinators handed out with a block's locations as expired
	// (they last an hour by default). FileReader asks for new ones by
	// itself; a caller holding a BlockInfo calls Stat again.
	ErrBlockTokenExpired = errors.New("logbook: block access token expired")

	// ErrIsDirectory: a file operation (Open, Append) named a directory.
	ErrIsDirectory = errors.New("logbook: is a directory")
)

// Error is a server error with its gRPC code and Logbook details.
type Error struct {
	Code       codes.Code
	Message    string
	Reason     string // an api/logbookv1 Reason* (NOT_LEADER ...) or empty
	LeaderID   string
	LeaderAddr string
	ClusterID  string
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("logbook: %s (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("logbook: %s: %s", e.Code, e.Message)
}

// Is matches the sentinel errors.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoLeader:
		return e.Reason == pb.ReasonNoLeader
	case ErrNotLeader:
		return e.Reason == pb.ReasonNotLeader
	case ErrClusterMismatch:
		return e.Reason == pb.ReasonClusterID
	case ErrOutOfRange:
		return e.Code == codes.OutOfRange
	case ErrInvalidArgument:
		return e.Code == codes.InvalidArgument
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrUnavailable:
		return e.Code == codes.Unavailable
	case ErrTooLarge:
		return e.Code == codes.ResourceExhausted
	case ErrFailedPrecondition:
		return e.Code == codes.FailedPrecondition
	case ErrSessionExpired:
		return e.Reason == pb.ReasonSessionExpired
	case ErrJournalFull:
		return e.Reason == pb.ReasonJournalFull
	case ErrBlockTokenExpired:
		return e.Reason == pb.ReasonBlockTokenExpired
	}
	return false
}

// GRPCStatus lets status.FromError see the original status.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// fromStatus converts a gRPC error into *Error (other errors pass through).
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == pb.ErrorDomain {
			e.Reason = info.Reason
			e.LeaderID = info.Metadata[pb.MetaLeaderID]
			e.LeaderAddr = info.Metadata[pb.MetaLeaderAddr]
			e.ClusterID = info.Metadata[pb.MetaClusterID]
		}
	}
	return e
}

// retryable reports whether a write may be retried with the same request
// seq (the session makes the retry exactly-once).
func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case codes.Unavailable, codes.Aborted:
		return true
	case codes.DeadlineExceeded, codes.Canceled:
		// A per-attempt timeout (not the caller's ctx) — the caller's ctx is
		// checked separately before retrying.
		return true
	}
	return false
}
