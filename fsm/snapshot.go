package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// SnapshotFormatVersion is the newest snapshot format this build writes.
// Restore reads every version up to it and refuses newer ones.
//
// Format 6 added the access control (one AclState record after the
// directives, log format 12); it is written only when the state holds
// some, so a state without any still snapshots in format 5, which a
// build of log format 11 reads during an upgrade. Format 5 added the
// sessions' dropped_through (log format 5); format 4
// added the cache directives; format 3 added the namespace (files, blocks,
// nodes, counters); format 2 added the journal header (config, segments,
// consumers); format 1 is still
// read, its segments rebuilt from the events. An older build refuses a
// newer format (ErrSnapshotVersion) rather than misread it.
const SnapshotFormatVersion = 6

// aclSnapshotFormat is the first snapshot format with an ACL record.
const aclSnapshotFormat = 6

// snapshotMagic opens every snapshot stream.
var snapshotMagic = [8]byte{'L', 'B', 'K', 'S', 'N', 'A', 'P', '\n'}

// maxSnapshotRecord bounds one record; an event is capped far below this.
const maxSnapshotRecord = 64 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshotCorrupt reports a snapshot that fails framing or its checksum.
var ErrSnapshotCorrupt = errors.New("fsm: snapshot corrupt")

// ErrSnapshotVersion reports a snapshot written by a newer format.
var ErrSnapshotVersion = errors.New("fsm: snapshot format version not supported")

type snapshot struct {
	header    *pb.SnapshotHeader
	events    []eventBlock // a view, from header.FirstSeq on
	sessions  []sessionCapture
	members   []*pb.Member
	segments  []*pb.Segment
	consumers []*pb.Consumer
	// Namespace records are immutable once stored (copy on write): the
	// snapshot shares them and sorts its own slices in write.
	// fileTab and blockTab are the tables as captured (clones, O(1));
	// files and blocks are filled from them in key order off the apply
	// path (sortRecords).
	fileTab    cowTable[string, *pb.FileRecord]
	blockTab   cowTable[uint64, *pb.BlockRecord]
	files      []*pb.FileRecord
	blocks     []*pb.BlockRecord
	nodes      []*pb.NodeRecord
	directives []*pb.CacheDirective
	acl        *pb.AclState // nil: none (records shared, immutable)
}

func captureSnapshot(s *State) *snapshot {
	sn := &snapshot{
		header: &pb.SnapshotHeader{
			FormatVersion:         aclSnapshotFormat - 1,
			NextSeq:               s.nextSeq,
			FirstSeq:              s.firstSeq,
			EventCount:            uint64(s.EventCount()),
			SessionCount:          uint64(len(s.sessions)),
			MemberCount:           uint64(len(s.members)),
			AppliedIndex:          s.appliedIndex,
			SegmentCount:          uint64(len(s.segments)),
			ConsumerCount:         uint64(len(s.consumers)),
			JournalConfig:         proto.Clone(s.config).(*pb.JournalConfig),
			NextSegmentId:         s.nextSegmentID,
			Trims:                 s.trims,
			LogFormat:             s.logFormat,
			SessionClockUnixNanos: s.clock,
			FileCount:             uint64(s.ns.files.len()),
			BlockCount:            uint64(s.ns.blocks.len()),
			NodeCount:             uint64(len(s.ns.nodes)),
			NextBlockId:           s.ns.nextBlockID,
			NextGs:                s.ns.nextGS,
			AuditFromSeq:          s.ns.auditFrom,
			DirectiveCount:        uint64(len(s.ns.directives)),
			NextDirectiveId:       s.ns.nextDirectiveID,
		},
		events:    s.events.view(),
		members:   s.Members(),
		consumers: s.Consumers(),
	}
	// A sealed segment never changes again (a trim or reset replaces the
	// table, it does not edit it): share those; the open one changes with
	// every append: copy it.
	sn.segments = slices.Clone(s.segments)
	if n := len(sn.segments); n > 0 && !sn.segments[n-1].Sealed {
		sn.segments[n-1] = proto.Clone(sn.segments[n-1]).(*pb.Segment)
	}
	sn.fileTab = s.ns.files.clone()
	sn.blockTab = s.ns.blocks.clone()
	sn.nodes = make([]*pb.NodeRecord, 0, len(s.ns.nodes))
	for _, n := range s.ns.nodes {
		sn.nodes = append(sn.nodes, n)
	}
	sn.directives = s.CacheDirectives()
	if sn.acl = s.acl.record(); sn.acl != nil {
		sn.header.FormatVersion, sn.header.AclCount = aclSnapshotFormat, 1
	}
	sn.sessions = make([]sessionCapture, 0, len(s.sessions))
	s.captures.Add(1) // before sharing the sessions' results (session.capture)
	for e := s.lru.Front(); e != nil; e = e.Next() {
		sn.sessions = append(sn.sessions, e.Value.(*session).capture())
	}
	return sn
}

