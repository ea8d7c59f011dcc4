package coordserver

import (
	"context"
	"sync"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys on member-to-member calls.
const (
	// MDClusterID carries the sender's cluster id on every call between
	// members (and optionally from clients); a mismatch is refused.
	MDClusterID = pb.MDClusterID
	// mdForwarded marks a request a follower forwarded to the leader, so
	// it is never forwarded twice.
	mdForwarded = "logbook-forwarded"
)

// peerConns caches one gRPC connection per member address.
type peerConns struct {
	clusterID string
	creds     credentials.TransportCredentials
	maxMsg    int
	mu        sync.Mutex
	conns     map[string]*grpc.ClientConn
}

func newPeerConns(clusterID string, creds credentials.TransportCredentials, maxMsg int) *peerConns {
	return &peerConns{clusterID: clusterID, creds: creds, maxMsg: maxMsg + 64<<10, conns: map[string]*grpc.ClientConn{}}
}

func (p *peerConns) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	// Reconnect: grpc-go's default redial backoff grows to 120 s, and a
	// member that restarted would be refused that long by the others.
	c, err := grpc.NewClient(grpcflow.Target(addr), append(grpcflow.DialOptions(), grpcflow.Reconnect(),
		grpc.WithTransportCredentials(p.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.maxMsg), grpc.MaxCallSendMsgSize(p.maxMsg)),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, MDClusterID, p.clusterID), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, MDClusterID, p.clusterID), desc, cc, method, opts...)
		}),
	)...)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connect to member %s: %v", addr, err)
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peerConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		c.Close()
		delete(p.conns, a)
	}
}

func resultsToProto(rs []fsm.Result) []*clusterpb.AppendResult {
	out := make([]*clusterpb.AppendResult, len(rs))
	for i, r := range rs {
		ar := &clusterpb.AppendResult{FirstSeq: r.FirstSeq, Count: r.Count, Index: r.Index}
		if r.Err != nil {
			st, _ := status.FromError(r.Err)
			ar.Code, ar.Message, ar.Reason = uint32(st.Code()), st.Message(), infoReason(st)
		}
		out[i] = ar
	}
	return out
}

func (s *Server) resultsFromProto(rs []*clusterpb.AppendResult) []fsm.Result {
	out := make([]fsm.Result, len(rs))
	for i, r := range rs {
		out[i] = fsm.Result{FirstSeq: r.FirstSeq, Count: r.Count, Index: r.Index}
		switch {
		case r.Code == 0:
		case r.Reason != "":
			out[i].Err = s.statusErr(codes.Code(r.Code), r.Reason, r.Message)
		default:
			out[i].Err = status.Error(codes.Code(r.Code), r.Message)
		}
	}
	return out
}
