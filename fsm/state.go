package fsm

import (
	"fmt"
	"sort"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// Limits that are part of the replicated rules: every member must use the
// same values, so they are constants, not configuration.
const (
	// MaxResultsPerSession bounds the cached results of one client session.
	MaxResultsPerSession = 4096
	// MaxSessions bounds the session table; the least recently used session
	// (by Raft index) is evicted first.
	MaxSessions = 65536
	// MaxKeptResults bounds the results all sessions keep together (from
	// log format 5 on): over it, the least recently used session holding
	// results loses its oldest (28 heap bytes each, measured: ~28 MiB at
	// the bound, BenchmarkKeptResultMemory).
	MaxKeptResults = 1 << 20
)

// Result is the outcome of one AppendOp.
type Result struct {
	FirstSeq uint64
	Count    uint32
	Index    uint64
	// Duplicate is true when the op was a retry answered from the session.
	Duplicate bool
	Err       error
}

// State is the deterministic metadata state. It performs no I/O, reads no
// clock and draws no random numbers: the same entries in the same order give
// the same State on every member. State is not safe for concurrent use; FSM
// serialises access.
type State struct {
	appliedIndex uint64
	nextSeq      uint64
	// events holds seqs firstSeq..nextSeq-1 (its oldest block may also
	// hold some trimmed ones below firstSeq). Append-only until trim
	// (issue 3): a snapshot keeps a view of it while Apply appends.
	events eventLog
	// scratch is the decoded APPEND entry being applied, reused.
	scratch  appendView
	firstSeq uint64
	sessionTable
	members map[string]*pb.Member

	// The journal header: segment table, consumers and rolling config.
	segments      []*pb.Segment
	segBytes      uint64 // the segments' Bytes summed (derived, not replicated)
	nextSegmentID uint64
	consumers     map[string]uint64
	config        *pb.JournalConfig
	trims         uint64
	// logFormat is the replicated log format (SET_FORMAT); 0 reads as 1.
	logFormat uint32

	// ns is the namespace: files, blocks, leases, nodes (namespace.go).
	ns namespace
	// acl is the access control (acl.go, log format 12).
	acl aclTable
}

// NewState returns an empty state: the journal starts at seq 1.
func NewState() *State {
	s := &State{
		nextSeq:   1,
		firstSeq:  1,
		members:   make(map[string]*pb.Member),
		consumers: make(map[string]uint64),
		config:    defaultJournalConfig(),
		ns:        newNamespace(),
		acl:       newAclTable(),
	}
	s.resetSessions()
	return s
}

// AppliedIndex is the Raft index of the last entry applied.
func (s *State) AppliedIndex() uint64 { return s.appliedIndex }

// NextSeq is the seq the next event will get (safe_pos + 1).
func (s *State) NextSeq() uint64 { return s.nextSeq }

// FirstSeq is the first seq still held.
func (s *State) FirstSeq() uint64 { return s.firstSeq }

// RetainedBytes is what the retained events take, about as much as they
// hold in memory: their type and payload bytes, as the segments count
// them, plus EventRecordBytes per event.
func (s *State) RetainedBytes() uint64 {
	return s.segBytes + uint64(s.EventCount())*EventRecordBytes
}

// SealedBytes is RetainedBytes without the open segment: what trim can
// drop once consumers ack. A leader refuses new appends while it is at or
// over the journal's retention quota (coordserver,
// --journal-max-retained-bytes); the open segment adds at most one
// segment's bounds on top.
func (s *State) SealedBytes() uint64 {
	b := s.RetainedBytes()
	if n := len(s.segments); n > 0 && !s.segments[n-1].Sealed {
		open := s.segments[n-1]
		b -= open.Bytes + open.Events*EventRecordBytes
	}
	return b
}

// EventRecordBytes is what RetainedBytes counts per event besides its type
// and payload: its record in the retained blocks (fsm/eventlog.go, about 32
// bytes; docs/benchmarks.md, "Memory per retained event").
const EventRecordBytes = 32

// EventCount is the number of events held.
func (s *State) EventCount() int { return int(s.nextSeq - s.firstSeq) }

// Read returns up to max events starting at seq from. The returned messages
// are the caller's; their payloads share memory with the state and must
// not be modified.
func (s *State) Read(from uint64, max int) []*pb.StoredEvent {
	if from < s.firstSeq {
		from = s.firstSeq
	}
	if from >= s.nextSeq || max <= 0 {
		return nil
	}
	return s.events.read(from, int(min(uint64(max), s.nextSeq-from)))
}

// Members returns the registered coordinators sorted by id.
func (s *State) Members() []*pb.Member {
	out := make([]*pb.Member, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// Member returns the registered addresses of one coordinator.
func (s *State) Member(id string) (*pb.Member, bool) {
	m, ok := s.members[id]
	return m, ok
}

// SessionCount is the number of client sessions held.
func (s *State) SessionCount() int { return len(s.sessions) }

// HasSession reports whether the state machine holds client session id.
func (s *State) HasSession(id string) bool {
	_, ok := s.sessions[id]
	return ok
}

// Answered reports whether request requestSeq of session clientID would be
// answered without appending anything: acknowledged, its result kept (a
// retry gets it), or its result dropped (refused). A leader over its
// retention quota still lets such requests through: refusing a retry of
// an applied request would tell its client that it failed.
func (s *State) Answered(clientID string, requestSeq uint64) bool {
	sess, ok := s.sessions[clientID]
	if clientID == "" || !ok {
		return false
	}
	if requestSeq <= sess.ackedSeq || sess.expired(requestSeq) {
		return true
	}
	_, kept := sess.result(requestSeq)
	return kept
}

// KeptResults is the number of request results the sessions keep for
// retries.
func (s *State) KeptResults() int { return s.keptResults }

// Apply applies one decoded command at a Raft index. It returns the
// per-command response (for APPEND: []Result) or an error when the command
// cannot be understood at all, in which case the caller must halt.
func (s *State) Apply(index uint64, cmd *pb.Command) (any, error) {
	if cmd.Version < MinCommandVersion || cmd.Version > CommandVersion {
		return nil, fmt.Errorf("fsm: log format (envelope version) %d at index %d requires an upgrade: this build reads %d..%d", cmd.Version, index, MinCommandVersion, CommandVersion)
	}
	switch f := s.LogFormat(); {
	case f >= LeaderClockFormat:
		s.tick(cmd.SessionClockUnixNanos, s.SessionIdleTimeout())
	case f >= SessionIdleFormat:
		s.tick(cmd.ProposedUnixNanos, s.SessionIdleTimeout())
	}
	switch cmd.Type {
	case pb.CommandType_COMMAND_TYPE_APPEND:
		a := &s.scratch
		if err := a.decode(cmd.Payload); err != nil {
			// proto.Unmarshal refuses the same bytes (FuzzDecodeAppend);
			// its error says why.
			var c pb.AppendCommand
			if perr := proto.Unmarshal(cmd.Payload, &c); perr != nil {
				err = perr
			}
			return nil, fmt.Errorf("fsm: decode append command at index %d: %w", index, err)
		}
		if cmd.Version >= 2 {
			if err := checkEventCRCs(index, a); err != nil {
				return nil, err
			}
		}
		s.appliedIndex = index
		return s.applyAppend(index, a), nil
	case pb.CommandType_COMMAND_TYPE_REGISTER_MEMBER:
		var c pb.RegisterMemberCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode register-member command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		m := c.Member
		if m == nil || m.Id == "" || m.RaftAddr == "" || m.GrpcAddr == "" {
			return ErrInvalidMember, nil
		}
		s.members[m.Id] = proto.Clone(m).(*pb.Member)
		return nil, nil
	case pb.CommandType_COMMAND_TYPE_CONFIGURE_JOURNAL:
		var c pb.JournalConfig
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode configure-journal command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		return s.applyConfigure(&c), nil
	case pb.CommandType_COMMAND_TYPE_CONSUMER:
		var c pb.ConsumerCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode consumer command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		return s.applyConsumer(&c), nil
	case pb.CommandType_COMMAND_TYPE_TRIM:
		var c pb.TrimCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode trim command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		return s.applyTrim(&c), nil
	case pb.CommandType_COMMAND_TYPE_RESET:
		var c pb.ResetCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode reset command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		return s.applyReset(), nil
	case pb.CommandType_COMMAND_TYPE_SET_FORMAT:
		var c pb.SetFormatCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode set-format command at index %d: %w", index, err)
		}
		if c.Version > CommandVersion {
			// Entries after this one may use a format this build cannot
			// read: stop here rather than misread them.
			return nil, fmt.Errorf("fsm: log format %d set at index %d requires an upgrade: this build reads up to %d", c.Version, index, CommandVersion)
		}
		s.appliedIndex = index
		if c.Version < s.LogFormat() {
			return ErrFormatDowngrade, nil
		}
		if s.LogFormat() < SessionIdleFormat && c.Version >= SessionIdleFormat {
			s.startClock(cmd.ProposedUnixNanos)
		}
		s.logFormat = c.Version
		return nil, nil
	case pb.CommandType_COMMAND_TYPE_CHECKPOINT:
		s.appliedIndex = index
		return newCheckpoint(index, captureSnapshot(s)), nil
	case pb.CommandType_COMMAND_TYPE_NAMESPACE:
		var c pb.NamespaceCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode namespace command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		if cmd.Version < NamespaceFormat {
			return NamespaceResult{Index: index, Err: ErrNamespaceFormat}, nil
		}
		if cmd.Version < CacheFormat && isCacheOp(c.Op) {
			return NamespaceResult{Index: index, Err: ErrCacheFormat}, nil
		}
		return s.applyNamespace(index, cmd.ProposedUnixNanos, &c)
	case pb.CommandType_COMMAND_TYPE_OPEN_SESSION:
		var c pb.OpenSessionCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode open-session command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		if cmd.Version < SessionOpenFormat {
			return OpenSessionResult{Index: index, Err: ErrSessionOpenFormat}, nil
		}
		return s.openSession(index, c.ClientId), nil
	case pb.CommandType_COMMAND_TYPE_CLOSE_SESSION:
		var c pb.CloseSessionCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode close-session command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		if cmd.Version < SessionCloseFormat {
			return CloseSessionResult{Index: index, Err: ErrSessionCloseFormat}, nil
		}
		return s.closeSession(index, c.SessionId), nil
	case pb.CommandType_COMMAND_TYPE_SET_JOURNAL_CONFIG:
		var c pb.SetJournalConfigCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode set-journal-config command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		if cmd.Version < HeldConfigFormat || s.LogFormat() < HeldConfigFormat {
			return ErrJournalConfigFormat, nil
		}
		return s.applySetJournalConfig(&c), nil
	case pb.CommandType_COMMAND_TYPE_ACL:
		var c pb.AclCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode ACL command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		if cmd.Version < AclFormat || s.LogFormat() < AclFormat {
			return AclResult{Index: index, Err: ErrAclFormat}, nil
		}
		r, err := s.applyAcl(index, &c)
		if err != nil {
			return nil, err
		}
		return r, nil
	case pb.CommandType_COMMAND_TYPE_IMPORT:
		var c pb.ImportCommand
		if err := proto.Unmarshal(cmd.Payload, &c); err != nil {
			return nil, fmt.Errorf("fsm: decode import command at index %d: %w", index, err)
		}
		s.appliedIndex = index
		return s.applyImport(index, &c), nil
	default:
		return nil, fmt.Errorf("fsm: unknown command type %d at index %d", cmd.Type, index)
	}
}

// LogFormat is the replicated log format: the envelope version proposers
// write.
func (s *State) LogFormat() uint32 { return max(s.logFormat, MinCommandVersion) }

// checkEventCRCs verifies format 2's per-event checksums. A mismatch means
// the entry was damaged after the leader encoded it: this member must not
// apply it.
func checkEventCRCs(index uint64, a *appendView) error {
	for i, op := range a.ops {
		for j, e := range a.events[op.first : op.first+op.n] {
			if got := EventCRC(e.typ, e.payload); got != e.crc {
				return fmt.Errorf("fsm: append at index %d, op %d, event %d: crc32c %08x, entry says %08x: damaged entry", index, i, j, got, e.crc)
			}
		}
	}
	return nil
}

// Skip records that an entry without a command (configuration, no-op) was
// applied at index.
func (s *State) Skip(index uint64) { s.appliedIndex = index }

func (s *State) applyAppend(index uint64, a *appendView) []Result {
	results := make([]Result, len(a.ops))
	for i, op := range a.ops {
		results[i] = s.applyOp(index, op, a.events[op.first:op.first+op.n])
	}
	return results
}

// applyOp applies one client's events. Its strings alias the entry: what
// is kept (session ids, interned types and client ids) is cloned.
func (s *State) applyOp(index uint64, op appendOpView, events []eventView) Result {
	if len(events) == 0 {
		return Result{Index: index, Err: ErrEmptyAppend}
	}
	for _, e := range events {
		if e.typ == "" {
			return Result{Index: index, Err: ErrInvalidEvent}
		}
		// Only from the first audit event on: entries written before it
		// (possibly by a build without the rule) replay as they applied.
		if s.ns.auditFrom != 0 && ReservedEventType(e.typ) {
			return Result{Index: index, Err: ErrReservedEventType}
		}
	}
	var sess *session
	if op.clientID != "" {
		if op.established && s.sessionExpired(op.clientID) {
			return Result{Index: index, Err: ErrSessionExpired}
		}
		sess = s.session(op.clientID, index)
		if op.requestSeq <= sess.ackedSeq {
			return Result{Index: index, Err: ErrSessionAcked}
		}
		if r, ok := sess.result(op.requestSeq); ok {
			return Result{FirstSeq: r.firstSeq, Count: r.count, Index: index, Duplicate: true}
		}
		if sess.expired(op.requestSeq) {
			return Result{Index: index, Err: ErrSessionResultExpired}
		}
	}
	first := s.nextSeq
	for _, e := range events {
		s.addEvent(e.typ, e.payload, op.clientID, op.requestSeq, index)
	}
	r := Result{FirstSeq: first, Count: uint32(len(events)), Index: index}
	if sess != nil {
		s.keep(sess, keptResult{requestSeq: op.requestSeq, firstSeq: first, count: r.Count}, op.ackedSeq, s.LogFormat())
	}
	return r
}
