package fsm

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// Journal rules that are part of the replicated behaviour.
const (
	// DefaultEventsPerSegment and DefaultSegmentBytes roll segments until
	// the leader replicates its configured values.
	DefaultEventsPerSegment = 1024
	DefaultSegmentBytes     = 16 << 20
	// MaxConsumers bounds the consumer registry.
	MaxConsumers = 1024
)

var consumerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidConsumerName reports whether s can name a consumer.
func ValidConsumerName(s string) bool { return consumerName.MatchString(s) }

// Segment states as reported (derived, never stored).
const (
	SegmentOpen     = "open"
	SegmentSealed   = "sealed"
	SegmentExpiring = "expiring"
	SegmentExpired  = "expired"
)

// TrimResult is the outcome of a trim or reset.
type TrimResult struct {
	TrimmedPos uint64
	Segments   uint64
	Err        error
}

// ConsumerResult is the outcome of a consumer command.
type ConsumerResult struct {
	Name     string
	AckedSeq uint64
	Err      error
}

func defaultJournalConfig() *pb.JournalConfig {
	return &pb.JournalConfig{EventsPerSegment: DefaultEventsPerSegment, SegmentBytes: DefaultSegmentBytes}
}

// addEvent stores one applied event with the next seq and accounts it in
// the open segment.
func (s *State) addEvent(typ string, payload []byte, clientID string, requestSeq, index uint64) {
	s.events.add(s.nextSeq, typ, payload, clientID, requestSeq, index)
	s.addToSegment(s.nextSeq, index, len(typ)+len(payload))
	s.nextSeq++
}

// addToSegment accounts one applied event in the open segment, starting a
// new segment after a sealed one and sealing it when it reaches a bound.
func (s *State) addToSegment(seq, index uint64, bytes int) {
	var seg *pb.Segment
	if n := len(s.segments); n > 0 && !s.segments[n-1].Sealed {
		seg = s.segments[n-1]
	} else {
		s.nextSegmentID++
		seg = &pb.Segment{Id: s.nextSegmentID, FirstSeq: seq, FirstIndex: index}
		s.segments = append(s.segments, seg)
	}
	seg.LastSeq, seg.LastIndex = seq, index
	seg.Events++
	seg.Bytes += uint64(bytes)
	s.segBytes += uint64(bytes)
	if seg.Events >= s.config.EventsPerSegment || seg.Bytes >= s.config.SegmentBytes {
		seg.Sealed = true
	}
}

// applyConfigure replaces the journal config's segment thresholds and
// session idle timeout: the command a leader proposes from its flags
// before log format 11. The session idle timeout is taken from log format
// 9 on; before, it is ignored, as a build before 9 does. The trim bounds
// and held, which only SET_JOURNAL_CONFIG sets, stay as they are; once the
// cluster holds its settings the command is refused.
func (s *State) applyConfigure(c *pb.JournalConfig) error {
	if s.config.Held {
		return ErrJournalConfigHeld
	}
	if c.EventsPerSegment == 0 || c.SegmentBytes == 0 {
		return ErrInvalidJournalConfig
	}
	next := proto.CloneOf(s.config)
	next.EventsPerSegment, next.SegmentBytes = c.EventsPerSegment, c.SegmentBytes
	if s.LogFormat() >= SessionIdleFormat {
		if c.SessionIdleTimeoutSeconds > maxSessionIdleSeconds {
			return ErrInvalidJournalConfig
		}
		next.SessionIdleTimeoutSeconds = c.SessionIdleTimeoutSeconds
	}
	s.config = next
	return nil
}

// applySetJournalConfig changes the fields c carries and marks the config
// held by the cluster (log format 11). An invalid result changes nothing.
func (s *State) applySetJournalConfig(c *pb.SetJournalConfigCommand) error {
	next := mergeJournalConfig(s.config, c)
	if err := ValidJournalConfig(next); err != nil {
		return err
	}
	next.Held = true
	s.config = next
	return nil
}

