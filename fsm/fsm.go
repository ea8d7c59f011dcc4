package fsm

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Log formats (command envelope versions). This build reads
// MinCommandVersion..CommandVersion and writes the replicated format
// (State.LogFormat), which the leader raises with a SET_FORMAT command once
// every voter reads the new one.
const (
	// MinCommandVersion is the original format.
	MinCommandVersion = 1
	// CommandVersion is the newest format this build reads and writes:
	// 2 adds a CRC32C to every journal event of an APPEND; 3 adds the
	// namespace commands (files, blocks, leases, nodes), which a build
	// before 3 cannot apply — so they are accepted only in format 3
	// entries, written once every voter reads format 3; 4 adds the
	// cache-directive ops of the namespace, likewise accepted only in
	// format 4 entries; 5 changes a rule of the sessions, not the entries'
	// content (see SessionFloorFormat); 6 refuses a request of an
	// established session the state machine no longer holds (see
	// SessionExpiryFormat); 7 adds OPEN_SESSION (see SessionOpenFormat);
	// 8 adds CLOSE_SESSION (see SessionCloseFormat); 9 expires sessions
	// left unused (see SessionIdleFormat); 10 moves the sessions' clock by
	// the leaders' monotonic clocks instead of their wall clocks (see
	// LeaderClockFormat); 11 adds SET_JOURNAL_CONFIG, the journal settings
	// held by the cluster (see HeldConfigFormat); 12 adds ACL, the access
	// control held by the cluster (see AclFormat).
	CommandVersion = 12

	// NamespaceFormat is the first log format whose entries may carry
	// namespace commands.
	NamespaceFormat = 3
	// CacheFormat is the first log format whose namespace commands may
	// carry cache-directive ops (add_cache_directive,
	// remove_cache_directive).
	CacheFormat = 4
	// SessionFloorFormat is the first log format (the replicated one, in
	// State, not an entry's) under which all sessions together keep at
	// most MaxKeptResults results and a session remembers the highest
	// request seq whose result it dropped unacknowledged, refusing a
	// retry at or below it (ErrSessionResultExpired). A format-4 build
	// applying entries under these rules would keep different results
	// and answer retries differently, so the rules start only at the
	// SET_FORMAT to 5, which the leader writes once every voter runs a
	// build that has them.
	SessionFloorFormat = 5
	// SessionExpiryFormat is the first log format (again the replicated
	// one) under which a request marked session_established whose session
	// the state machine does not hold is refused with ErrSessionExpired
	// instead of starting a new session: the session was evicted (over
	// MaxSessions) or replaced by a forced import, and the request may be
	// a retry of one applied before.
	SessionExpiryFormat = 6
	// SessionOpenFormat is the first log format whose entries may carry
	// OPEN_SESSION, which a build before it cannot apply: the client opens
	// its session before its first request, so every request of it is
	// marked established and none can start a session by itself.
	SessionOpenFormat = 7
	// SessionCloseFormat is the first log format whose entries may carry
	// CLOSE_SESSION, which a build before it cannot apply: a client ends
	// its session when it is done, and the state machine frees the
	// session's kept results at once instead of holding them until the
	// session is the least recently used of MaxSessions.
	SessionCloseFormat = 8
	// SessionIdleFormat is the first log format (the replicated one) under
	// which the state machine keeps a clock — the latest proposal time of
	// the entries it applied, which never moves back — and forgets a
	// session left unused for the replicated idle timeout
	// (JournalConfig.session_idle_timeout_seconds) by that clock: the
	// Raft dissertation's session expiry (section 6.3), deterministic
	// because every member reads the same times from the same entries. A
	// client that exits without closing its session no longer holds it
	// until it is the least recently used of MaxSessions. The SET_FORMAT
	// to 9 starts the clock at its own proposal time and marks every
	// session used then, so members that restored older snapshots agree.
	SessionIdleFormat = 9
	// LeaderClockFormat is the first log format (the replicated one) under
	// which the clock of SessionIdleFormat advances by each entry's
	// Command.session_clock_unix_nanos instead of its proposal time. A
	// leader stamps that from the clock it finds applied and its own
	// monotonic clock (internal/coordserver, leaderClock), so the time
	// between two entries is what the leader measured, not the difference
	// of two wall clocks: a leader whose wall clock runs an hour ahead
	// would otherwise move the clock an hour forward for good and expire
	// at once every session unused for less than the timeout (the
	// dissertation's section 6.3 accepts that; etcd's leases, timed by the
	// leader's monotonic clock, do not). What no leader measured — an
	// election, the time between the last entry of a term and the next
	// leader's first — is not counted, so sessions may live longer than
	// the timeout, never shorter. A build before 10 would keep reading
	// proposal times, so the rule starts at the SET_FORMAT to 10.
	LeaderClockFormat = 10
	// HeldConfigFormat is the first log format whose entries may carry
	// SET_JOURNAL_CONFIG, which a build before it cannot apply: the
	// cluster holds its journal settings (segment thresholds, the session
	// idle timeout, the automatic trim bounds) instead of every leader
	// replicating its own flags. The first leader at format 11 seeds them
	// from its flags (JournalConfig.held marks that it happened); after
	// that only SET_JOURNAL_CONFIG (coord journal config set) changes them,
	// so a leader change no longer does, as Ceph's central configuration
	// holds mds_log_events_per_segment for every MDS.
	HeldConfigFormat = 11
	// MaxEventsPerSegment, MaxSegmentBytes, MaxTrimSegments and
	// MaxTrimEvents bound the held journal settings (ValidJournalConfig).
	MaxEventsPerSegment = 1 << 30
	MaxSegmentBytes     = 1 << 40
	MaxTrimSegments     = 1 << 20
	MaxTrimEvents       = 1 << 40
	// MaxSessionIdleTimeout bounds the replicated idle timeout.
	MaxSessionIdleTimeout = 30 * 24 * time.Hour
	// maxSessionIdleSeconds is MaxSessionIdleTimeout as the config holds it.
	maxSessionIdleSeconds = uint64(MaxSessionIdleTimeout / time.Second)

	// MaxSessionBaseBytes bounds the client id an OPEN_SESSION names: the
	// session id, "<client id>@<index>", then fits the 128 bytes a request's
	// client id may have.
	MaxSessionBaseBytes = MaxClientIDBytes - len("@18446744073709551615")
	// MaxClientIDBytes bounds the client id (session id) a request carries.
	MaxClientIDBytes = 128
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EventCRC is the checksum log format 2 carries for an event: CRC32C of its
// type, one zero byte, and its payload.
//
// It runs for every event on every member, at propose and at apply, so it
// allocates nothing: crc32.Update's slice escapes (it is handed to an
// assembly routine through a function value), and a []byte(typ) copy would
// be made on the heap each time, so the type's bytes are read in place.
func EventCRC(typ string, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, unsafe.Slice(unsafe.StringData(typ), len(typ)))
	c = crc32.Update(c, castagnoli, zeroByte)
	return crc32.Update(c, castagnoli, payload)
}

