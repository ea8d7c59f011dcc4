package fsm

import (
	"sort"
	"strings"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

// eventLog holds the retained journal events in seq order, packed for the
// heap and the garbage collector: events live in blocks of at most
// blockMaxEvents events or about blockMaxBytes of payload, each block one
// payload buffer, one array of fixed-size records and a small table of the
// distinct event types and client ids it holds. A retained 256-byte event
// costs its payload plus ~35 bytes (docs/benchmarks.md, "Memory per retained
// event") and no object of its own: the collector marks a few hundred
// pointer-free blocks per member instead of four objects per event, and a
// member's heap (and the fresh memory it faults in while it grows towards
// the GC goal) follows.
//
// A block is append-only: a byte, record or string once written is never
// changed, so a snapshot or a reader may keep slices of it (view, event)
// while Apply appends past them. Trim drops whole blocks; the trimmed head
// of the oldest block stays in memory until the block is dropped, at most
// one block's worth.
type eventLog struct {
	// blocks, oldest first (blocks[i].first < blocks[i+1].first); only
	// the last one takes events. A copy of this slice is a view of the
	// log as of the copy: appends write past the copied slices' lengths.
	blocks []eventBlock
	// intern maps the last block's strs back to their index.
	intern map[string]uint32
	// spare is the payload capacity to give the next block: the last
	// full block's payload bytes, so a steady stream fills blocks without
	// growing (copying) their buffers.
	spare int
}

const (
	blockMaxEvents = 256
	blockMaxBytes  = 1 << 20
	blockMinBytes  = 4 << 10
)

type eventBlock struct {
	first uint64 // seq of meta[0]
	meta  []eventMeta
	data  []byte   // payloads back to back: event i is data[meta[i-1].end:meta[i].end]
	strs  []string // distinct types and client ids, referred to by index
}

// eventMeta is one event's record; its seq is the block's first plus its
// position.
type eventMeta struct {
	index      uint64 // Raft index of the entry that carried it
	requestSeq uint64
	end        uint32 // end of its payload in data
	typ        uint32 // strs index
	client     uint32 // strs index
}

func (b *eventBlock) full() bool {
	return len(b.meta) >= blockMaxEvents || len(b.data) >= blockMaxBytes
}

// str is s's index in the last block's strs, added if new.
func (l *eventLog) str(s string) uint32 {
	if i, ok := l.intern[s]; ok {
		return i
	}
	b := &l.blocks[len(l.blocks)-1]
	i := uint32(len(b.strs))
	s = strings.Clone(s) // the caller's may alias a log entry
	b.strs = append(b.strs, s)
	l.intern[s] = i
	return i
}

// add appends the event with the next seq (the caller's).
func (l *eventLog) add(seq uint64, typ string, payload []byte, clientID string, requestSeq, index uint64) {
	n := len(l.blocks)
	if n == 0 || l.blocks[n-1].full() || uint64(len(l.blocks[n-1].data))+uint64(len(payload)) > 1<<32-1 {
		if n > 0 {
			l.spare = len(l.blocks[n-1].data)
		}
		c := min(max(l.spare, blockMinBytes, len(payload)), blockMaxBytes+len(payload))
		l.blocks = append(l.blocks, eventBlock{
			first: seq,
			meta:  make([]eventMeta, 0, blockMaxEvents),
			data:  make([]byte, 0, c),
		})
		l.intern = make(map[string]uint32)
	}
	typIdx, clientIdx := l.str(typ), l.str(clientID)
	b := &l.blocks[len(l.blocks)-1]
	b.data = append(b.data, payload...)
	b.meta = append(b.meta, eventMeta{
		index:      index,
		requestSeq: requestSeq,
		end:        uint32(len(b.data)),
		typ:        typIdx,
		client:     clientIdx,
	})
}

// trimTo drops every block whose events all lie below seq.
func (l *eventLog) trimTo(seq uint64) {
	k := 0
	for k < len(l.blocks) && l.blocks[k].first+uint64(len(l.blocks[k].meta)) <= seq {
		k++
	}
	if k == 0 {
		return
	}
	// A fresh array, so the dropped blocks are not kept reachable by the
	// old one's head (a snapshot holds its own view).
	l.blocks = append([]eventBlock(nil), l.blocks[k:]...)
}

func (l *eventLog) reset() { l.blocks, l.intern, l.spare = nil, nil, 0 }

// view captures the log as it is now; later appends do not show in it.
func (l *eventLog) view() []eventBlock { return append([]eventBlock(nil), l.blocks...) }

// payload is the payload of the event at position i of the block; it
// aliases the block's buffer, which is never written there again.
func (b *eventBlock) payload(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = b.meta[i-1].end
	}
	end := b.meta[i].end
	return b.data[start:end:end]
}

// event is the stored event at position i of the block (its payload
// aliases the block).
func (b *eventBlock) event(i int) *pb.StoredEvent {
	m := &b.meta[i]
	return &pb.StoredEvent{
		Seq:        b.first + uint64(i),
		Type:       b.strs[m.typ],
		Payload:    b.payload(i),
		ClientId:   b.strs[m.client],
		RequestSeq: m.requestSeq,
		Index:      m.index,
	}
}

// eachEvent calls fn for every event of blocks (a log's, or a view) from
// seq from on, in order, until fn returns false. The event is fn's to keep.
func eachEvent(blocks []eventBlock, from uint64, fn func(*pb.StoredEvent) bool) {
	i := sort.Search(len(blocks), func(i int) bool { return blocks[i].first+uint64(len(blocks[i].meta)) > from })
	for ; i < len(blocks); i++ {
		b := &blocks[i]
		j := 0
		if from > b.first {
			j = int(from - b.first)
		}
		for ; j < len(b.meta); j++ {
			if !fn(b.event(j)) {
				return
			}
		}
	}
}

// read returns up to max events from seq from on.
func (l *eventLog) read(from uint64, max int) []*pb.StoredEvent {
	if max <= 0 {
		return nil
	}
	out := make([]*pb.StoredEvent, 0, min(max, 1024))
	eachEvent(l.blocks, from, func(e *pb.StoredEvent) bool {
		out = append(out, e)
		return len(out) < max
	})
	return out
}

// at returns the event with seq, which the caller knows is held.
func (l *eventLog) at(seq uint64) *pb.StoredEvent {
	evs := l.read(seq, 1)
	if len(evs) == 0 || evs[0].Seq != seq {
		return nil
	}
	return evs[0]
}