// mergeJournalConfig returns cur with the fields c carries replaced.
func mergeJournalConfig(cur *pb.JournalConfig, c *pb.SetJournalConfigCommand) *pb.JournalConfig {
	next := proto.CloneOf(cur)
	if c.EventsPerSegment != nil {
		next.EventsPerSegment = *c.EventsPerSegment
	}
	if c.SegmentBytes != nil {
		next.SegmentBytes = *c.SegmentBytes
	}
	if c.SessionIdleTimeoutSeconds != nil {
		next.SessionIdleTimeoutSeconds = *c.SessionIdleTimeoutSeconds
	}
	if c.MaxSegments != nil {
		next.MaxSegments = *c.MaxSegments
	}
	if c.MaxEvents != nil {
		next.MaxEvents = *c.MaxEvents
	}
	return next
}

// ValidJournalConfig checks a journal config against the bounds every
// member applies: events per segment 1..MaxEventsPerSegment, segment bytes
// 1..MaxSegmentBytes, a session idle timeout of at most
// MaxSessionIdleTimeout, trim bounds of at most MaxTrimSegments and
// MaxTrimEvents (0: none).
func ValidJournalConfig(c *pb.JournalConfig) error {
	switch {
	case c.EventsPerSegment < 1 || c.EventsPerSegment > MaxEventsPerSegment,
		c.SegmentBytes < 1 || c.SegmentBytes > MaxSegmentBytes,
		c.SessionIdleTimeoutSeconds > maxSessionIdleSeconds,
		c.MaxSegments > MaxTrimSegments,
		c.MaxEvents > MaxTrimEvents:
		return ErrInvalidJournalConfig
	}
	return nil
}

// JournalConfig returns the replicated journal config: segment thresholds,
// from log format 9 on the session idle timeout, and from 11 on the trim
// bounds and whether the cluster holds them.
func (s *State) JournalConfig() *pb.JournalConfig { return s.config }

// SessionIdleTimeout is how long a session may stay unused before the
// state machine forgets it (log format 9 on; 0: never by time).
func (s *State) SessionIdleTimeout() time.Duration {
	return time.Duration(s.config.SessionIdleTimeoutSeconds) * time.Second
}

// SessionClock is the state machine's time (see SessionIdleFormat): the
// latest proposal time of the entries applied since log format 9 (from
// format 10 on, the latest session clock they carry, see
// LeaderClockFormat), as Unix nanoseconds; 0 before.
func (s *State) SessionClock() int64 { return s.clock }

func (s *State) allAcked(seq uint64) bool {
	for _, acked := range s.consumers {
		if acked < seq {
			return false
		}
	}
	return true
}

// SegmentState derives a segment's state, given the newest snapshot index
// the caller knows covers the log (expiry needs both every consumer past the
// segment and a snapshot covering its entries).
func (s *State) SegmentState(seg *pb.Segment, coveredIndex uint64) string {
	switch {
	case !seg.Sealed:
		return SegmentOpen
	case !s.allAcked(seg.LastSeq):
		return SegmentSealed
	case seg.LastIndex > coveredIndex:
		return SegmentExpiring
	default:
		return SegmentExpired
	}
}

// Segments returns the retained segments, oldest first (shared: read only).
func (s *State) Segments() []*pb.Segment { return s.segments }

// ExcessTrimTo is where an automatic trim brings the journal back within
// its limits (MDLog's trim walk stops once live segments <= max_segments
// and live events <= max_events), and under the retention quota
// (SealedBytes below quota): the first seq of the oldest segment to keep,
// or 0 when nothing is to go. A limit of 0 is no bound. The walk stops at
// the open segment and at the first segment a consumer still needs (so a
// lagging consumer yields 0: no TRIM to propose); snapshot coverage of the
// segments below is applyTrim's check.
func (s *State) ExcessTrimTo(maxSegments, maxEvents int, quota uint64) uint64 {
	segs, events, sealed := len(s.segments), s.EventCount(), s.SealedBytes()
	drop := 0
	for drop < segs-1 && ((maxSegments > 0 && segs-drop > maxSegments) || (maxEvents > 0 && events > maxEvents) || (quota > 0 && sealed >= quota)) &&
		s.allAcked(s.segments[drop].LastSeq) {
		seg := s.segments[drop]
		events -= int(seg.Events)
		sealed -= seg.Bytes + seg.Events*EventRecordBytes
		drop++
	}
	if drop == 0 {
		return 0
	}
	return s.segments[drop].FirstSeq
}