// Persist implements raft.FSMSnapshot. Format (see doc.go): magic, uint32
// format version, length-delimited SnapshotHeader, length-delimited
// SnapshotRecords, then a CRC32C (Castagnoli) of every preceding byte.
func (sn *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := sn.write(sink); err != nil {
		sink.Cancel()
		return err
	}
	// The file snapshot store fsyncs the data and its metadata in Close
	// before the snapshot becomes visible (invariant 6).
	return sink.Close()
}

func (sn *snapshot) write(w io.Writer) error {
	sn.sortRecords()
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10)
	bw.Write(snapshotMagic[:])
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], sn.header.FormatVersion)
	bw.Write(v[:])
	buf := make([]byte, 0, 4096)
	lb := make([]byte, binary.MaxVarintLen64)
	writeRecord := func(b []byte) {
		n := binary.PutUvarint(lb, uint64(len(b)))
		bw.Write(lb[:n])
		bw.Write(b) // a write error sticks in bw: Flush reports it
	}
	writeMsg := func(m proto.Message) error {
		var err error
		buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf[:0], m)
		if err != nil {
			return err
		}
		writeRecord(buf)
		return nil
	}
	if err := writeMsg(sn.header); err != nil {
		return err
	}
	for _, b := range sn.events {
		for j := range b.meta {
			if seq := b.first + uint64(j); seq >= sn.header.FirstSeq {
				m := &b.meta[j]
				buf = appendEventRecord(buf[:0], seq, b.strs[m.typ], b.payload(j), b.strs[m.client], m.requestSeq, m.index)
				writeRecord(buf)
			}
		}
	}
	rec := &pb.SnapshotRecord{}
	for i := range sn.sessions {
		rec.Record = &pb.SnapshotRecord_Session{Session: sn.sessions[i].record()}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, m := range sn.members {
		rec.Record = &pb.SnapshotRecord_Member{Member: m}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, seg := range sn.segments {
		rec.Record = &pb.SnapshotRecord_Segment{Segment: seg}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, c := range sn.consumers {
		rec.Record = &pb.SnapshotRecord_Consumer{Consumer: c}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, f := range sn.files {
		rec.Record = &pb.SnapshotRecord_File{File: f}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, b := range sn.blocks {
		rec.Record = &pb.SnapshotRecord_Block{Block: b}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, n := range sn.nodes {
		rec.Record = &pb.SnapshotRecord_Node{Node: n}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	for _, d := range sn.directives {
		rec.Record = &pb.SnapshotRecord_Directive{Directive: d}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	if sn.acl != nil {
		rec.Record = &pb.SnapshotRecord_Acl{Acl: sn.acl}
		if err := writeMsg(rec); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc.Sum32())
	_, err := w.Write(sum[:])
	return err
}

// Release implements raft.FSMSnapshot.
func (sn *snapshot) Release() {}

// ReadSnapshot decodes and verifies a snapshot stream into a new State.
func ReadSnapshot(r io.Reader) (*State, error) {
	rr := &recordReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(crcTable), buf: make([]byte, 4096)}
	var head [12]byte
	if _, err := io.ReadFull(rr.r, head[:]); err != nil {
		return nil, fmt.Errorf("%w: short header: %v", ErrSnapshotCorrupt, err)
	}
	rr.crc.Write(head[:])
	if [8]byte(head[:8]) != snapshotMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrSnapshotCorrupt)
	}
	version := binary.BigEndian.Uint32(head[8:])
	if version == 0 || version > SnapshotFormatVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads up to %d", ErrSnapshotVersion, version, SnapshotFormatVersion)
	}
	unmarshal := func(b []byte, m proto.Message) error {
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("%w: record: %v", ErrSnapshotCorrupt, err)
		}
		return nil
	}
	hb, err := rr.next()
	if err != nil {
		return nil, err
	}
	var h pb.SnapshotHeader
	if err := unmarshal(hb, &h); err != nil {
		return nil, err
	}
	if h.LogFormat > CommandVersion {
		return nil, fmt.Errorf("%w: a state at log format %d, this build reads up to %d", ErrSnapshotVersion, h.LogFormat, CommandVersion)
	}
	timed := h.LogFormat >= SessionIdleFormat
	if !timed && (h.SessionClockUnixNanos != 0 || h.JournalConfig.GetSessionIdleTimeoutSeconds() != 0) {
		return nil, fmt.Errorf("%w: a session clock or idle timeout at log format %d", ErrSnapshotCorrupt, h.LogFormat)
	}
	if h.JournalConfig.GetSessionIdleTimeoutSeconds() > maxSessionIdleSeconds {
		return nil, fmt.Errorf("%w: session idle timeout %d s", ErrSnapshotCorrupt, h.JournalConfig.GetSessionIdleTimeoutSeconds())
	}
	if jc := h.JournalConfig; h.LogFormat < HeldConfigFormat && (jc.GetHeld() || jc.GetMaxSegments() != 0 || jc.GetMaxEvents() != 0) {
		return nil, fmt.Errorf("%w: journal settings held by the cluster at log format %d", ErrSnapshotCorrupt, h.LogFormat)
	}
	if jc := h.JournalConfig; jc.GetHeld() && ValidJournalConfig(jc) != nil {
		return nil, fmt.Errorf("%w: held journal config %v out of bounds", ErrSnapshotCorrupt, jc)
	}
	st := NewState()
	st.appliedIndex, st.nextSeq, st.firstSeq = h.AppliedIndex, h.NextSeq, h.FirstSeq
	st.clock = h.SessionClockUnixNanos
	if st.firstSeq == 0 || st.nextSeq < st.firstSeq || h.EventCount != st.nextSeq-st.firstSeq {
		return nil, fmt.Errorf("%w: header seqs first=%d next=%d count=%d", ErrSnapshotCorrupt, h.FirstSeq, h.NextSeq, h.EventCount)
	}
	restored := uint64(0) // event records read
	if version >= 2 {
		if h.JournalConfig == nil || h.JournalConfig.EventsPerSegment == 0 || h.JournalConfig.SegmentBytes == 0 {
			return nil, fmt.Errorf("%w: journal config missing", ErrSnapshotCorrupt)
		}
		st.config = h.JournalConfig
		st.nextSegmentID, st.trims, st.logFormat = h.NextSegmentId, h.Trims, h.LogFormat
	} else if h.SegmentCount != 0 || h.ConsumerCount != 0 {
		return nil, fmt.Errorf("%w: format 1 snapshot with journal records", ErrSnapshotCorrupt)
	}
	if version >= 3 {
		if h.NextBlockId < FirstBlockID || h.NextGs < FirstGS {
			return nil, fmt.Errorf("%w: namespace counters next block id %d, next GS %d", ErrSnapshotCorrupt, h.NextBlockId, h.NextGs)
		}
		st.ns.nextBlockID, st.ns.nextGS, st.ns.auditFrom = h.NextBlockId, h.NextGs, h.AuditFromSeq
	} else if h.FileCount != 0 || h.BlockCount != 0 || h.NodeCount != 0 {
		return nil, fmt.Errorf("%w: format %d snapshot with namespace records", ErrSnapshotCorrupt, version)
	}
	if version >= 4 {
		st.ns.nextDirectiveID = h.NextDirectiveId
	} else if h.DirectiveCount != 0 || h.NextDirectiveId != 0 {
		return nil, fmt.Errorf("%w: format %d snapshot with cache directives", ErrSnapshotCorrupt, version)
	}
	if h.FormatVersion != 0 && h.FormatVersion != version {
		return nil, fmt.Errorf("%w: stream of format %d, header says %d", ErrSnapshotCorrupt, version, h.FormatVersion)
	}
	if h.AclCount > 1 || h.AclCount != 0 && (version < aclSnapshotFormat || h.LogFormat < AclFormat) {
		return nil, fmt.Errorf("%w: %d ACL records in a format %d snapshot at log format %d", ErrSnapshotCorrupt, h.AclCount, version, h.LogFormat)
	}
	base := h.EventCount + h.SessionCount + h.MemberCount
	journalEnd := base + h.SegmentCount + h.ConsumerCount
	filesEnd := journalEnd + h.FileCount
	blocksEnd := filesEnd + h.BlockCount
	nodesEnd := blocksEnd + h.NodeCount
	directivesEnd := nodesEnd + h.DirectiveCount
	total := directivesEnd + h.AclCount
	for i := uint64(0); i < total; i++ {
		b, err := rr.next()
		if err != nil {
			return nil, err
		}
		if e, ok := decodeEventRecord(b); ok {
			if err := st.restoreEvent(i, h.EventCount, restored, e); err != nil {
				return nil, err
			}
			restored++
			continue
		}
		var rec pb.SnapshotRecord
		if err := unmarshal(b, &rec); err != nil {
			return nil, err
		}
		switch x := rec.Record.(type) {
		case *pb.SnapshotRecord_Event:
			e := x.Event
			v := storedEventView{seq: e.Seq, typ: e.Type, payload: e.Payload, clientID: e.ClientId, requestSeq: e.RequestSeq, index: e.Index}
			if err := st.restoreEvent(i, h.EventCount, restored, v); err != nil {
				return nil, err
			}
			restored++
		case *pb.SnapshotRecord_Session:
			if i < h.EventCount || i >= h.EventCount+h.SessionCount {
				return nil, fmt.Errorf("%w: session record out of place", ErrSnapshotCorrupt)
			}
			sess, err := restoreSession(version, x.Session)
			if err != nil {
				return nil, err
			}
			if _, dup := st.sessions[sess.id]; dup {
				return nil, fmt.Errorf("%w: duplicate session %q", ErrSnapshotCorrupt, sess.id)
			}
			// Sessions come least recently used first: from log format 9
			// their last use never decreases and is never past the clock
			// (expiry walks them in that order); before, it is not kept.
			switch prev := st.lru.Back(); {
			case !timed && sess.lastUsed != 0:
				return nil, fmt.Errorf("%w: session %q has a last use at log format %d", ErrSnapshotCorrupt, sess.id, h.LogFormat)
			case timed && (sess.lastUsed > st.clock || prev != nil && sess.lastUsed < prev.Value.(*session).lastUsed):
				return nil, fmt.Errorf("%w: session %q last used at %d, out of order (clock %d)", ErrSnapshotCorrupt, sess.id, sess.lastUsed, st.clock)
			}
			st.addRestored(sess)
		case *pb.SnapshotRecord_Member:
			if i < h.EventCount+h.SessionCount || i >= base {
				return nil, fmt.Errorf("%w: member record out of place", ErrSnapshotCorrupt)
			}
			st.members[x.Member.Id] = x.Member
		case *pb.SnapshotRecord_Segment:
			if i < base || i >= base+h.SegmentCount {
				return nil, fmt.Errorf("%w: segment record out of place", ErrSnapshotCorrupt)
			}
			st.segments = append(st.segments, x.Segment)
			st.segBytes += x.Segment.Bytes
		case *pb.SnapshotRecord_Consumer:
			if i < base+h.SegmentCount || i >= journalEnd {
				return nil, fmt.Errorf("%w: consumer record out of place", ErrSnapshotCorrupt)
			}
			st.consumers[x.Consumer.Name] = x.Consumer.AckedSeq
		case *pb.SnapshotRecord_File:
			if i < journalEnd || i >= filesEnd {
				return nil, fmt.Errorf("%w: file record out of place", ErrSnapshotCorrupt)
			}
			if _, dup := st.ns.files.get(x.File.Path); dup {
				return nil, fmt.Errorf("%w: duplicate file %q", ErrSnapshotCorrupt, x.File.Path)
			}
			st.ns.files.put(x.File.Path, x.File)
		case *pb.SnapshotRecord_Block:
			if i < filesEnd || i >= blocksEnd {
				return nil, fmt.Errorf("%w: block record out of place", ErrSnapshotCorrupt)
			}
			if _, dup := st.ns.blocks.get(x.Block.Id); dup {
				return nil, fmt.Errorf("%w: duplicate block %d", ErrSnapshotCorrupt, x.Block.Id)
			}
			st.ns.blocks.put(x.Block.Id, x.Block)
		case *pb.SnapshotRecord_Node:
			if i < blocksEnd || i >= nodesEnd {
				return nil, fmt.Errorf("%w: node record out of place", ErrSnapshotCorrupt)
			}
			if _, dup := st.ns.nodes[x.Node.Id]; dup {
				return nil, fmt.Errorf("%w: duplicate node %q", ErrSnapshotCorrupt, x.Node.Id)
			}
			st.ns.nodes[x.Node.Id] = x.Node
		case *pb.SnapshotRecord_Directive:
			if i < nodesEnd || i >= directivesEnd {
				return nil, fmt.Errorf("%w: directive record out of place", ErrSnapshotCorrupt)
			}
			if _, dup := st.ns.directives[x.Directive.Id]; dup {
				return nil, fmt.Errorf("%w: duplicate directive %d", ErrSnapshotCorrupt, x.Directive.Id)
			}
			st.ns.directives[x.Directive.Id] = x.Directive
		case *pb.SnapshotRecord_Acl:
			if i < directivesEnd {
				return nil, fmt.Errorf("%w: ACL record out of place", ErrSnapshotCorrupt)
			}
			if st.acl, err = restoreAcl(x.Acl); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: empty record %d", ErrSnapshotCorrupt, i)
		}
	}
	want := rr.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(rr.r, sum[:]); err != nil {
		return nil, fmt.Errorf("%w: missing checksum: %v", ErrSnapshotCorrupt, err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrSnapshotCorrupt, got, want)
	}
	if _, err := rr.r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing bytes after checksum", ErrSnapshotCorrupt)
	}
	if version == 1 {
		st.rebuildSegments()
	} else if err := st.checkSegments(); err != nil {
		return nil, err
	}
	if err := st.ns.rebuild(); err != nil {
		return nil, err
	}
	return st, nil
}

// restoreSession reads a session record of a snapshot of format version.
func restoreSession(version uint32, s *pb.Session) (*session, error) {
	if s.DroppedThrough != 0 && version < 5 {
		return nil, fmt.Errorf("%w: format %d snapshot with a session's dropped results", ErrSnapshotCorrupt, version)
	}
	sess := &session{id: s.ClientId, ackedSeq: s.AckedSeq, lastIndex: s.LastIndex, droppedThrough: s.DroppedThrough, lastUsed: s.LastUsedUnixNanos, kept: make([]keptResult, len(s.Results))}
	for i, r := range s.Results {
		sess.kept[i] = keptResult{requestSeq: r.RequestSeq, firstSeq: r.FirstSeq, count: r.Count}
	}
	// Written in request order; the writer's order is not relied on.
	slices.SortFunc(sess.kept, func(a, b keptResult) int { return cmpRequestSeq(a, b.requestSeq) })
	for i := 1; i < len(sess.kept); i++ {
		if sess.kept[i].requestSeq == sess.kept[i-1].requestSeq {
			return nil, fmt.Errorf("%w: session %q keeps request %d twice", ErrSnapshotCorrupt, s.ClientId, sess.kept[i].requestSeq)
		}
	}
	return sess, nil
}

// restoreEvent adds event record i of a snapshot holding count events,
// restored of which came before it.
func (s *State) restoreEvent(i, count, restored uint64, e storedEventView) error {
	want := s.firstSeq + restored
	if i >= count || e.seq != want {
		return fmt.Errorf("%w: event record %d has seq %d, want %d", ErrSnapshotCorrupt, i, e.seq, want)
	}
	s.events.add(e.seq, e.typ, e.payload, e.clientID, e.requestSeq, e.index)
	return nil
}

// checkSegments verifies the restored segment table tiles the retained
// events exactly.
func (s *State) checkSegments() error {
	want, bytes := s.firstSeq, uint64(0)
	for i, seg := range s.segments {
		if seg.FirstSeq != want || seg.LastSeq < seg.FirstSeq || seg.Events != seg.LastSeq-seg.FirstSeq+1 || (!seg.Sealed && i != len(s.segments)-1) {
			return fmt.Errorf("%w: segment %d does not tile the journal", ErrSnapshotCorrupt, seg.Id)
		}
		want, bytes = seg.LastSeq+1, bytes+seg.Bytes
	}
	if want != s.nextSeq {
		return fmt.Errorf("%w: segments end at %d, journal at %d", ErrSnapshotCorrupt, want, s.nextSeq)
	}
	if bytes != s.segBytes { // derived as segments change: a bug, not a bad snapshot
		return fmt.Errorf("fsm: segments hold %d bytes, counted %d", bytes, s.segBytes)
	}
	return nil
}
