package fsm

import (
	"sort"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// eventLog holds the retained journal events in seq order, packed for the
// heap and the garbage collector: events live in blocks of at most
// blockMaxEvents events or about blockMaxBytes of payload, each block one
// payload buffer, one array of fixed-size records and a small table of the
// distinct event types and client ids it holds. A retained 256-byte event
// costs its payload plus ~40 bytes (docs/benchmarks.md, "Memory per retained
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
	blocks []*eventBlock // oldest first; blocks[i].first < blocks[i+1].first
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
	// intern maps strs back to their index while the block takes events;
	// nil once it is full.
	intern map[string]uint32
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

// blockView is a block as of one moment: the slices a snapshot keeps.
type blockView struct {
	first uint64
	meta  []eventMeta
	data  []byte
	strs  []string
}

func (b *eventBlock) full() bool {
	return len(b.meta) >= blockMaxEvents || len(b.data) >= blockMaxBytes
}

func (b *eventBlock) str(s string) uint32 {
	if i, ok := b.intern[s]; ok {
		return i
	}
	i := uint32(len(b.strs))
	s = strings.Clone(s) // the caller's may alias a log entry
	b.strs = append(b.strs, s)
	b.intern[s] = i
	return i
}

// add appends the event with the next seq (the caller's).
func (l *eventLog) add(seq uint64, typ string, payload []byte, clientID string, requestSeq, index uint64) {
	var b *eventBlock
	if n := len(l.blocks); n > 0 && !l.blocks[n-1].full() && uint64(len(l.blocks[n-1].data))+uint64(len(payload)) <= 1<<32-1 {
		b = l.blocks[n-1]
	} else {
		if n > 0 {
			last := l.blocks[n-1]
			last.intern = nil
			l.spare = len(last.data)
		}
		c := min(max(l.spare, blockMinBytes, len(payload)), blockMaxBytes+len(payload))
		b = &eventBlock{
			first:  seq,
			meta:   make([]eventMeta, 0, blockMaxEvents),
			data:   make([]byte, 0, c),
			intern: make(map[string]uint32),
		}
		l.blocks = append(l.blocks, b)
	}
	b.data = append(b.data, payload...)
	b.meta = append(b.meta, eventMeta{
		index:      index,
		requestSeq: requestSeq,
		end:        uint32(len(b.data)),
		typ:        b.str(typ),
		client:     b.str(clientID),
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
	// old one's head (a snapshot holds its own views).
	l.blocks = append([]*eventBlock(nil), l.blocks[k:]...)
}

func (l *eventLog) reset() { l.blocks, l.spare = nil, 0 }

// view captures the log as it is now; later appends do not show in it.
func (l *eventLog) view() []blockView {
	out := make([]blockView, len(l.blocks))
	for i, b := range l.blocks {
		out[i] = blockView{first: b.first, meta: b.meta[:len(b.meta):len(b.meta)], data: b.data[:len(b.data):len(b.data)], strs: b.strs[:len(b.strs):len(b.strs)]}
	}
	return out
}

// event is the stored event at position i of the block. Its payload
// aliases the block's buffer, which is never written there again.
func (v *blockView) event(i int) *pb.StoredEvent {
	m := &v.meta[i]
	start := uint32(0)
	if i > 0 {
		start = v.meta[i-1].end
	}
	return &pb.StoredEvent{
		Seq:        v.first + uint64(i),
		Type:       v.strs[m.typ],
		Payload:    v.data[start:m.end:m.end],
		ClientId:   v.strs[m.client],
		RequestSeq: m.requestSeq,
		Index:      m.index,
	}
}

// eachEvent calls fn for every event of the views from seq from on, in
// order, until fn returns false. The event is fn's to keep.
func eachEvent(views []blockView, from uint64, fn func(*pb.StoredEvent) bool) {
	i := sort.Search(len(views), func(i int) bool { return views[i].first+uint64(len(views[i].meta)) > from })
	for ; i < len(views); i++ {
		v := &views[i]
		j := 0
		if from > v.first {
			j = int(from - v.first)
		}
		for ; j < len(v.meta); j++ {
			if !fn(v.event(j)) {
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
	i := sort.Search(len(l.blocks), func(i int) bool { return l.blocks[i].first+uint64(len(l.blocks[i].meta)) > from })
	for ; i < len(l.blocks) && len(out) < max; i++ {
		b := l.blocks[i]
		v := blockView{first: b.first, meta: b.meta, data: b.data, strs: b.strs}
		j := 0
		if from > b.first {
			j = int(from - b.first)
		}
		for ; j < len(v.meta) && len(out) < max; j++ {
			out = append(out, v.event(j))
		}
	}
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
