// Package coordserver is one Logbook coordinator: it opens the data
// directory and the Raft node (internal/raftnode) over the state machine
// (fsm), joins gossip (membership), starts the block manager
// (internal/blocks) and serves the gRPC API and the HTTP endpoint
// (internal/httpserve). `coord serve`, `coord dev`, the in-process cluster
// tests and the compose images all use this one wiring.
//
// # What it owns
//
//   - The RPC layer: one file per gRPC service, each a service type
//     (svc_journal*.go journalService, svc_cluster.go clusterService,
//     svc_namespace.go namespaceService, svc_peer.go peerService,
//     svc_nodelink.go nodeLinkService). Handlers check their input against
//     the bounds, convert between the API's messages and the format
//     records (apiconv.go), and call the journal's submit path, Raft or
//     the block manager; they decide nothing about blocks themselves.
//   - Routing: every RPC's (logbook.v1.route) option says whether any
//     member answers it, whether a follower forwards it to the leader, or
//     whether only the leader serves it (routes.go, interceptors.go); a
//     test checks every RPC has one.
//   - Errors: errors.go maps the domain's and Raft's errors to gRPC codes
//     with their ErrorInfo reasons, in one place.
//   - The journal's submit path: the leader's batcher into Raft and the
//     retention quota (submit.go), a follower's forwarding to the leader
//     in ordered streams (forwarder.go), commands proposed one at a time
//     (apply.go).
//   - The leader's loops and the member's upkeep: self-registration,
//     bootstrap and removal (leader.go), the read index and readiness
//     (readindex.go), log format upgrades (logformat.go), the automatic
//     trim and configuration checks (journal_upkeep.go), startup replay
//     (startup.go).
//   - Cluster: coordinators and storage nodes in this process, with the
//     Raft network between coordinators cut at will (cluster*.go,
//     faultnet.go). coord dev and every in-process cluster test, this
//     package's own among them, run on it; that is why it lives here.
//
// Raft itself (stores, snapshots, transport, bootstrap, the leadership
// check of reads) is internal/raftnode's: this package holds the loops
// that propose commands of the replicated log format, which Raft knows
// nothing about.
//
// # What it may import
//
// Everything below it: the domain packages, the block manager, the Raft
// node, the generated API and cluster-internal messages, grpc-go and
// hashicorp/raft, and internal/nodeserver for Cluster's storage nodes
// only. Nothing imports it but cmd/coord and tests.
//
// Comments cite docs/design.md as "design §…": its journal rules (§J) and
// its rules for replicas and recovery (§R).
package coordserver
