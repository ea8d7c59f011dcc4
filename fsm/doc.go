// Package fsm is Logbook's deterministic state machine: the coordinator
// metadata folded from the Raft log, in order.
//
// # Layers
//
// State applies one decoded Command at a Raft index. It performs no I/O and
// reads no clock or randomness; time enters only inside commands
// (Command.proposed_unix_nanos). FSM adapts State to raft.FSM and
// raft.BatchingFSM and serialises readers against Apply. The same State
// serves offline tools and tests without Raft.
//
// # Command envelope
//
// Every log entry Logbook writes is a protobuf Command{version, type,
// payload, proposed_unix_nanos} (api/logbookv1/command.proto). A committed
// entry whose envelope does not decode, whose version this build does not
// know, or whose type is unknown halts the state machine: every later Apply
// returns ErrHalted and the owner stops the coordinator loudly. Guessing
// would let members diverge (invariant 2).
//
// # Log formats
//
// The envelope version is the log format. Format 1 is the original; format
// 2 adds a CRC32C to every journal event of an APPEND (EventCRC: type, a
// zero byte, payload), which every member checks when it applies the entry
// — a mismatch means this member's copy was damaged after the leader
// encoded it, and it halts rather than apply it. This build reads
// MinCommandVersion..CommandVersion. Proposers write the replicated format
// (State.LogFormat); the leader raises it with a SET_FORMAT entry once
// every voter has registered a build that reads the new format (Member.
// max_log_format), the Raft counterpart of Ceph's journal reformat: no
// entry is rewritten in place, entries before the boundary stay in their
// format, snapshots record the format, and after the next snapshot and
// compaction no old-format entry remains. The format never goes back
// (ErrFormatDowngrade); a SET_FORMAT or entry newer than this build halts
// it with "requires an upgrade".
//
// # Sessions (exactly-once appends)
//
// An AppendOp carrying a client id is deduplicated by (client_id,
// request_seq). The session keeps the result of each request until the client
// reports it answered (acked_seq); a retry of a kept request returns the kept
// result and appends nothing. At most MaxResultsPerSession results per
// session and MaxSessions sessions are kept (least recently used evicted
// first); sessions are part of snapshots.
//
// # Snapshot format, version 1
//
//	magic       8 bytes  "LBKSNAP\n"
//	version     uint32   big endian, 1
//	header      uvarint length + SnapshotHeader (protobuf)
//	records     uvarint length + SnapshotRecord, repeated:
//	              event_count events in seq order, then
//	              session_count sessions in least-recently-used order, then
//	              member_count members sorted by id
//	crc         uint32   big endian CRC32C (Castagnoli) of all bytes above
//
// Restore reads the whole stream and verifies the checksum before it replaces
// the state; a stream of a newer version is refused with ErrSnapshotVersion.
package fsm
