package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

// nodeJSON is one storage node of coord nodes --json.
type nodeJSON struct {
	ID              string `json:"id"`
	GRPCAddr        string `json:"grpc_addr"`
	HTTPAddr        string `json:"http_addr"`
	Live            bool   `json:"live"`
	Dead            bool   `json:"dead"`
	Gossip          string `json:"gossip"`
	LastHeartbeatMs int64  `json:"last_heartbeat_ms"`
	FullReport      bool   `json:"full_report"`
	Replicas        uint64 `json:"replicas"`
	CapacityBytes   uint64 `json:"capacity_bytes"`
	FreeBytes       uint64 `json:"free_bytes"`
	FailedStorages  int    `json:"failed_storages"`
	// The node's latest cache report (coord cache).
	CacheCapacityBytes uint64 `json:"cache_capacity_bytes"`
	CacheUsedBytes     uint64 `json:"cache_used_bytes"`
	CachedBlocks       uint64 `json:"cached_blocks"`
}

type nodesJSON struct {
	SafeMode              bool       `json:"safe_mode"`
	UnderReplicatedBlocks uint64     `json:"under_replicated_blocks"`
	MissingBlocks         uint64     `json:"missing_blocks"`
	PendingReplications   uint64     `json:"pending_replications"`
	Nodes                 []nodeJSON `json:"nodes"`
}

func toNodesJSON(r client.NodeList) nodesJSON {
	out := nodesJSON{SafeMode: r.SafeMode, UnderReplicatedBlocks: r.UnderReplicatedBlocks, MissingBlocks: r.MissingBlocks,
		PendingReplications: r.PendingReplications, Nodes: []nodeJSON{}}
	for _, n := range r.Nodes {
		j := nodeJSON{ID: n.ID, GRPCAddr: n.GRPCAddr, HTTPAddr: n.HTTPAddr,
			Live: n.Live, Dead: n.Dead, Gossip: n.Gossip, LastHeartbeatMs: n.LastHeartbeat.Milliseconds(), FullReport: n.FullReport, Replicas: n.Replicas,
			CacheCapacityBytes: n.CacheCapacity, CacheUsedBytes: n.CacheUsed, CachedBlocks: n.CachedBlocks}
		for _, s := range n.Storages {
			j.CapacityBytes += s.Capacity
			j.FreeBytes += s.Free
			if s.Failed {
				j.FailedStorages++
			}
		}
		out.Nodes = append(out.Nodes, j)
	}
	return out
}

// writeNodes prints coord nodes.
func writeNodes(w io.Writer, j nodesJSON) error {
	t := newTable(w)
	fmt.Fprintln(t, "ID\tGRPC\tSTATE\tGOSSIP\tLAST HEARTBEAT\tFULL REPORT\tREPLICAS\tFREE / CAPACITY\tCACHED")
	for _, n := range j.Nodes {
		hb := "-"
		if n.LastHeartbeatMs >= 0 {
			hb = (time.Duration(n.LastHeartbeatMs) * time.Millisecond).String() + " ago"
		}
		state := "live"
		switch {
		case n.Dead:
			state = "dead"
		case !n.Live:
			state = "stale"
		}
		cached := "-"
		if n.CacheCapacityBytes > 0 {
			cached = fmt.Sprintf("%d blocks, %d / %d MiB", n.CachedBlocks, n.CacheUsedBytes>>20, n.CacheCapacityBytes>>20)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%d / %d MiB\t%s\n", n.ID, n.GRPCAddr, state, orDash(n.Gossip), hb, n.FullReport, n.Replicas, n.FreeBytes>>20, n.CapacityBytes>>20, cached)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if j.SafeMode {
		fmt.Fprintln(w, "safe mode: waiting for block reports (no deletion or re-replication)")
	}
	fmt.Fprintf(w, "blocks: %d under-replicated, %d missing, %d re-replications in flight\n",
		j.UnderReplicatedBlocks, j.MissingBlocks, j.PendingReplications)
	return nil
}

func newNodesCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the storage nodes with their liveness, as the leader sees them",
		Long: `List the registered storage nodes (replicated) with the leader's view of
each (soft state, rebuilt after a leader change): state (live: heard from
within the stale interval and not failed in gossip; stale; dead: silent past
the dead interval, its blocks re-replicated elsewhere), its gossip state when
it joined the coordinators' gossip (node serve --join), time since the last
heartbeat, whether a full block report arrived in this term, replicas
reported, capacity and free space, and the latest cache report (blocks
cached, bytes cached / cache capacity). In safe mode the leader deletes and
re-replicates nothing until the nodes have reported.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.Nodes(ctx)
				if err != nil {
					return err
				}
				j := toNodesJSON(r)
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, j)
				}
				return writeNodes(w, j)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	cmd.AddCommand(newNodesShutdownCmd())
	return cmd
}

func newNodesShutdownCmd() *cobra.Command {
	var o *clientOpts
	var restart bool
	cmd := &cobra.Command{
		Use:   "shutdown NODE [--restart]",
		Short: "Shut a storage node down, or down for a quick restart (HDFS dfsadmin -shutdownDatanode)",
		Long: `Ask a storage node (a node id from coord nodes, or its registered gRPC
host:port) to shut down, through a coordinator: it checks the caller (an
admin, with ACLs) and calls the node, which with TLS takes that call from
coordinators only. The command returns once the shutdown has begun;
starting the node again is up to you or its supervisor.

With --restart (HDFS's "upgrade"), writers with an open pipeline through the
node get an out-of-band NODE_RESTARTING ack and wait for it (SDK
NodeRestartTimeout, 30 s by default) instead of dropping it, and each
replica being written gets a restart marker: a node started again within its
--restart-replica-expiry (50 s by default) reloads those replicas RBW, and
the writers resume with a pipeline recovery on the same nodes. Without
--restart, or when the node is back too late, its writers drop it and its
unfinished replicas come back RWR for block recovery.`,
		Example: `  coord nodes shutdown node2 --restart   # then start node2 again within 50 s
  coord nodes shutdown 127.0.0.1:7401`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.ShutdownNode(ctx, args[0], restart); err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Node       string `json:"node"`
						ForRestart bool   `json:"for_restart"`
					}{args[0], restart})
				}
				what := "shutting down"
				if restart {
					what = "shutting down for a restart"
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %s is %s\n", args[0], what)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&restart, "restart", false, "shut down for a quick restart: writers wait for the node and its replicas being written stay RBW")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
