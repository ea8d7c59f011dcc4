package coordserver

import (
	"context"
	"errors"

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

// toStatus maps domain and Raft errors to gRPC status in one place.
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