// zeroByte separates an event's type from its payload in EventCRC; never
// written to.
var zeroByte = []byte{0}

// EncodeCommand wraps a sub-command in the envelope of the original log
// format (every build reads it).
func EncodeCommand(t pb.CommandType, sub proto.Message, proposedUnixNanos int64) ([]byte, error) {
	return EncodeCommandVersion(MinCommandVersion, t, sub, proposedUnixNanos)
}

// EncodeCommandVersion wraps a sub-command in the envelope of log format
// version. For format 2 and later it fills in the CRC of every event of an
// APPEND (the caller's message is modified).
// The session clock (LeaderClockFormat) is stamped with the proposal time
// too: EncodeCommandAt takes it separately.
func EncodeCommandVersion(version uint32, t pb.CommandType, sub proto.Message, proposedUnixNanos int64) ([]byte, error) {
	return EncodeCommandAt(version, t, sub, proposedUnixNanos, proposedUnixNanos)
}

// EncodeCommandAt is EncodeCommandVersion with the session clock an entry
// of log format 10 or later carries (Command.session_clock_unix_nanos); it
// is not written below format 10.
func EncodeCommandAt(version uint32, t pb.CommandType, sub proto.Message, proposedUnixNanos, sessionClockUnixNanos int64) ([]byte, error) {
	if version < MinCommandVersion || version > CommandVersion {
		return nil, fmt.Errorf("fsm: encode %s: log format %d not supported by this build (%d..%d)", t, version, MinCommandVersion, CommandVersion)
	}
	if a, ok := sub.(*pb.AppendCommand); ok && version >= 2 {
		for _, op := range a.Ops {
			for _, e := range op.Events {
				e.Crc32C = EventCRC(e.Type, e.Payload)
			}
		}
	}
	if version < LeaderClockFormat {
		sessionClockUnixNanos = 0
	}
	b, err := appendCommand(nil, version, t, sub, proposedUnixNanos, sessionClockUnixNanos)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", t, err)
	}
	return b, nil
}

