package console

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// The journal index's bounds: events are counted by type in chunks of
// chunkSeqs seqs, so that a trim drops whole chunks and recounts one;
// at most maxTypes distinct types are named, the rest are counted
// together as otherTypes.
const (
	chunkSeqs   = 8192
	readBatch   = 1000
	maxTypes    = 512
	otherTypes  = "(other types)"
	recountSeqs = chunkSeqs
)

// index follows this member's applied journal from its first retained
// event and keeps, for the retained events, counts by type and the block
// recovery audit events (decoded as the SDK decodes them for coord
// recovery ls). It reads in batches under the state's read lock, as a
// gRPC Tail does, and never holds it while counting.
type index struct {
	src Source

	mu     sync.Mutex
	first  uint64 // first retained seq as last seen
	next   uint64 // next seq to read (0: not started)
	head   uint64 // the journal's next seq as last seen
	chunks map[uint64]map[string]uint64
	types  map[string]bool // the named types
	recov  []recoveryEvent
	errors uint64 // recovery events that did not decode
}

func newIndex(src Source) *index {
	return &index{src: src, chunks: map[uint64]map[string]uint64{}, types: map[string]bool{}}
}

func (x *index) run(ctx context.Context) {
	for {
		evs, first, next, changed := x.src.Applied(x.nextSeq(), readBatch)
		x.add(evs, first, next)
		if len(evs) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func (x *index) nextSeq() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return max(x.next, 1)
}

// add counts a batch read at nextSeq, the journal then holding
// [first, next).
func (x *index) add(evs []*pbEvent, first, next uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.head = next
	if first > x.first {
		x.trimTo(first)
	}
	x.next = max(x.next, first)
	for _, e := range evs {
		if e.Seq < x.next {
			continue
		}
		x.count(e.Seq, e.Type, 1)
		if e.Type == eventRecoveryStarted || e.Type == eventRecoveryCommitted {
			if ev, err := decodeRecovery(e); err != nil {
				x.errors++
			} else {
				x.recov = append(x.recov, ev)
			}
		}
		x.next = e.Seq + 1
	}
}

func (x *index) count(seq uint64, typ string, d int) {
	if !x.types[typ] {
		if len(x.types) >= maxTypes {
			typ = otherTypes
		} else {
			x.types[typ] = true
		}
	}
	c := x.chunks[seq/chunkSeqs]
	if c == nil {
		c = map[string]uint64{}
		x.chunks[seq/chunkSeqs] = c
	}
	c[typ] = uint64(int64(c[typ]) + int64(d))
	if c[typ] == 0 {
		delete(c, typ)
	}
}

// trimTo forgets what lies below first: whole chunks, then the first
// chunk's part below it, recounted from what is retained (x.mu held; at
// most recountSeqs events are read).
func (x *index) trimTo(first uint64) {
	x.first = first
	for id := range x.chunks {
		if (id+1)*chunkSeqs <= first {
			delete(x.chunks, id)
		}
	}
	if c := x.chunks[first/chunkSeqs]; c != nil && first%chunkSeqs != 0 {
		clear(c)
		from, end := first, min(x.next, (first/chunkSeqs+1)*chunkSeqs)
		for from < end {
			evs, _, _, _ := x.src.Applied(from, int(min(uint64(readBatch), end-from)))
			if len(evs) == 0 {
				break
			}
			for _, e := range evs {
				if e.Seq < end {
					x.count(e.Seq, e.Type, 1)
				}
			}
			from = evs[len(evs)-1].Seq + 1
		}
	}
	i, _ := slices.BinarySearchFunc(x.recov, first, func(e recoveryEvent, seq uint64) int { return compare(e.Seq, seq) })
	x.recov = slices.Delete(x.recov, 0, i)
}

// TypeCount is how many retained events have one type.
type TypeCount struct {
	Type  string `json:"type"`
	Count uint64 `json:"count"`
}

// indexState is what the index has counted: the retained events' counts
// by type (most first) up to seq Indexed, and the journal's next seq.
type indexState struct {
	Counts  []TypeCount
	Indexed uint64 // the last seq counted (0: none)
	Head    uint64 // the journal's last safe seq as the index last saw it
}

func (x *index) state() indexState {
	x.mu.Lock()
	defer x.mu.Unlock()
	sum := map[string]uint64{}
	for _, c := range x.chunks {
		for t, n := range c {
			sum[t] += n
		}
	}
	out := indexState{Indexed: max(x.next, 1) - 1, Head: max(x.head, 1) - 1}
	for t, n := range sum {
		out.Counts = append(out.Counts, TypeCount{Type: t, Count: n})
	}
	slices.SortFunc(out.Counts, func(a, b TypeCount) int {
		if a.Count != b.Count {
			return compare(b.Count, a.Count)
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

// recoveries folds the retained recovery events (as coord recovery ls
// does).
func (x *index) recoveries(now time.Time) []Recovery {
	x.mu.Lock()
	evs := slices.Clone(x.recov)
	x.mu.Unlock()
	return foldRecoveries(evs, now)
}
