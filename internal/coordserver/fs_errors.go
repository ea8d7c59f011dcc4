package coordserver

import (
	"errors"
	"strings"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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

func (s *Server) isLeader() bool { return s.raft.State() == raft.Leader }
