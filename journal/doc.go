// Package journal is Logbook's metadata journal: Ceph's MDLog semantics on
// the Raft log. The replicated half (segments, consumers, trim, reset) lives
// in the state machine (package fsm); this package holds the submit path.
//
// # Submit path and group commit
//
// Batcher takes everything queued, bounded by ops and bytes, into one Raft
// entry, with at most InFlight entries (default 1) awaiting commit. When an
// entry commits, the next one lingers (at most Linger, default 500µs) until
// as many ops are queued as the committed entry held: its clients, just
// answered, are about to send their next appends, and without the wait they
// would miss the next entry and sit out a whole commit (PostgreSQL's
// commit_delay plays the same part). An entry of one op never makes the next
// wait. An append is safe once its entry is committed by a quorum and
// applied; seqs are assigned at apply, contiguous from 1. Followers forward
// appends to the leader in batches, through the same Batcher with a
// forwarding sink (so a follower's next forward lingers the same way) and
// two batches in flight on one ordered stream: the sink's Start sends in
// queue order and the leader queues batches in arrival order, so they keep
// their order with more than one in flight (Sink.Start must keep it).
//
// # Positions
//
//	trimmed_pos  first retained seq; every seq below it is gone (1 until a trim)
//	expire_pos   every seq below it lies in an expired segment
//	safe_pos     last committed and applied seq
//	write_pos    leader: safe_pos plus events handed to Raft and not yet
//	             applied; follower: its safe_pos
//
// with trimmed_pos <= expire_pos <= safe_pos+1 at all times.
//
// # Segments, expiry and trim
//
// Events are grouped in segments that roll after EventsPerSegment events or
// SegmentBytes bytes. The thresholds, like the trim bounds MaxSegments and
// MaxEvents and the session idle timeout, are the cluster's, replicated so
// every member rolls at the same seq: from log format 11 the cluster holds
// them (the first leader at 11 seeds them from its flags once; coord
// journal config set changes them, a leader change does not), before it
// each leader replicates its own flags. A coordinator given other values
// warns in coord status (docs/operations.md, "The journal's settings"). A
// segment is open until it
// rolls, then sealed; it is expiring once every registered consumer has
// acknowledged past its last seq, and expired once a snapshot also covers its
// last Raft index. Trim is a replicated command (the analogue of the MDLog
// header write) that drops expired segments, oldest first, never the open
// one. The leader proposes it when asked (coord journal trim: every
// expired segment, then a snapshot so that the files on disk follow it) and
// when the journal is over MaxSegments / MaxEvents: then only the oldest
// segments beyond those limits go, as in MDLog's trim walk, so the journal
// keeps its limit's worth of history. Either way the leader takes a
// snapshot first if the segments to drop are not yet covered by one. A
// crash at any of those steps leaves the trim either entirely applied (its
// entry committed) or not at all, and replay from snapshot + log rebuilds
// the same journal on every member (internal/coordserver
// TestTrimCrashAtEachStep).
//
// # Where consumers read from: retained state, not the Raft log
//
// Consumers (Read, Tail) read events from the state machine's retained
// events, never from the Raft log. Raft log compaction is therefore free to
// follow its own rules (SnapshotThreshold, TrailingLogs): a snapshot carries
// every retained event, so a member restored from a snapshot serves the same
// reads as one that applied the whole log. The price is memory: retained
// events live in memory until trimmed, packed in blocks of up to 256 events
// (fsm/eventlog.go): about the payload plus ~35 bytes per event, bounded by
// the segment limits and by consumers'
// progress (a lagging consumer raises the "behind on trimming" warning once
// it holds more than twice MaxSegments), and in all by the leader's
// retention quota (coord serve --journal-max-retained-bytes) on the sealed
// segments, the open one on top: at or past it, new appends are refused
// with ResourceExhausted JOURNAL_FULL before they reach the log, as etcd
// refuses writes past its backend quota, and the automatic trim drops
// expired segments until they are under it.
//
// # Reads and tail
//
// Read(from, max) is linearizable by default (ReadIndex through the leader)
// or stale. Tail(from) streams from this member's applied state: gapless and
// in order, with idle heartbeats; a position below trimmed_pos fails with
// OutOfRange naming the earliest retained seq, never a silent skip.
package journal
