package coordserver

import (
	"context"
	"errors"
	"strings"

	"github.com/logbookhq/logbook/internal/blocks"
	lr "github.com/logbookhq/logbook/leaserecovery"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/journal"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	errDomain            = pb.ErrorDomain
	ReasonNotLeader      = pb.ReasonNotLeader
	ReasonNoLeader       = pb.ReasonNoLeader
	ReasonClusterID      = pb.ReasonClusterID
	ReasonOutcomeUnknown = pb.ReasonOutcomeUnknown
	ReasonHalted         = pb.ReasonHalted
	MetaLeaderID         = pb.MetaLeaderID
	MetaLeaderAddr       = pb.MetaLeaderAddr
	MetaClusterID        = pb.MetaClusterID
)

func (s *Server) statusErr(c codes.Code, reason, msg string) error {
	st := status.New(c, msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: errDomain, Metadata: map[string]string{MetaClusterID: s.cfg.ClusterID}}
	if id, addr := s.leaderHint(); id != "" {
		info.Metadata[MetaLeaderID] = id
		info.Metadata[MetaLeaderAddr] = addr
	}
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return st.Err()
}

// The one place that maps errors to gRPC statuses: toStatus for the
// journal's, the cluster's and Raft's, fsErr for the file system's (the
// state machine's namespace refusals, the lease rules', the block
// manager's), each with its ErrorInfo reason where clients act on one.

// toStatus maps domain and Raft errors to gRPC status.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, fsm.ErrEmptyAppend), errors.Is(err, fsm.ErrInvalidEvent), errors.Is(err, fsm.ErrInvalidMember):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, fsm.ErrSessionOpenFormat), errors.Is(err, fsm.ErrSessionCloseFormat), errors.Is(err, fsm.ErrJournalConfigFormat):
		return s.statusErr(codes.FailedPrecondition, ReasonLogFormat, err.Error())
	case errors.Is(err, fsm.ErrSessionClientID), errors.Is(err, fsm.ErrSessionID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, fsm.ErrSessionExpired):
		return s.statusErr(codes.FailedPrecondition, pb.ReasonSessionExpired, err.Error())
	case errors.Is(err, fsm.ErrSessionAcked), errors.Is(err, fsm.ErrSessionResultExpired), errors.Is(err, fsm.ErrAckBackwards):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, fsm.ErrConsumerName), errors.Is(err, fsm.ErrConsumerOp), errors.Is(err, fsm.ErrTrimFuture), errors.Is(err, fsm.ErrInvalidJournalConfig):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, fsm.ErrImportNotEmpty), errors.Is(err, fsm.ErrImportGap), errors.Is(err, fsm.ErrJournalConfigHeld):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, fsm.ErrConsumerNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, fsm.ErrConsumerExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, fsm.ErrTooManyConsumers):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, fsm.ErrAckBeyondSafe), errors.Is(err, fsm.ErrConsumerFrom):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, fsm.ErrHalted):
		return s.statusErr(codes.Internal, ReasonHalted, err.Error())
	case errors.Is(err, journal.ErrQueueFull):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, journal.ErrClosed), errors.Is(err, raft.ErrRaftShutdown):
		return status.Error(codes.Unavailable, "coordinator shutting down")
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return s.statusErr(codes.Unavailable, ReasonNotLeader, err.Error())
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout):
		return s.statusErr(codes.Unavailable, ReasonOutcomeUnknown, err.Error()+": the write may or may not have committed; retry with the same request seq")
	case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrCantBootstrap):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// errReason is err's ErrorInfo reason, else its gRPC code (a bounded
// metric label).
func errReason(err error) string {
	st := status.Convert(err)
	if r := infoReason(st); r != "" {
		return r
	}
	return st.Code().String()
}

// infoReason is the status's ErrorInfo reason ("" without one).
func infoReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason != "" {
			return info.Reason
		}
	}
	return ""
}

// ErrorInfo reasons of the file-system services.
const (
	ReasonLogFormat         = pb.ReasonLogFormat
	ReasonNodeNotRegistered = "NODE_NOT_REGISTERED"
	ReasonNoLiveNodes       = "NO_LIVE_NODES"
	ReasonBadRequest        = "BAD_REQUEST"
	ReasonNoAdditionalNode  = "NO_ADDITIONAL_NODE"
	// ReasonSafeMode: a new leader has not heard every storage node's
	// full report yet (design §R9.12); the call is retryable.
	ReasonSafeMode = "SAFE_MODE"
)

