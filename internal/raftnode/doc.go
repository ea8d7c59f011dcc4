// Package raftnode is one member's Raft: it chooses and opens the log and
// stable store (raft-wal, the default, or raft-boltdb/v2; never switching
// a data dir's backend silently), keeps the WAL's segments zeroed ahead of
// use (walzero.go), opens the file snapshots and the TCP transport with its
// cluster-id handshake (internal/raftnet), and starts hashicorp/raft over
// the state machine it is given. Over that it offers what a coordinator
// asks of Raft beyond the raft.Raft handle: bootstrap, whether this member
// was removed (its own log's configuration history), the batched
// leadership check of linearizable reads (VerifyLeader), and Await, the
// wait on a Raft future that also watches shutdown.
//
// # What it does not own
//
// The leader's loops (self-registration, log format upgrades, the
// automatic trim, the journal batcher) stay in internal/coordserver: each
// of them proposes commands of the replicated log format and reads the
// state machine, which is the server's business, not Raft's. This package
// knows nothing of the commands it replicates.
//
// # What it may import
//
// hashicorp/raft and its stores, internal/raftnet, internal/durable and
// internal/logging. No gRPC, no state machine, no API.
package raftnode
