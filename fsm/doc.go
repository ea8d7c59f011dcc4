// Package fsm is Logbook's deterministic state machine: the coordinator
// metadata folded from the Raft log, in order. Comments cite docs/design.md
// as "design §…": its journal rules (§J) and its rules for replicas and
// recovery (§R).
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
// payload, proposed_unix_nanos} (fsm/fsmpb/command.proto). A committed
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
// encoded it, and it halts rather than apply it; format 3 allows the
// namespace commands (a build before it would halt on them, so they are
// refused — ErrNamespaceFormat — in entries of an older format); format 4
// allows the cache-directive ops of the namespace (add_cache_directive,
// remove_cache_directive: a format-3 build would halt on the unknown op, so
// they are refused — ErrCacheFormat — in entries of an older format);
// formats 5 and 6 change the session rules (below, "Sessions"); 6 also
// reads AppendOp/NamespaceCommand.session_established, which an older
// build ignores, so the rule starts only at the SET_FORMAT; format 7
// allows OPEN_SESSION (an older build would halt on the unknown command
// type, so it is refused — ErrSessionOpenFormat — in entries of an older
// format); format 8 allows CLOSE_SESSION (likewise refused —
// ErrSessionCloseFormat — in entries of an older format); format 9 starts
// the state machine's clock and expires idle sessions by it (below,
// "Sessions"; an older build would keep them, so it starts only at the
// SET_FORMAT); format 10 moves that clock by the leaders' measured
// elapsed time (Command.session_clock_unix_nanos) instead of their wall
// clocks (below, "Sessions"); format 11 allows SET_JOURNAL_CONFIG, the
// journal settings held by the cluster (HeldConfigFormat; refused —
// ErrJournalConfigFormat — in entries of an older format, and once the
// cluster holds them a leader's CONFIGURE_JOURNAL is refused —
// ErrJournalConfigHeld); format 12 allows ACL, the access control held by
// the cluster (AclFormat; refused — ErrAclFormat — in entries of an older
// format; below, "Access control"). This build reads
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
// session are kept (a client that never acks has its oldest dropped, and a
// retry of a dropped one gets ErrSessionResultExpired) and MaxSessions
// sessions (least recently used evicted first); sessions are part of
// snapshots. A kept result is 24 bytes in a slice ordered by request seq
// (session.go): no map, no object per result.
//
// Log format 5 changes two rules, from the SET_FORMAT to 5 on (keyed on
// the replicated format, so entries before it replay as they applied):
// all sessions together keep at most MaxKeptResults results — past it the
// least recently used session holding results loses its oldest — and a
// session records the highest request seq it dropped unacknowledged
// (dropped_through in the snapshot): a retry at or below it without a
// kept result is refused with ErrSessionResultExpired even when the
// session is no longer full. Before format 5 only a full session refused
// a retry below its oldest result, so a retry of a result dropped before a
// burst of acks could be applied twice; that rule still holds too.
//
// Log format 6 adds one more (again from the SET_FORMAT on): an op may say
// its client already had an answer the session kept (session_established;
// the SDK sets it after its first successful append or audited namespace
// op). Such an op naming a session the state machine does not hold — the
// session was evicted over MaxSessions, or a forced import replaced every
// session — is refused with ErrSessionExpired and changes nothing: it may
// be a retry of a request applied before, whose result went with the
// session, and applying it as a new session's first request would apply it
// twice (the Raft dissertation's session expiry, §6.3). The client starts
// a new session (a new client id). An op not marked established still
// starts a session, so a retry of a client's very first requests, made
// after its session was evicted and before any answer reached it, is the
// one case left that can apply twice; before format 6 every retry after an
// eviction could.
//
// Log format 7 closes that case: a client opens its session first
// (OPEN_SESSION, the dissertation's RegisterClient). The open names a new,
// empty session "<client id>@<index>" (SessionID; the index of the open's
// entry, so no two opens name the same session — a session some request
// started under that id without an open is replaced), and the client marks
// every request of it established from the first on: once the session is
// gone, every request of it is refused. Two opens by one client id (a
// restarted client, or a retried open whose first answer was lost) get two
// sessions; before opens, a client restarted with a fixed client id met its
// previous run's session, and its first requests were answered with the
// old results (their events dropped) or refused as acknowledged. The SDK
// opens a session before its first request and after SESSION_EXPIRED; an
// op not marked established still starts a session of its own id, as
// before (clients that do not open).
//
// Log format 8 lets a client end its session (CLOSE_SESSION, the
// dissertation's session close): the session and its kept results are
// forgotten at once, as an eviction would, so its later requests are
// refused; closing a session not held answers Closed=false and changes
// nothing (a retried close). The SDK closes its session in Close.
//
// Log format 9 expires a session left unused (the dissertation's session
// expiry, §6.3), so a client that exits without closing — or whose
// OPEN_SESSION answer was lost — no longer holds its session until it is
// the least recently used of MaxSessions. The state machine keeps a clock:
// the latest Command.proposed_unix_nanos of the entries applied, which
// never moves back (a new leader's clock may be behind). Every member reads
// the same times from the same entries, so all expire the same sessions at
// the same index. Each use of a session records the clock; before each
// entry is applied, the sessions unused for longer than the replicated
// idle timeout (JournalConfig.session_idle_timeout_seconds, which a
// leader replicates from coord serve --session-idle-timeout, default one
// hour, and from log format 11 the cluster holds, see HeldConfigFormat; at most MaxSessionIdleTimeout; 0: none expire by time) are
// forgotten with their results, least recently used first — O(1) per
// entry plus the sessions expired. A later request of an expired session
// is refused with ErrSessionExpired as after an eviction. An OPEN_SESSION
// answers the timeout (OpenSessionResult.IdleTimeout), so a client can
// open a new session before its own expires; the SDK does so once its
// session sat unused for half of it.
// The SET_FORMAT to 9 starts the clock at its own proposal time and marks
// every session used then, so members that replayed the older entries and
// members that restored an older snapshot agree; before it the clock, the
// last uses and the timeout stay 0 (a CONFIGURE_JOURNAL's timeout is
// ignored, as a build before 9 ignores it) and the digest is unchanged.
//
// Log format 10 (LeaderClockFormat) takes the clock from each entry's
// Command.session_clock_unix_nanos instead of its proposal time. A leader
// stamps it with the clock it found applied when its term began (or
// later, if the applied clock is ever ahead) plus what its own monotonic
// clock measured since (internal/coordserver, leaderClock): the time
// between two entries is what a leader measured, not the difference of
// two members' wall clocks, so a leader whose wall clock runs an hour
// ahead no longer moves the clock an hour forward for good, expiring
// every session unused for less than the timeout. Time no leader measured
// (an election; an idle spell before a leader change) is not counted: a
// session may outlive the timeout by it, never expire early. Nothing else
// changes: the snapshot, the digest and the stamps' rules above.
//
// # Access control
//
// COMMAND_TYPE_ACL carries one AclCommand (acl.proto): the one-time
// bootstrap (the first token, its user bound to the built-in admin role),
// a role put or deleted (not reader, writer or admin; not while bound), a
// role bound to or unbound from a user, a token created or revoked, or the
// record of a call some member refused (logbook.acl.denied) or of an admin
// operation some member carried out (logbook.admin), or a block key
// rolled (AclRollBlockKeyOp: the HMAC key of block access tokens, its id
// above every held key's; the roll drops the keys expired at its time and
// the oldest past MaxBlockKeys, and appends no event, the key being
// secret). Tokens are held by
// accessor with the SHA-256 of their secret only: the leader makes the
// secret and hands it to the caller, and no entry or snapshot ever holds
// it. Each accepted command appends one audit event ("logbook.acl.<op>",
// "logbook.admin" for an admin operation's record) whose payload is the
// command with the hashes cleared and whose actor is the caller as the
// leader authenticated it; a refusal (a sentinel with a Kind) changes
// nothing. The roles and bindings build an internal/authz Policy, which
// FSM.ACL publishes after every apply or restore that changed them, so a
// member authorizes a call with one atomic load and a map lookup. Token
// expiry is checked by the member that answers, by its clock: a time
// rule of the edge, not of the state machine. Snapshots hold the access
// control as one AclState record after the cache directives (snapshot
// format 6, written only when there is some); the digest hashes it once
// it is not empty, so states without any hash as before.
//
// # Namespace
//
// COMMAND_TYPE_NAMESPACE carries one NamespaceCommand (namespace.proto): an
// op on the replicated namespace, optionally in a session. The namespace is
// a flat map of absolute, clean paths to FileRecords (directories are
// implicit: a directory exists while a file lies under it, and no path is
// both), BlockRecords by id, NodeRecords by id, and two counters: the next
// block id (from FirstBlockID, 2^30) and the next generation stamp (from
// FirstGS, 1000). Every GS handed out — a new block, an append, a pipeline
// recovery, a recovery id — is a fresh value of the one GS counter, so GS
// only grows per block (invariant 3) and a recovery id is never reused, a
// restore included. Leases are the files' lease_holder fields (holder →
// files is an index); renewal times, liveness and reported replicas are
// leader soft state and never enter the state machine (design §R9.6): what the
// apply needs of them travels in the entry.
//
// Ops, their results (NamespaceResult) and refusals (sentinels with a Kind,
// KindOf; a refusal changes nothing: no state, no session, no event):
//
//	create_file      grants the lease; overwrite replaces a closed file (its
//	                 blocks in removed_blocks). InvalidArgument (path,
//	                 replication 1..16, block size a multiple of 512 up to
//	                 1 GiB, client name), AlreadyExists (ErrFileExists,
//	                 ErrIsDirectory), FailedPrecondition (ErrParentNotDirectory;
//	                 an open file: ErrAlreadyLeaseHolder, ErrFileBeingWritten),
//	                 Unavailable (ErrRecoveryInProgress).
//	add_block        commits previous (the client's id, GS, length) and
//	                 allocates the next block on the leader's targets (1..
//	                 replication distinct registered nodes). Every block before
//	                 previous must be COMPLETE (ErrNotReplicatedYet), at most
//	                 MaxBlocksPerFile (OutOfRange).
//	complete_file    commits the last block and closes the file only if every
//	                 block is then COMPLETE; otherwise ErrNotReplicatedYet and
//	                 nothing changes (the client retries). A retry on a closed
//	                 file with the same last block answers unchanged.
//	append_file      reopens a closed file; a partial last block goes back to
//	                 UNDER_CONSTRUCTION with a fresh GS (block in the result).
//	delete_file      a file, or recursively a directory (ErrDirectoryNotEmpty
//	                 without recursive), at most MaxDeleteBlocks blocks; the
//	                 removed blocks and their locations are returned for
//	                 invalidation.
//	abandon_block    the holder's last UNDER_CONSTRUCTION block.
//	update_block_for_pipeline  allocates a GS (new_gs); the block keeps its
//	                 own until update_pipeline.
//	update_pipeline  old_gs must be the block's (else stale), new_gs newer and
//	                 already allocated, the length not shrinking.
//	start_recovery   UNDER_RECOVERY with a fresh recovery id, primary (an
//	                 expected location, or none), attempt, deadline, tried
//	                 primaries; the lease goes to new_holder or
//	                 RecoveryLeaseHolder. Re-driving before the deadline (by
//	                 proposed time) is ErrRecoveryInProgress; after it the new
//	                 id preempts the old one.
//	commit_block_sync  every check of design §R4.2 at apply time; a recovery id
//	                 that is not the block's current one is ErrStaleRecovery
//	                 (Aborted) and changes nothing (invariant 5); a retry of
//	                 an applied commit answers unchanged. close_file: the block
//	                 is COMPLETE at GS = recovery id, the file closed.
//	release_lease    closes an open file that needs no recovery (all blocks
//	                 COMPLETE, or an empty last block, which is removed);
//	                 holder must still hold the lease. ErrRecoveryNeeded,
//	                 ErrRecoveryInProgress, ErrNotReplicatedYet otherwise.
//	register_node    a registered id may be re-registered by the same
//	                 instance (instance_id) from any address, or from the same
//	                 gRPC and gossip addresses; anything else is
//	                 ErrNodeIDHeld ("node id held by another node").
//	add_cache_directive  (log format 4) a directive for the file at path
//	                 with an id from the directive counter (from 1, never
//	                 reused): InvalidArgument (path; replication 0, above the
//	                 file's or above MaxCacheReplication), NotFound (no file at
//	                 path), AlreadyExists (ErrDirectiveExists: one directive
//	                 per path), ResourceExhausted (MaxCacheDirectives). A
//	                 directive names a path: it outlives a delete of the file.
//	remove_cache_directive  (log format 4) by id; NotFound otherwise.
//
// The lease and recovery rules are leaserecovery's pure functions, re-run
// at apply time on FSM state and the entry's proposed time: CheckCommit,
// DecideRelease (release_lease and start_recovery), BeginRecovery,
// CheckUpdateBlockForPipeline, CheckUpdatePipeline, CheckCommitBlock,
// CanClose, CanComplete. Their refusals keep their Kind and Reason and are
// wrapped in this package's sentinel (errors.Is matches both).
//
// COMMITTED and COMPLETE. The state machine sees no replica reports. A
// client's commit makes a block COMMITTED; it becomes COMPLETE when an op
// lists it in replicated_blocks — the leader's word that it saw the block
// minimally replicated at its GS and length (add_block, complete_file,
// release_lease, commit_block_sync carry the list) — or when a recovery
// commit closes the file (the recovered block is COMPLETE whatever its
// replica count, design §R9.5). A file closes only with every block COMPLETE
// (HDFS's num-committed-allowed = 0), so a closed file never holds an
// incomplete block.
//
// Sessions. A namespace command with a client id shares the AppendOp
// session table: an accepted (client_id, request_seq) records the seq of its
// audit event, and a retry is answered (Duplicate) with the result decoded
// from that event — so results need no second table, and a retry whose
// event was trimmed gets ErrSessionResultExpired. A refused request is not
// recorded: it changed nothing, so its retry is evaluated afresh.
//
// Audit trail. Every accepted op that changes something appends one journal
// event, with seq, segment accounting and the op's client id and request
// seq, of type EventCreate ... EventCacheRemoved ("logbook.fs.*",
// "logbook.recovery.*", "logbook.lease.released", "logbook.node.registered",
// "logbook.cache.added", "logbook.cache.removed")
// whose payload is a NamespaceEvent{op, result, unix_nanos}: enough to
// rebuild every recovery (attempts, primaries, deadlines, chosen length,
// targets, reason) from the journal. Refused and unchanged ops write none.
// From the first audit event on (State.AuditFromSeq) a client append whose
// event type starts with ReservedEventPrefix is refused
// (ErrReservedEventType, which matches ErrInvalidEvent); entries before it
// replay as they applied, since an earlier build accepted such types and
// members must not diverge over a log written before the upgrade. Every
// "logbook." event at or after AuditFromSeq is the state machine's own.
//
// Removal feed. Each member's FSM keeps the ids of the blocks its state
// removed (a delete, an abandoned block, an empty last block a recovery
// dropped) in a bounded feed, State.RemovedBlocks, which the leader reads
// to have their replicas invalidated at the nodes' next heartbeats. It is
// local bookkeeping, not state: not hashed, not in snapshots; a restore
// marks what came before it as lost (the leader's sweep of every replica
// still finds those).
//
// Upgrade. A build without the namespace halts on a NAMESPACE entry
// (unknown command type): the leader must not propose one until every voter
// runs a build with it. The state digest of a state without a namespace is
// unchanged, so checkpoints agree across builds until then.
//
// # Snapshot format, version 5
//
//	magic       8 bytes  "LBKSNAP\n"
//	version     uint32   big endian, 5
//	header      uvarint length + SnapshotHeader (protobuf)
//	records     uvarint length + SnapshotRecord, repeated:
//	              event_count events in seq order, then
//	              session_count sessions in least-recently-used order, then
//	              member_count members sorted by id, then
//	              segment_count segments oldest first, then
//	              consumer_count consumers sorted by name, then
//	              file_count files sorted by path, then
//	              block_count blocks sorted by id, then
//	              node_count nodes sorted by id, then
//	              directive_count cache directives sorted by id
//	crc         uint32   big endian CRC32C (Castagnoli) of all bytes above
//
// From log format 9 on, the header carries the state machine's clock
// (session_clock_unix_nanos), the journal config its session idle timeout
// and each session its last use (last_used_unix_nanos, never decreasing
// in the records' order and never past the clock); below log format 9 all
// are 0 (a stream with one is corrupt), so a format-5 stream written by a
// build before log format 9 reads the same. A stream of a state at a log
// format this build does not read is refused with ErrSnapshotVersion.
//
// Format 4 is the same layout without sessions' dropped_through (read as
// 0; a format-4 stream with one is corrupt); format 3 ends after the
// nodes and has no directive counter (read as no
// directives, next id 1); format 2 ends after the consumers and has no
// namespace counters; format 1 also has no segments or consumers (rebuilt
// from the events). All are still read. The state digest hashes the
// directives only once one was ever added, so it is unchanged for a state
// without them. Restore reads the whole stream and verifies the checksum and
// that the namespace records fit together (every block owned by the file
// listing it, counters above every id and GS) before it replaces the state;
// a stream of a newer version is refused with ErrSnapshotVersion.
//
// Event records, nearly all of a snapshot, are written and read by hand
// (snapshotcodec.go): the bytes are those of proto's deterministic marshal
// (TestEventRecordMatchesProto), and a record the hand decoder does not
// take goes to proto.Unmarshal (FuzzDecodeEventRecord), so the format is
// protobuf's and any build reads any other's snapshots.
package fsm