// fsSentinels names the fsm's namespace sentinels for ErrorInfo.
var fsSentinels = []struct {
	err    error
	reason string
}{
	{fsm.ErrNamespaceFormat, ReasonLogFormat},
	{fsm.ErrInvalidPath, "INVALID_PATH"},
	{fsm.ErrInvalidReplication, "INVALID_REPLICATION"},
	{fsm.ErrInvalidBlockSize, "INVALID_BLOCK_SIZE"},
	{fsm.ErrInvalidClientName, "INVALID_CLIENT_NAME"},
	{fsm.ErrInvalidTargets, "INVALID_TARGETS"},
	{fsm.ErrInvalidNode, "INVALID_NODE"},
	{fsm.ErrInvalidGS, "INVALID_GS"},
	{fsm.ErrInvalidRecovery, "INVALID_RECOVERY"},
	{fsm.ErrFileNotFound, "FILE_NOT_FOUND"},
	{fsm.ErrBlockNotFound, "BLOCK_NOT_FOUND"},
	{fsm.ErrNodeNotFound, "NODE_NOT_FOUND"},
	{fsm.ErrFileExists, "FILE_EXISTS"},
	{fsm.ErrIsDirectory, "IS_DIRECTORY"},
	{fsm.ErrParentNotDirectory, "PARENT_NOT_DIRECTORY"},
	{fsm.ErrDirectoryNotEmpty, "DIRECTORY_NOT_EMPTY"},
	{fsm.ErrNotUnderConstruction, "NOT_UNDER_CONSTRUCTION"},
	{fsm.ErrNotLeaseHolder, "NOT_LEASE_HOLDER"},
	{fsm.ErrFileBeingWritten, "FILE_BEING_WRITTEN"},
	{fsm.ErrAlreadyLeaseHolder, "ALREADY_LEASE_HOLDER"},
	{fsm.ErrRecoveryInProgress, "RECOVERY_IN_PROGRESS"},
	{fsm.ErrRecoveryNeeded, "RECOVERY_NEEDED"},
	{fsm.ErrNotLastBlock, "NOT_LAST_BLOCK"},
	{fsm.ErrBlockState, "BLOCK_STATE"},
	{fsm.ErrNotReplicatedYet, "NOT_REPLICATED_YET"},
	{fsm.ErrNodeIDHeld, "NODE_ID_HELD"},
	{fsm.ErrStaleGS, "STALE_GS"},
	{fsm.ErrStaleRecovery, "STALE_RECOVERY"},
	{fsm.ErrTooManyBlocks, "TOO_MANY_BLOCKS"},
	{fsm.ErrBlockLength, "BLOCK_LENGTH"},
	{fsm.ErrDeleteTooLarge, "DELETE_TOO_LARGE"},
	{fsm.ErrInvalidNamespaceOp, "INVALID_OP"},
	{fsm.ErrCacheFormat, ReasonLogFormat},
	{fsm.ErrInvalidCacheReplication, "INVALID_CACHE_REPLICATION"},
	{fsm.ErrDirectiveExists, "DIRECTIVE_EXISTS"},
	{fsm.ErrDirectiveNotFound, "DIRECTIVE_NOT_FOUND"},
	{fsm.ErrTooManyDirectives, "TOO_MANY_DIRECTIVES"},
}

// blockErrors are the block manager's refusals (internal/blocks).
var blockErrors = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{blocks.ErrNodeNotRegistered, codes.FailedPrecondition, ReasonNodeNotRegistered},
	{blocks.ErrNoLiveNodes, codes.Unavailable, ReasonNoLiveNodes},
	// Not Unavailable: no node to add is an answer, not a reason to
	// retry (the writer goes on without one, or fails if it must add).
	{blocks.ErrNoAdditionalNode, codes.FailedPrecondition, ReasonNoAdditionalNode},
	{blocks.ErrSafeMode, codes.Unavailable, ReasonSafeMode},
	{blocks.ErrReportInterrupted, codes.Unavailable, ""},
	{blocks.ErrBadDecision, codes.Internal, "BAD_DECISION"},
}

var kindCodes = map[fsm.Kind]codes.Code{
	fsm.KindInvalidArgument:    codes.InvalidArgument,
	fsm.KindNotFound:           codes.NotFound,
	fsm.KindAlreadyExists:      codes.AlreadyExists,
	fsm.KindFailedPrecondition: codes.FailedPrecondition,
	fsm.KindAborted:            codes.Aborted,
	fsm.KindOutOfRange:         codes.OutOfRange,
	fsm.KindUnavailable:        codes.Unavailable,
	fsm.KindInternal:           codes.Internal,
	fsm.KindResourceExhausted:  codes.ResourceExhausted,
}

var ruleKindCodes = map[lr.ErrorKind]codes.Code{
	lr.KindInvalidArgument:    codes.InvalidArgument,
	lr.KindNotFound:           codes.NotFound,
	lr.KindFailedPrecondition: codes.FailedPrecondition,
	lr.KindAborted:            codes.Aborted,
	lr.KindOutOfRange:         codes.OutOfRange,
	lr.KindUnavailable:        codes.Unavailable,
	lr.KindInternal:           codes.Internal,
}

// fsErr maps a namespace refusal to its gRPC status: one code per
// fsm.Kind (or leaserecovery kind), the reason in ErrorInfo (the rule's
// stable reason when there is one, else the sentinel's name).
func (s *Server) fsErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, be := range blockErrors {
		if errors.Is(err, be.err) {
			if be.reason == "" {
				return status.Error(be.code, err.Error())
			}
			return s.statusErr(be.code, be.reason, err.Error())
		}
	}
	reason := lr.ReasonOf(err)
	if reason == "" {
		for _, se := range fsSentinels {
			if errors.Is(err, se.err) {
				reason = se.reason
				break
			}
		}
	}
	if c, ok := kindCodes[fsm.KindOf(err)]; ok {
		return s.statusErr(c, reasonOr(reason, fsm.KindOf(err).String()), err.Error())
	}
	if c, ok := ruleKindCodes[lr.KindOf(err)]; ok {
		return s.statusErr(c, reasonOr(reason, lr.KindOf(err).String()), err.Error())
	}
	if errors.Is(err, raft.ErrNotLeader) {
		return s.statusErr(codes.Unavailable, ReasonNotLeader, err.Error())
	}
	return s.toStatus(err)
}

func reasonOr(r, kind string) string {
	if r != "" {
		return r
	}
	return strings.ToUpper(strings.ReplaceAll(kind, "-", "_"))
}

func (s *Server) badRequest(msg string) error {
	return s.statusErr(codes.InvalidArgument, ReasonBadRequest, msg)
}
