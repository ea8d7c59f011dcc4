// Package blocks is the coordinator's block manager: the Raft leader's
// soft state of the file system and the loops that act on it, the
// analogue of HDFS's BlockManager, DatanodeManager and LeaseManager
// monitors. It owns
//
//   - the storage nodes as this leader hears of them: heartbeats,
//     liveness (stale, dead, gossip), storages, cache reports, the work
//     queued for each node's next heartbeat reply (state.go, gossip.go);
//   - the replicas they report, in full and incrementally, and the
//     block → holders index (holders.go), the invalidation of replicas of
//     deleted or stale blocks (nodes.go);
//   - re-replication and excess replicas (replication.go), corrupt
//     replicas, cache directives' cached replicas (cache.go);
//   - leases: renewals, the hard-limit monitor, soft-limit takeovers and
//     the release or recovery of a dead writer's file (lease.go); target
//     choice for new blocks and pipelines (files.go);
//   - safe mode: a new leader judges nothing until the nodes reported.
//
// Nothing here is replicated. What must be durable goes through the
// Proposer as a namespace op of the state machine (fsm), whose state the
// manager reads but never writes; a new term starts the soft state over
// (design §R9, rules 6 and 12).
//
// # What it may import
//
// The domain packages (fsm and its messages fsm/fsmpb, leaserecovery,
// membership) and the Prometheus client for its metrics. No gRPC, no
// Raft: the Raft node is behind Leadership, proposals behind Proposer,
// and the RPC layer (internal/coordserver) converts its messages to and
// from the types here and maps the errors in errors.go to gRPC codes.
// tests/structure keeps it so.
//
// # Locking
//
// One mutex guards the soft state (Manager.locked). It is held for
// bounded work only: reports, sweeps and monitor cycles take it a chunk
// at a time (Config.LookupChunk), because every node's heartbeat waits
// for it. The state machine's read lock (fsm.FSM.View) is never taken
// while it is held.
package blocks
