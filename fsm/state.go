package fsm

import (
	"cmp"
	"container/list"
	"fmt"
	"slices"
	"sort"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
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

type session struct {
	id        string
	ackedSeq  uint64
	results   map[uint64]*pb.SessionResult
	lastIndex uint64
	elem      *list.Element
	// order holds the kept results by ascending request seq: the oldest
	// to drop, the acked prefix and a capture's sorted copy without a scan
	// of the map. results and order always hold the same results.
	order []*pb.SessionResult
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
	sessions map[string]*session
	lru      *list.List // front = least recently used session
	members  map[string]*pb.Member

	// The journal header: segment table, consumers and rolling config.
	segments      []*pb.Segment
	nextSegmentID uint64
	consumers     map[string]uint64
	config        *pb.JournalConfig
	trims         uint64
	// logFormat is the replicated log format (SET_FORMAT); 0 reads as 1.
	logFormat uint32

	// ns is the namespace: files, blocks, leases, nodes (namespace.go).
	ns namespace
}

// NewState returns an empty state: the journal starts at seq 1.
func NewState() *State {
	return &State{
		nextSeq:   1,
		firstSeq:  1,
		sessions:  make(map[string]*session),
		lru:       list.New(),
		members:   make(map[string]*pb.Member),
		consumers: make(map[string]uint64),
		config:    defaultJournalConfig(),
		ns:        newNamespace(),
	}
}

// AppliedIndex is the Raft index of the last entry applied.
func (s *State) AppliedIndex() uint64 { return s.appliedIndex }

// NextSeq is the seq the next event will get (safe_pos + 1).
func (s *State) NextSeq() uint64 { return s.nextSeq }

// FirstSeq is the first seq still held.
func (s *State) FirstSeq() uint64 { return s.firstSeq }

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

// Apply applies one decoded command at a Raft index. It returns the
// per-command response (for APPEND: []Result) or an error when the command
// cannot be understood at all, in which case the caller must halt.
func (s *State) Apply(index uint64, cmd *pb.Command) (any, error) {
	if cmd.Version < MinCommandVersion || cmd.Version > CommandVersion {
		return nil, fmt.Errorf("fsm: log format (envelope version) %d at index %d requires an upgrade: this build reads %d..%d", cmd.Version, index, MinCommandVersion, CommandVersion)
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
		sess = s.session(op.clientID, index)
		if op.requestSeq <= sess.ackedSeq {
			return Result{Index: index, Err: ErrSessionAcked}
		}
		if r, ok := sess.results[op.requestSeq]; ok {
			return Result{FirstSeq: r.FirstSeq, Count: r.Count, Index: index, Duplicate: true}
		}
		if len(sess.results) >= MaxResultsPerSession && op.requestSeq < sess.minResultSeq() {
			return Result{Index: index, Err: ErrSessionResultExpired}
		}
	}
	first := s.nextSeq
	for _, e := range events {
		s.addEvent(e.typ, e.payload, op.clientID, op.requestSeq, index)
	}
	r := Result{FirstSeq: first, Count: uint32(len(events)), Index: index}
	if sess != nil {
		sess.keep(&pb.SessionResult{RequestSeq: op.requestSeq, FirstSeq: first, Count: r.Count}, op.ackedSeq)
	}
	return r
}

// session returns the client's session, creating it (and evicting the least
// recently used one over MaxSessions) as needed, and marks it used at index.
func (s *State) session(id string, index uint64) *session {
	sess, ok := s.sessions[id]
	if !ok {
		id = strings.Clone(id) // the caller's may alias a log entry
		sess = &session{id: id, results: make(map[uint64]*pb.SessionResult)}
		sess.elem = s.lru.PushBack(sess)
		s.sessions[id] = sess
		for len(s.sessions) > MaxSessions {
			old := s.lru.Remove(s.lru.Front()).(*session)
			delete(s.sessions, old.id)
		}
	} else {
		s.lru.MoveToBack(sess.elem)
	}
	sess.lastIndex = index
	return sess
}

// ack forgets the results of every request at or below seq.
func (sess *session) ack(seq uint64) {
	if seq <= sess.ackedSeq {
		return
	}
	i, _ := slices.BinarySearchFunc(sess.order, seq+1, cmpRequestSeq)
	for _, r := range sess.order[:i] {
		delete(sess.results, r.RequestSeq)
	}
	sess.order = sess.order[i:]
	sess.ackedSeq = seq
}

// keep records the result of a request not kept yet, applies the client's
// ack and drops the oldest results over MaxResultsPerSession. Every step
// costs the same however the client numbers or acks its requests: a client
// that never acks has its oldest result dropped on every request.
func (sess *session) keep(r *pb.SessionResult, acked uint64) {
	sess.results[r.RequestSeq] = r
	if n := len(sess.order); n == 0 || sess.order[n-1].RequestSeq < r.RequestSeq {
		sess.order = append(sess.order, r) // the usual case: seqs rise
	} else {
		i, _ := slices.BinarySearchFunc(sess.order, r.RequestSeq, cmpRequestSeq)
		sess.order = slices.Insert(sess.order, i, r)
	}
	sess.ack(acked)
	for len(sess.order) > MaxResultsPerSession {
		delete(sess.results, sess.order[0].RequestSeq)
		sess.order = sess.order[1:]
	}
}

func cmpRequestSeq(r *pb.SessionResult, seq uint64) int { return cmp.Compare(r.RequestSeq, seq) }

// minResultSeq is the lowest request seq with a kept result (0 when none
// is kept).
func (sess *session) minResultSeq() uint64 {
	if len(sess.order) == 0 {
		return 0
	}
	return sess.order[0].RequestSeq
}

// resultList returns a copy of the kept results in request order (a
// result is never changed once kept, so a capture may share them).
func (sess *session) resultList() []*pb.SessionResult { return slices.Clone(sess.order) }