// appendCommand appends the Command envelope around sub to b in one pass:
// the same bytes as proto.Marshal of a pb.Command whose payload is
// proto.Marshal(sub) (fields in number order, zero values left out), but
// the sub-command is marshalled in place instead of into a payload that
// is then copied: a batch's entry is written once, not twice.
func appendCommand(b []byte, version uint32, t pb.CommandType, sub proto.Message, proposed, clock int64) ([]byte, error) {
	// proto.Size computes every size afresh and caches it in the messages;
	// MarshalAppend then reuses those (the message must not change in
	// between, as it does not here; MarshalAppend fails if it did).
	n := proto.Size(sub)
	b = slices.Grow(b, n+5*(1+binary.MaxVarintLen64))
	b = appendVarintField(b, 1, uint64(version))
	b = appendVarintField(b, 2, uint64(t))
	if n > 0 {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, sub); err != nil {
			return nil, err
		}
	}
	b = appendVarintField(b, 4, uint64(proposed))
	return appendVarintField(b, 5, uint64(clock)), nil
}

// appendVarintField appends a varint field unless v is zero, as proto3
// leaves zero values out.
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// DecodeCommand parses an envelope; it does not check the version (Apply does).
func DecodeCommand(data []byte) (*pb.Command, error) {
	var c pb.Command
	if err := proto.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("fsm: decode command envelope: %w", err)
	}
	return &c, nil
}

// FSM adapts State to raft.FSM and raft.BatchingFSM. Apply runs on Raft's
// FSM goroutine; reads come from any goroutine under the read lock.
type FSM struct {
	mu     sync.RWMutex
	state  *State
	halted error
	// applied is closed and replaced on every apply: waiters of WaitApplied
	// select on it.
	applied chan struct{}
	onHalt  func(error)
	// checkpoints holds this member's digests at the last checkpoint
	// entries (local bookkeeping, not replicated state). One goroutine at a
	// time (digesting) computes them oldest first, after their applies; a
	// checkpoint pushed out of the last keepCheckpoints before that drops
	// its capture, so at most keepCheckpoints captures are ever held.
	checkpoints []*Checkpoint
	digesting   bool
	// removals: the block ids the state removed (removals.go).
	removals blockRemovals
	// acl is the access control as last applied (State.ACL), rebuilt when
	// an apply or restore changed it (aclGen is the state's acl.gen then):
	// callers read it per RPC without the lock.
	acl    atomic.Pointer[ACL]
	aclGen uint64
}

const keepCheckpoints = 16

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an FSM over an empty state. onHalt is called once, from the
// apply goroutine, when a committed entry cannot be decoded or applied; the
// owner must stop the coordinator (it must not call raft.Shutdown from
// within onHalt, which would deadlock: do it from another goroutine).
func New(onHalt func(error)) *FSM {
	if onHalt == nil {
		onHalt = func(error) {}
	}
	f := &FSM{state: NewState(), applied: make(chan struct{}), onHalt: onHalt}
	f.state.ns.removals = &f.removals
	f.acl.Store(emptyACL)
	return f
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	var haltErr error
	for i, l := range logs {
		if f.halted != nil {
			out[i] = f.halted
			continue
		}
		if l.Type != raft.LogCommand {
			f.state.Skip(l.Index)
			continue
		}
		resp, err := f.applyEntry(l)
		if err != nil {
			f.halted = fmt.Errorf("%w: %v", ErrHalted, err)
			haltErr = f.halted
			out[i] = f.halted
			continue
		}
		if cp, ok := resp.(*Checkpoint); ok {
			f.checkpoints = append(f.checkpoints, cp)
			if len(f.checkpoints) > keepCheckpoints {
				f.checkpoints[0].expire()
				f.checkpoints = f.checkpoints[1:]
			}
			if !f.digesting {
				f.digesting = true
				go f.computeDigests()
			}
		}
		out[i] = resp
	}
	if g := f.state.acl.gen; g != f.aclGen {
		f.aclGen = g
		f.acl.Store(f.state.ACL())
	}
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
	if haltErr != nil {
		f.onHalt(haltErr)
	}
	return out
}

