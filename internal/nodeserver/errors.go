package nodeserver

import (
	"context"
	"errors"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrForeignData: a volume belongs to another storage node.
var ErrForeignData = errors.New("nodeserver: volume belongs to another node")

// kindCodes maps every replica error kind to its one gRPC code.
var kindCodes = map[replica.ErrorKind]codes.Code{
	replica.KindNotFound:           codes.NotFound,
	replica.KindAlreadyExists:      codes.AlreadyExists,
	replica.KindInvalidState:       codes.FailedPrecondition,
	replica.KindRecoveryInProgress: codes.Aborted,
	replica.KindStaleGS:            codes.FailedPrecondition,
	replica.KindOutOfRange:         codes.OutOfRange,
	replica.KindDiskOutOfSpace:     codes.ResourceExhausted,
	replica.KindResourceExhausted:  codes.ResourceExhausted,
	replica.KindCorrupt:            codes.DataLoss,
	replica.KindInvalidArgument:    codes.InvalidArgument,
	replica.KindFailedPrecondition: codes.FailedPrecondition,
	replica.KindUnavailable:        codes.Unavailable,
	replica.KindDeadlineExceeded:   codes.DeadlineExceeded,
	replica.KindCanceled:           codes.Canceled,
	replica.KindAborted:            codes.Aborted,
	replica.KindIO:                 codes.Internal,
}

// reqError is a request the node refuses before touching a replica.
type reqError struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *reqError) Error() string { return "nodeserver: " + e.msg }

func badRequest(reason, msg string) error {
	return &reqError{code: codes.InvalidArgument, reason: reason, msg: msg}
}

// upperSnake turns a replica reason ("checksum-mismatch") into an ErrorInfo
// reason ("CHECKSUM_MISMATCH").
func upperSnake(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// codeReason classifies err: a gRPC status passes through, replica kinds
// and request errors map to their code and reason.
func codeReason(err error) (codes.Code, string, string) {
	var re *reqError
	switch {
	case errors.As(err, &re):
		return re.code, re.reason, re.msg
	case replica.KindOf(err) != replica.KindUnknown:
		return kindCodes[replica.KindOf(err)], upperSnake(replica.ReasonOf(err)), err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, "", err.Error()
	case errors.Is(err, context.Canceled):
		return codes.Canceled, "", err.Error()
	}
	if st, ok := status.FromError(err); ok {
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		return st.Code(), reason, st.Message()
	}
	return codes.Internal, "", err.Error()
}

// toStatus maps an error to a gRPC status with an ErrorInfo, in one place.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	c, reason, msg := codeReason(err)
	return s.statusErr(c, reason, msg)
}

func (s *Server) statusErr(c codes.Code, reason, msg string) error {
	st := status.New(c, msg)
	if reason != "" {
		info := &errdetails.ErrorInfo{Reason: reason, Domain: pb.ErrorDomain, Metadata: map[string]string{pb.MetaNodeID: s.cfg.ID}}
		if d, err := st.WithDetails(info); err == nil {
			st = d
		}
	}
	return st.Err()
}

// nodeStatus is err as one pipeline node's ack status.
func nodeStatus(addr string, err error) *pb.NodeStatus {
	if err == nil {
		return &pb.NodeStatus{Address: addr}
	}
	c, reason, msg := codeReason(err)
	if c == codes.OK {
		c = codes.Unknown
	}
	return &pb.NodeStatus{Address: addr, Code: int32(c), Reason: reason, Message: msg}
}
