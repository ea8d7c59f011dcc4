package nodeserver

import (
	"errors"
	"sync"
	"time"

	"github.com/logbookhq/logbook/internal/grpcflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
)

// bufferPool adds a 128 KiB tier to gRPC's default tiers: a full packet
// (64 KiB and its framing) otherwise takes, and zeroes, a 1 MiB buffer per
// message.
var bufferPool = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15, 17, 20)
	if err != nil {
		panic(err)
	}
	return p
}()

// peerConns holds one client connection per downstream node address,
// reused by every pipeline and transfer.
type peerConns struct {
	creds  credentials.TransportCredentials
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newPeerConns(creds credentials.TransportCredentials) *peerConns {
	return &peerConns{creds: creds, conns: map[string]*grpc.ClientConn{}}
}

// DialOptions are the options the node uses to reach other nodes; clients
// of the DataNode service may use them too. Nil creds: plaintext.
func DialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgBytes)),
		experimental.WithBufferPool(bufferPool),
		// A dead downstream node is noticed even while no packet flows.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: false}),
		// A restarted downstream node is redialed within seconds.
		grpcflow.Reconnect(),
	}
}

func (p *peerConns) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("nodeserver: shutting down")
	}
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(grpcflow.Target(addr), DialOptions(p.creds)...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peerConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