func (f *FSM) applyEntry(l *raft.Log) (any, error) {
	// The envelope's payload aliases the entry (State.Apply copies what it
	// keeps): proto.Unmarshal would copy the whole entry once more.
	env, err := decodeEnvelope(l.Data)
	if err != nil {
		_, err = DecodeCommand(l.Data) // refuses the same bytes, and says why
		if err == nil {
			err = fmt.Errorf("fsm: decode command envelope: %w", errWire)
		}
		return nil, fmt.Errorf("index %d: %w", l.Index, err)
	}
	return f.state.Apply(l.Index, &pb.Command{Version: env.version, Type: env.typ, Payload: env.payload, ProposedUnixNanos: env.nanos, SessionClockUnixNanos: env.clock})
}

// computeDigests hashes the kept checkpoints' captures, oldest first,
// until none is left to hash.
func (f *FSM) computeDigests() {
	for {
		var next *Checkpoint
		f.mu.Lock()
		for _, c := range f.checkpoints {
			if c.pending() {
				next = c
				break
			}
		}
		if next == nil {
			f.digesting = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		next.compute()
	}
}

// CheckpointDigest returns this member's digest at a checkpoint index,
// waiting until it is computed or ctx ends; found is false when no
// checkpoint at that index is recorded here (one of the last 16 applied).
func (f *FSM) CheckpointDigest(ctx context.Context, index uint64) (digest [32]byte, found bool, err error) {
	var cp *Checkpoint
	f.mu.RLock()
	for _, c := range f.checkpoints {
		if c.Index == index {
			cp = c
		}
	}
	f.mu.RUnlock()
	if cp == nil {
		return [32]byte{}, false, nil
	}
	digest, err = cp.Wait(ctx)
	return digest, true, err
}

// ACL is the access control as last applied or restored: an immutable
// view, read without a lock (one atomic load per call).
func (f *FSM) ACL() *ACL { return f.acl.Load() }

// Halted returns the error that stopped the state machine, or nil.
func (f *FSM) Halted() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.halted
}

// View runs fn with the state under the read lock. fn must not keep
// references to mutable state after it returns.
func (f *FSM) View(fn func(*State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// SessionClock is State.SessionClock under the read lock.
func (f *FSM) SessionClock() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.SessionClock()
}

// AppliedIndex is the index of the last entry the FSM applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.appliedIndex
}

// ViewWait is View that also returns a channel closed at the next apply or
// restore after fn saw the state, so a follower of the state misses nothing.
func (f *FSM) ViewWait(fn func(*State)) <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
	return f.applied
}

// WaitApplied blocks until the FSM applied index or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.RLock()
		done, ch, halted := f.state.appliedIndex >= index, f.applied, f.halted
		f.mu.RUnlock()
		if halted != nil {
			return halted
		}
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Snapshot implements raft.FSM. It captures the state in O(sessions+members)
// time plus a pointer copy per node and segment and a copy of the event
// log's block table; the namespace's files and blocks are taken in O(1)
// (copy-on-write clones, see cowTable), and events, namespace records,
// sealed segments and the sessions' kept results are shared (nothing
// writes into them once captured: see session.capture).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted != nil {
		return nil, f.halted
	}
	return captureSnapshot(f.state), nil
}

// Restore implements raft.FSM: it replaces the state with the snapshot's,
// only after the whole snapshot was read and verified.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	st.ns.removals = &f.removals
	f.removals.floor = f.removals.next // what the snapshot removed is unknown
	f.aclGen = st.acl.gen
	f.acl.Store(st.ACL())
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
	return nil
}
