// Package nodeserver wires one Logbook storage node: the replica dataset
// (package replica) over its volumes, the DataNode gRPC service
// (api/logbookv1/node.proto) and the http endpoints (/metrics, /healthz).
// `node serve`, the in-process tests and the benchmarks use this one
// wiring, plus the coordinator link and, with Config.Join, the
// coordinators' gossip (gossip.go). The client side of the pipeline
// is package blockio. Comments cite docs/design.md as "design §…" (its
// rules for replicas and recovery, §R).
//
// # The write pipeline (WriteBlock)
//
// A client opens WriteBlock on the first node with a WriteSetup naming the
// rest of the pipeline as targets. Each node, in order:
//
//  1. validates the setup (pool id, block id and GS > 0, the stage's GS and
//     length rules, at most 16 targets of at most 256 bytes, a client name
//     of at most 256 bytes) — a refusal is the stream's status, nothing is
//     touched;
//  2. runs the stage's replica operation (the table below, design §R5.1);
//  3. opens WriteBlock to targets[0] with targets[1:], waits for its setup
//     ack (bounded by Config.SetupTimeout), and acks the setup upstream
//     (seqno -1) with its own status followed by the downstream ones.
//
// The stages and their replica operations:
//
//	CREATE              CreateRbw (space reserved: expected_length or the block size)
//	APPEND              Append(new_gs, expected length = min_bytes_rcvd)
//	APPEND_RECOVERY     RecoverAppend(new_gs, min_bytes_rcvd)
//	STREAMING_RECOVERY  RecoverRbw(new_gs, min_bytes_rcvd, max_bytes_rcvd)
//	CLOSE_RECOVERY      RecoverClose(new_gs, min_bytes_rcvd); no packets follow
//	TRANSFER_TEMPORARY  CreateTemporary(not a transfer); last packet: finalize
//	TRANSFER_RBW        CreateTemporary(transfer); last packet: ConvertTemporaryToRbw
//	TRANSFER_FINALIZED  CreateTemporary(transfer); last packet: finalize
//
// Then per packet: the receiver checks it (consecutive seqnos, offset a
// multiple of 512, at most 64 KiB, one CRC32C per chunk), verifies every
// checksum, forwards it downstream, writes it (the replica skips resent
// bytes already on disk after checking they match) and fsyncs it if the
// packet asks (hsync). The responder waits for the downstream ack of the
// same seqno (bounded by Config.AckTimeout), then advances bytesAcked —
// the visible length — to the packet's end, finalizes (or converts) the
// replica on the last packet, and acks upstream. So an ack means every
// node downstream has the bytes and shows them to readers (hflush), and
// has fsynced them when asked (invariant 6: no durable write is acked
// before its fsync).
//
// # Failures
//
// A failing node sends one last ack for the packet (or setup) at hand
// whose statuses run from itself down to the first failed node, then ends
// its stream with an error status: the node's own error (mapped by kind,
// errors.go) or Aborted/DOWNSTREAM_FAILED. A node whose downstream stream
// breaks without a status (the node died) reports that node as Unavailable.
// The client takes the first non-OK status as the bad node; a stream that
// breaks with no ack charges node 0. A replica's writer that a recovery
// stops (RecoverRbw, InitReplicaRecovery, a transfer replacing it) ends its
// stream with Aborted/WRITER_STOPPED. A failed stream leaves the replica in
// its state (RBW or TEMPORARY) for the client's pipeline recovery or the
// coordinator's block recovery.
//
// # Shutdown for restart
//
// ShutdownForRestart (the ShutdownNode RPC with for_restart; HDFS's
// shutdown for upgrade, design §R1.4 and §R5.3) first refuses new client
// pipelines (Unavailable, NODE_RESTARTING; transfers are not client
// pipelines); every open one then sends its writer an out-of-band ack
// (seqno -2, this node's status Unavailable/NODE_RESTARTING) and ends.
// Upstream nodes relay it like any failing ack (the writer sees it with
// the next packet's ack, or at once when this node is the first). Once
// those streams ended (at most 5 s), each replica they were writing gets a
// restart marker expiring Config.RestartReplicaExpiry (50 s) from now
// (replica.Dataset.WriteRestartMarker), and the node closes as Close does.
// Started again before the expiry, it reloads those replicas RBW, and the
// writers, which wait for the node (client Config.NodeRestartTimeout),
// resume with a streaming recovery on the same nodes. After the expiry
// they come back RWR: the writer's RecoverRbw is refused (NON_RBW_REPLICA)
// and it drops the node. A second ShutdownNode is FailedPrecondition
// (SHUTTING_DOWN); Run returns once a requested shutdown is done, and
// RestartRequested tells a supervisor (coord dev) to start the node again.
//
// # Reads and transfers
//
// ReadBlock sends whole chunks from the chunk boundary at or below the
// offset up to the visible length at open, each with its checksum, after
// verifying it: a corrupt replica ends the read with DataLoss and is
// reported through Config.OnBadBlock (as the scanners' findings are).
// TransferBlock reads the visible bytes (or a prefix) the same way and
// writes them through a WriteBlock pipeline with a transfer stage; a
// prefix that ends inside a chunk is sent with that chunk's checksum
// recomputed.
//
// # Coordinator link
//
// With Config.CoordEndpoints set (coordlink.go) the node speaks NodeLink
// (api/logbookv1/fs.proto) to the coordinators; without, it runs
// standalone. Any member will do: followers forward to the leader, and a
// call that fails with Unavailable (down, NOT_LEADER) moves on to the next
// endpoint, with a bounded backoff after a round over all of them. One
// goroutine, in order:
//
//  1. subscribes to the dataset's changes, then Register (id, advertised
//     addresses, storage ids, an instance id drawn per process start)
//     followed by a full BlockReport of Config.BlockPool (pending changes
//     are dropped first: the report covers them);
//  2. every Config.HeartbeatInterval a Heartbeat with the volumes'
//     capacity, used, free (available) bytes and failed flag, and the
//     cache report (Config.MaxLockedMemory, bytes cached, the cached
//     replicas' ids, at most logbookv1.MaxCacheReportBlocks);
//  3. as changes queue, IncrementalReport batches (RECEIVING, RECEIVED,
//     DELETED); a queue overflow or a failed send is replaced by a full
//     report;
//  4. runs the commands of every reply: SendFullReport, ReRegister
//     (register, then a full report; a NODE_NOT_REGISTERED refusal does the
//     same), Invalidate (Dataset.Invalidate), Transfer (the TransferBlock
//     path, TRANSFER_FINALIZED to the targets), RecoverBlock, Cache and
//     Uncache (coordlink_cache.go: one worker caches the queued replicas
//     in turn through Dataset.Cache, at the command's GS only, then
//     heartbeats at once; Uncache releases a replica and drops it from the
//     queue).
//
// Transfers and recoveries run as tasks beside the loop: at most
// linkMaxTransfers and linkMaxRecoveries at once (more are dropped, the
// coordinator re-sends them, and the next task to end asks for a heartbeat
// at once to get them), and a command whose task (block + recovery id, or
// block + targets) is running is ignored. Close stops the link and waits for its tasks first.
//
// The recovery primary (primary.go, design §R4.1) calls InitReplicaRecovery
// on every location (its own dataset directly, the others through their
// DataNode service), leaserecovery.PlanRecovery, UpdateReplicaUnderRecovery
// on the participants (truncate to the plan's length, GS := recovery id,
// FINALIZED), leaserecovery.BuildCommit and CommitBlockSynchronization:
// retried while Unavailable (no leader, or a new leader still in safe mode)
// until the recovery's deadline, at least 5 s; Aborted or
// FailedPrecondition (a stale or preempted recovery id) ends it. A plan
// error (preempted, every location failed, ...) ends the attempt without a
// commit; the coordinator's attempt timeout re-drives it with a new id.
// Commands carry no pool: the link serves Config.BlockPool.
package nodeserver
