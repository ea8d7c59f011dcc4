package client

import (
	"context"
	"fmt"
	"net"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// Nodes lists the registered storage nodes with the leader's view of their
// liveness, and whether the leader is in safe mode.
func (c *Client) Nodes(ctx context.Context) (*pb.ListNodesResponse, error) {
	var out *pb.ListNodesResponse
	err := c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		out, err = pb.NewNamespaceClient(cc).ListNodes(ctx, &pb.ListNodesRequest{})
		return err
	})
	return out, err
}

// ShutdownNode asks the storage node with id nodeID (or at gRPC address
// host:port) to shut down (HDFS dfsadmin -shutdownDatanode). With
// forRestart its writers are told it is restarting and wait for it (up to
// their Config.NodeRestartTimeout), and the replicas being written come
// back RBW if it is started again within its --restart-replica-expiry.
// The call returns once the shutdown has begun; starting the node again
// is the operator's (or supervisor's) job.
func (c *Client) ShutdownNode(ctx context.Context, nodeID string, forRestart bool) error {
	addr, err := c.nodeAddr(ctx, nodeID)
	if err != nil {
		return err
	}
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	_, err = pb.NewDataNodeClient(cc).ShutdownNode(ctx, &pb.ShutdownNodeRequest{ForRestart: forRestart})
	return fromStatus(err)
}

// nodeAddr resolves a registered node id to its gRPC address; a host:port
// that is no node id is taken as the address.
func (c *Client) nodeAddr(ctx context.Context, node string) (string, error) {
	r, err := c.Nodes(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range r.GetNodes() {
		if n.GetNode().GetId() == node {
			return n.GetNode().GetGrpcAddr(), nil
		}
	}
	if _, _, err := net.SplitHostPort(node); err == nil {
		return node, nil
	}
	return "", fmt.Errorf("%w: no storage node %q is registered", ErrNotFound, node)
}
