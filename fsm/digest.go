package fsm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"
)

// Hash returns a digest of the whole state. Two members that applied the
// same entries return the same digest (invariant 2). A state without a
// namespace hashes as it did before the namespace existed, so members on
// either build agree during an upgrade.
func (s *State) Hash() [32]byte { return s.digest(true) }

// digest hashes the state, with or without the applied index (tests use
// the latter to show a refused command changed nothing else).
func (s *State) digest(withIndex bool) [32]byte { return captureSnapshot(s).digest(withIndex) }

// Checkpoint is a member's digest of its state at a checkpoint entry's
// index. Applying the entry only captures the state (captureSnapshot: what
// a Raft snapshot takes, events and records shared, not copied); the
// digest is computed from that capture off the apply path, so the applies
// after a checkpoint do not wait for a walk over every retained event.
type Checkpoint struct {
	Index uint64

	mu     sync.Mutex
	sn     *snapshot // taken by compute or expire, so it pins nothing after
	done   chan struct{}
	digest [32]byte
	err    error
}

// ErrCheckpointExpired: later checkpoints pushed this one out of the
// member's last keepCheckpoints before its digest was computed.
var ErrCheckpointExpired = errors.New("fsm: checkpoint replaced by later ones before its digest was computed")

func newCheckpoint(index uint64, sn *snapshot) *Checkpoint {
	return &Checkpoint{Index: index, sn: sn, done: make(chan struct{})}
}

func (c *Checkpoint) take() *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	sn := c.sn
	c.sn = nil
	return sn
}

func (c *Checkpoint) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sn != nil
}

// compute hashes the capture unless compute or expire already took it.
func (c *Checkpoint) compute() {
	if sn := c.take(); sn != nil {
		c.digest = sn.digest(true)
		close(c.done)
	}
}

// expire drops a capture not hashed yet: its waiters get
// ErrCheckpointExpired.
func (c *Checkpoint) expire() {
	if sn := c.take(); sn != nil {
		c.err = ErrCheckpointExpired
		close(c.done)
	}
}

// Wait returns the digest once it is computed, ErrCheckpointExpired, or
// ctx's error.
func (c *Checkpoint) Wait(ctx context.Context) ([32]byte, error) {
	select {
	case <-c.done:
		return c.digest, c.err
	default:
	}
	select {
	case <-c.done:
		return c.digest, c.err
	case <-ctx.Done():
		return [32]byte{}, ctx.Err()
	}
}

