// Package coordserver is one Logbook coordinator: it opens the data
// directory and the Raft node (log and stable store in raft-wal or
// raft-boltdb/v2, file snapshots, a TCP transport with a cluster-id
// handshake) over the state machine (fsm), joins gossip (membership),
// starts the block manager (internal/blocks) and serves the gRPC API and
// the HTTP endpoint (internal/httpserve). `coord serve`, `coord dev`, the
// in-process cluster tests and the compose images all use this one
// wiring.
//
// # What it owns
//
//   - The RPC layer: one service type per gRPC service (journalService,
//     clusterService, namespaceService, peerService, nodeLinkService).
//     Handlers check their input against the bounds, convert between the
//     API's messages and the format records (apiconv.go), and call the
//     journal's submit path, Raft or the block manager; they decide
//     nothing about blocks themselves.
//   - Routing: every RPC's (logbook.v1.route) option says whether any
//     member answers it, whether a follower forwards it to the leader, or
//     whether only the leader serves it (routes.go, interceptors.go); a
//     test checks every RPC has one.
//   - Errors: errors.go maps the domain's and Raft's errors to gRPC codes
//     with their ErrorInfo reasons, in one place.
//   - The Raft side: bootstrap and membership (leader.go), the leader's
//     journal batcher and the followers' forwarding (forward_stream.go),
//     the read index (peers.go, journal_service.go), log format upgrades,
//     the automatic trim, startup replay (startup.go), the WAL's zeroed
//     segments (walzero.go).
//
// # What it may import
//
// Everything below it: the domain packages, the block manager, the
// generated API and cluster-internal messages, grpc-go and hashicorp/raft.
// Nothing imports it but cmd/coord and tests.
//
// Comments cite docs/design.md as "design §…": its journal rules (§J) and
// its rules for replicas and recovery (§R).
package coordserver
