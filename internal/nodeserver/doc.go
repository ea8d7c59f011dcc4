// Package nodeserver wires one Logbook storage node: the replica dataset
// (package replica) over its volumes, the DataNode gRPC service
// (api/logbookv1/node.proto) and the http endpoints (/metrics, /healthz).
// `node serve`, the in-process tests and the benchmarks use this one
// wiring. The coordinator link (registration, heartbeats, block reports)
// and gossip come later: the gossip address is reserved and advertised
// only. The client side of the pipeline is package blockio.
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
//  2. runs the stage's replica operation (the table below, spec §5.1);
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
package nodeserver
