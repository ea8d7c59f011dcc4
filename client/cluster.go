package client

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// Cluster is the cluster operations API. Membership changes and leadership
// transfer go to the leader (any member forwards them).
type Cluster struct{ c *Client }

// AddVoter adds a voting member; it returns the configuration's Raft index.
func (cl *Cluster) AddVoter(ctx context.Context, id, raftAddr string) (uint64, error) {
	return cl.membership(ctx, func(ctx context.Context, c pb.ClusterClient) (*pb.MembershipResponse, error) {
		return c.AddVoter(ctx, &pb.AddServerRequest{Id: id, RaftAddr: raftAddr})
	})
}

// AddNonvoter adds a member that replicates but does not vote.
func (cl *Cluster) AddNonvoter(ctx context.Context, id, raftAddr string) (uint64, error) {
	return cl.membership(ctx, func(ctx context.Context, c pb.ClusterClient) (*pb.MembershipResponse, error) {
		return c.AddNonvoter(ctx, &pb.AddServerRequest{Id: id, RaftAddr: raftAddr})
	})
}

// RemoveServer removes a member; the removed member stops.
func (cl *Cluster) RemoveServer(ctx context.Context, id string) (uint64, error) {
	return cl.membership(ctx, func(ctx context.Context, c pb.ClusterClient) (*pb.MembershipResponse, error) {
		return c.RemoveServer(ctx, &pb.RemoveServerRequest{Id: id})
	})
}

func (cl *Cluster) membership(ctx context.Context, fn func(context.Context, pb.ClusterClient) (*pb.MembershipResponse, error)) (uint64, error) {
	var resp *pb.MembershipResponse
	err := cl.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = fn(ctx, pb.NewClusterClient(cc))
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// TransferLeadership hands leadership to id (or, empty, to the most
// up-to-date voter) and returns the new leader's id.
func (cl *Cluster) TransferLeadership(ctx context.Context, id string) (string, error) {
	var resp *pb.TransferLeadershipResponse
	err := cl.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewClusterClient(cc).TransferLeadership(ctx, &pb.TransferLeadershipRequest{Id: id})
		return err
	})
	if err != nil {
		return "", err
	}
	cl.c.setLeader("")
	return resp.LeaderId, nil
}

// Snapshot forces a snapshot on the member at endpoint (each member
// snapshots its own state).
func (cl *Cluster) Snapshot(ctx context.Context, endpoint string) (index, term uint64, err error) {
	cc, err := cl.c.conn(endpoint)
	if err != nil {
		return 0, 0, err
	}
	resp, err := pb.NewClusterClient(cc).Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		return 0, 0, fromStatus(err)
	}
	return resp.Index, resp.Term, nil
}

// Verify compares every member's state digest at one replicated checkpoint
// index (invariant 2: members that applied index i hold identical state).
func (cl *Cluster) Verify(ctx context.Context) (VerifyResult, error) {
	var resp *pb.VerifyResponse
	err := cl.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewClusterClient(cc).Verify(ctx, &pb.VerifyRequest{})
		return err
	})
	if err != nil {
		return VerifyResult{}, err
	}
	return toVerifyResult(resp), nil
}
