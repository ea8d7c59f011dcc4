package client

import (
	"context"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// NodeList is the registered storage nodes with the leader's view of
// them (Client.Nodes).
type NodeList struct {
	Nodes []Node
	// SafeMode: the leader deletes and re-replicates nothing until the
	// nodes' block reports are in.
	SafeMode bool
	// The leader's replication state: COMPLETE blocks with fewer good
	// replicas than their file's replication, blocks without any good
	// replica on a live node, and re-replication transfers in flight.
	UnderReplicatedBlocks uint64
	MissingBlocks         uint64
	PendingReplications   uint64
}

// Node is one registered storage node: its registration (replicated) and
// the leader's view of it (soft state, rebuilt after a leader change).
type Node struct {
	ID         string
	GRPCAddr   string
	HTTPAddr   string
	GossipAddr string
	StorageIDs []string
	// InstanceID is the id the node keeps in its data directory (the HDFS
	// datanode UUID).
	InstanceID string
	// Registered and Updated are the times of the first and of the latest
	// registration.
	Registered time.Time
	Updated    time.Time
	// Live: heard from within the stale interval.
	Live bool
	// Dead: silent past the dead interval; its replicas do not count and
	// its blocks are re-replicated.
	Dead bool
	// Gossip is the node's gossip state (alive, leaving, dead, left) when
	// it joined the coordinators' gossip; empty otherwise.
	Gossip string
	// LastHeartbeat is the time since the node's last heartbeat this
	// term; negative: none yet.
	LastHeartbeat time.Duration
	// FullReport: a full block report arrived in this term.
	FullReport bool
	// Replicas is how many replicas the node reported.
	Replicas uint64
	Storages []Storage
	// The node's latest cache report: locked-memory budget, bytes and
	// replicas cached.
	CacheCapacity, CacheUsed, CachedBlocks uint64
}

// Storage is one storage (a data directory) of a node, as it last
// reported it.
type Storage struct {
	ID                   string
	Capacity, Used, Free uint64
	Failed               bool
}

func toNodeList(r *pb.ListNodesResponse) NodeList {
	out := NodeList{SafeMode: r.GetSafeMode(), UnderReplicatedBlocks: r.GetUnderReplicatedBlocks(),
		MissingBlocks: r.GetMissingBlocks(), PendingReplications: r.GetPendingReplications()}
	for _, n := range r.GetNodes() {
		rec := n.GetNode()
		node := Node{
			ID: rec.GetId(), GRPCAddr: rec.GetGrpcAddr(), HTTPAddr: rec.GetHttpAddr(), GossipAddr: rec.GetGossipAddr(),
			StorageIDs: append([]string(nil), rec.GetStorageIds()...), InstanceID: rec.GetInstanceId(),
			Registered: unixNanos(rec.GetRegisteredUnixNanos()), Updated: unixNanos(rec.GetUpdatedUnixNanos()),
			Live: n.GetLive(), Dead: n.GetDead(), Gossip: n.GetGossip(), LastHeartbeat: millis(n.GetLastHeartbeatMs()),
			FullReport: n.GetFullReport(), Replicas: n.GetReplicas(),
			CacheCapacity: n.GetCacheCapacity(), CacheUsed: n.GetCacheUsed(), CachedBlocks: n.GetCachedBlocks(),
		}
		for _, s := range n.GetStorages() {
			node.Storages = append(node.Storages, Storage{ID: s.GetStorageId(), Capacity: s.GetCapacity(), Used: s.GetUsed(), Free: s.GetFree(), Failed: s.GetFailed()})
		}
		out.Nodes = append(out.Nodes, node)
	}
	return out
}

// unixNanos is the time of n nanoseconds since the epoch; zero for 0.
func unixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Nodes lists the registered storage nodes with the leader's view of their
// liveness, and whether the leader is in safe mode.
func (c *Client) Nodes(ctx context.Context) (NodeList, error) {
	var out *pb.ListNodesResponse
	err := c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		out, err = pb.NewNamespaceClient(cc).ListNodes(ctx, &pb.ListNodesRequest{})
		return err
	})
	if err != nil {
		return NodeList{}, err
	}
	return toNodeList(out), nil
}

// ShutdownNode asks the storage node with id node (or the registered node
// at gRPC address host:port) to shut down, through a coordinator (HDFS dfsadmin -shutdownDatanode). With
// forRestart its writers are told it is restarting and wait for it (up to
// their Config.NodeRestartTimeout), and the replicas being written come
// back RBW if it is started again within its --restart-replica-expiry.
// The call returns once the shutdown has begun; starting the node again
// is the operator's (or supervisor's) job.
func (c *Client) ShutdownNode(ctx context.Context, node string, forRestart bool) error {
	// A coordinator authorizes the call and makes it (with TLS a node
	// takes it from coordinators only).
	return c.do(ctx, false, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewClusterClient(cc).ShutdownNode(ctx, &pb.ClusterShutdownNodeRequest{NodeId: node, ForRestart: forRestart})
		return err
	})
}