// digest hashes a captured state. Members on different builds compare
// digests, so the bytes hashed and their order are fixed (TestDigestIsStable
// pins them): the applied index when asked, the seq counters, every
// retained event, sessions in recency order (from log format 9 with their
// last use), members, the log format, the journal config (from log format
// 9 with the session idle timeout and the clock, from 11 with the trim
// bounds and whether the cluster holds it) and counters, segments,
// consumers, then the namespace
// once it has an audit trail, then the access control once it holds any. The fields go into a buffer hashed 64 KiB at
// a time, not six small writes per event. It sorts the capture's namespace
// slices in place: a capture is hashed or persisted, not both.
func (sn *snapshot) digest(withIndex bool) [32]byte {
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	flush := func() {
		h.Write(buf)
		buf = buf[:0]
	}
	put := func(v uint64) {
		if len(buf)+8 > cap(buf) {
			flush()
		}
		buf = binary.BigEndian.AppendUint64(buf, v)
	}
	putBytes := func(p []byte) {
		put(uint64(len(p)))
		if len(buf)+len(p) > cap(buf) {
			flush()
			if len(p) > cap(buf) {
				h.Write(p)
				return
			}
		}
		buf = append(buf, p...)
	}
	putString := func(p string) {
		put(uint64(len(p)))
		if len(buf)+len(p) > cap(buf) {
			flush()
			if len(p) > cap(buf) {
				h.Write([]byte(p))
				return
			}
		}
		buf = append(buf, p...)
	}
	sn.sortRecords()
	hd := sn.header
	if withIndex {
		put(hd.AppliedIndex)
	}
	put(hd.NextSeq)
	put(hd.FirstSeq)
	for bi := range sn.events {
		b := &sn.events[bi]
		for j := range b.meta {
			seq := b.first + uint64(j)
			if seq < hd.FirstSeq {
				continue
			}
			m := &b.meta[j]
			put(seq)
			putString(b.strs[m.typ])
			putBytes(b.payload(j))
			putString(b.strs[m.client])
			put(m.requestSeq)
			put(m.index)
		}
	}
	for i := range sn.sessions {
		sess := &sn.sessions[i]
		putString(sess.id)
		put(sess.ackedSeq)
		put(sess.lastIndex)
		if sess.droppedThrough != 0 {
			// Only from log format 5 on: older states hash as before.
			put(math.MaxUint64)
			put(sess.droppedThrough)
		}
		if hd.LogFormat >= SessionIdleFormat {
			put(uint64(sess.lastUsed))
		}
		for _, r := range sess.kept {
			put(r.requestSeq)
			put(r.firstSeq)
			put(uint64(r.count))
		}
	}
	for _, m := range sn.members {
		putString(m.Id)
		putString(m.RaftAddr)
		putString(m.GrpcAddr)
		putString(m.HttpAddr)
		put(uint64(m.MaxLogFormat))
	}
	put(uint64(max(hd.LogFormat, MinCommandVersion)))
	put(hd.JournalConfig.EventsPerSegment)
	put(hd.JournalConfig.SegmentBytes)
	if hd.LogFormat >= SessionIdleFormat {
		// Only from log format 9 on: older states hash as before.
		put(hd.JournalConfig.SessionIdleTimeoutSeconds)
		put(uint64(hd.SessionClockUnixNanos))
	}
	if hd.LogFormat >= HeldConfigFormat {
		// Only from log format 11 on: older states hash as before.
		put(hd.JournalConfig.MaxSegments)
		put(hd.JournalConfig.MaxEvents)
		held := uint64(0)
		if hd.JournalConfig.Held {
			held = 1
		}
		put(held)
	}
	put(hd.NextSegmentId)
	put(hd.Trims)
	for _, seg := range sn.segments {
		put(seg.Id)
		put(seg.FirstSeq)
		put(seg.LastSeq)
		put(seg.Events)
		put(seg.Bytes)
		put(seg.FirstIndex)
		put(seg.LastIndex)
		if seg.Sealed {
			put(1)
		} else {
			put(0)
		}
	}
	for _, c := range sn.consumers {
		putString(c.Name)
		put(c.AckedSeq)
	}
	if hd.AuditFromSeq != 0 {
		sn.hashNamespace(put, putBytes)
	}
	if sn.acl != nil {
		// Only once the state holds access control (log format 12): older
		// states hash as before.
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(sn.acl)
		put(math.MaxUint64 - 1)
		putBytes(b)
	}
	flush()
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// hashNamespace feeds the namespace into a digest: counters, then every
// record in key order, deterministically encoded; the cache directives
// only once one was ever added, so a state without any hashes as it did in
// builds before log format 4 and checkpoints agree across the upgrade.
func (sn *snapshot) hashNamespace(put func(uint64), putBytes func([]byte)) {
	hd := sn.header
	put(hd.NextBlockId)
	put(hd.NextGs)
	put(hd.AuditFromSeq)
	enc := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	msg := func(m proto.Message) {
		buf, _ = enc.MarshalAppend(buf[:0], m)
		putBytes(buf)
	}
	put(uint64(len(sn.files)))
	for _, f := range sn.files {
		msg(f)
	}
	put(uint64(len(sn.blocks)))
	for _, b := range sn.blocks {
		msg(b)
	}
	put(uint64(len(sn.nodes)))
	for _, n := range sn.nodes {
		msg(n)
	}
	if hd.NextDirectiveId == FirstDirectiveID {
		return
	}
	put(hd.NextDirectiveId)
	put(uint64(len(sn.directives)))
	for _, d := range sn.directives {
		msg(d)
	}
}

// sortRecords puts the namespace records in key order, so equal states
// hash and write equal bytes. It runs after the capture, off the apply
// path. Files and blocks come in key order from the captured tables
// (filled in here, once), nodes from a map (sorted here), directives
// sorted by id from the capture, sessions' results in request order.
func (sn *snapshot) sortRecords() {
	if sn.files == nil && sn.fileTab.t != nil {
		sn.files = sn.fileTab.sorted()
	}
	if sn.blocks == nil && sn.blockTab.t != nil {
		sn.blocks = sn.blockTab.sorted()
	}
	sort.Slice(sn.files, func(i, j int) bool { return sn.files[i].Path < sn.files[j].Path })
	sort.Slice(sn.blocks, func(i, j int) bool { return sn.blocks[i].Id < sn.blocks[j].Id })
	sort.Slice(sn.nodes, func(i, j int) bool { return sn.nodes[i].Id < sn.nodes[j].Id })
}
