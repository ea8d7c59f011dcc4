package client

import (
	"context"

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