// ExpirePos is the first seq not known to be expired: every seq below it
// lies in an expired segment (or was trimmed).
func (s *State) ExpirePos(coveredIndex uint64) uint64 {
	pos := s.firstSeq
	for _, seg := range s.segments {
		if s.SegmentState(seg, coveredIndex) != SegmentExpired {
			break
		}
		pos = seg.LastSeq + 1
	}
	return pos
}

// Consumers returns the registered consumers sorted by name.
func (s *State) Consumers() []*pb.Consumer {
	out := make([]*pb.Consumer, 0, len(s.consumers))
	for n, a := range s.consumers {
		out = append(out, &pb.Consumer{Name: n, AckedSeq: a})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Trims counts trims and resets applied (for tests and metrics).
func (s *State) Trims() uint64 { return s.trims }

// CheckConsumer reports the error applying c would give, without applying
// it: the leader refuses bad commands before they reach the log.
func (s *State) CheckConsumer(c *pb.ConsumerCommand) error {
	safe := s.nextSeq - 1
	acked, exists := s.consumers[c.Name]
	switch c.Op {
	case pb.ConsumerOp_CONSUMER_OP_REGISTER:
		switch {
		case !ValidConsumerName(c.Name):
			return ErrConsumerName
		case exists:
			return fmt.Errorf("%w: %q", ErrConsumerExists, c.Name)
		case len(s.consumers) >= MaxConsumers:
			return ErrTooManyConsumers
		case c.FromGiven && (c.Seq < s.firstSeq || c.Seq > s.nextSeq):
			return fmt.Errorf("%w: from %d is outside the retained range %d..%d", ErrConsumerFrom, c.Seq, s.firstSeq, s.nextSeq)
		}
	case pb.ConsumerOp_CONSUMER_OP_ACK:
		switch {
		case !exists:
			return fmt.Errorf("%w: %q", ErrConsumerNotFound, c.Name)
		case c.Seq > safe:
			return fmt.Errorf("%w: %q acks %d, safe_pos %d", ErrAckBeyondSafe, c.Name, c.Seq, safe)
		case c.Seq < acked:
			return fmt.Errorf("%w: %q acks %d after %d", ErrAckBackwards, c.Name, c.Seq, acked)
		}
	case pb.ConsumerOp_CONSUMER_OP_REMOVE:
		if !exists {
			return fmt.Errorf("%w: %q", ErrConsumerNotFound, c.Name)
		}
	default:
		return ErrConsumerOp
	}
	return nil
}

func (s *State) applyConsumer(c *pb.ConsumerCommand) ConsumerResult {
	acked := s.consumers[c.Name]
	if err := s.CheckConsumer(c); err != nil {
		return ConsumerResult{Name: c.Name, AckedSeq: acked, Err: err}
	}
	switch c.Op {
	case pb.ConsumerOp_CONSUMER_OP_REGISTER:
		acked = s.nextSeq - 1
		if c.FromGiven {
			acked = c.Seq - 1
		}
		s.consumers[c.Name] = acked
	case pb.ConsumerOp_CONSUMER_OP_ACK:
		acked = c.Seq
		s.consumers[c.Name] = acked
	case pb.ConsumerOp_CONSUMER_OP_REMOVE:
		delete(s.consumers, c.Name)
	}
	return ConsumerResult{Name: c.Name, AckedSeq: acked}
}

// applyTrim drops whole expired segments, oldest first. It never drops the
// open segment, one a consumer still needs, or one whose entries the
// proposer's snapshot does not cover.
func (s *State) applyTrim(c *pb.TrimCommand) TrimResult {
	if c.ToSeq > s.nextSeq {
		return TrimResult{TrimmedPos: s.firstSeq, Err: fmt.Errorf("%w: to %d, next seq %d", ErrTrimFuture, c.ToSeq, s.nextSeq)}
	}
	n := 0
	for _, seg := range s.segments {
		if c.ToSeq != 0 && seg.LastSeq >= c.ToSeq {
			break
		}
		if s.SegmentState(seg, c.CoveredIndex) != SegmentExpired {
			break
		}
		n++
	}
	if n == 0 {
		return TrimResult{TrimmedPos: s.firstSeq}
	}
	newFirst := s.segments[n-1].LastSeq + 1
	for _, seg := range s.segments[:n] {
		s.segBytes -= seg.Bytes
	}
	s.events.trimTo(newFirst)
	s.segments = append([]*pb.Segment(nil), s.segments[n:]...)
	s.firstSeq = newFirst
	s.trims++
	return TrimResult{TrimmedPos: s.firstSeq, Segments: uint64(n)}
}

// applyReset drops every retained event; the next seq continues and every
// consumer is moved past the reset.
func (s *State) applyReset() TrimResult {
	n := uint64(len(s.segments))
	s.events.reset()
	s.segments, s.segBytes = nil, 0
	s.firstSeq = s.nextSeq
	for name, acked := range s.consumers {
		if acked < s.nextSeq-1 {
			s.consumers[name] = s.nextSeq - 1
		}
	}
	s.trims++
	return TrimResult{TrimmedPos: s.firstSeq, Segments: n}
}

// rebuildSegments derives segments from retained events (restoring a
// format-1 snapshot, which had none) with the same rolling rule Apply uses.
func (s *State) rebuildSegments() {
	s.segments, s.segBytes = nil, 0
	eachEvent(s.events.blocks, s.firstSeq, func(e *pb.StoredEvent) bool {
		s.addToSegment(e.Seq, e.Index, len(e.Type)+len(e.Payload))
		return true
	})
}

// applyImport appends exported events with their seqs. The first chunk
// needs an empty journal (never written, or force) and may start at any
// seq; every chunk must be contiguous with the journal.
func (s *State) applyImport(index uint64, c *pb.ImportCommand) TrimResult {
	if len(c.Events) == 0 {
		return TrimResult{TrimmedPos: s.firstSeq, Err: ErrEmptyAppend}
	}
	first := c.Events[0].Seq
	if c.FirstChunk {
		empty := s.nextSeq == 1 && s.EventCount() == 0
		if !empty && !c.Force {
			return TrimResult{TrimmedPos: s.firstSeq, Err: ErrImportNotEmpty}
		}
		if first == 0 {
			return TrimResult{TrimmedPos: s.firstSeq, Err: fmt.Errorf("%w: seq 0", ErrImportGap)}
		}
	} else if first != s.nextSeq {
		return TrimResult{TrimmedPos: s.firstSeq, Err: fmt.Errorf("%w: chunk starts at %d, next seq %d", ErrImportGap, first, s.nextSeq)}
	}
	for i, e := range c.Events {
		if e.Seq != first+uint64(i) || e.Type == "" {
			return TrimResult{TrimmedPos: s.firstSeq, Err: fmt.Errorf("%w: event %d has seq %d", ErrImportGap, i, e.Seq)}
		}
	}
	if c.FirstChunk {
		if s.nextSeq != 1 || s.EventCount() > 0 {
			// A forced import replaces the journal: results cached for
			// retries and consumer positions refer to the old contents.
			s.resetSessions()
			for name, acked := range s.consumers {
				s.consumers[name] = min(acked, first-1)
			}
		}
		s.events.reset()
		s.segments, s.segBytes = nil, 0
		s.firstSeq, s.nextSeq = first, first
		s.trims++
	}
	for _, e := range c.Events {
		s.addEvent(e.Type, e.Payload, e.ClientId, e.RequestSeq, index)
	}
	return TrimResult{TrimmedPos: s.firstSeq}
}
