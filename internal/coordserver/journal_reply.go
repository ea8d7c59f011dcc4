package coordserver

import (
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Read and Tail replies are sized by bytes, not only by events: eight
// events at the 1 MiB cap must not make a reply the caller's gRPC stack
// refuses (it answers ResourceExhausted and the caller sees no event).

// maxReplyBytes is the largest Read or Tail reply message: the default
// receive limit of gRPC clients (4 MiB in grpc-go, grpc-java, grpcurl),
// so a caller that never raised its limit reads every event below it.
// A request's max_bytes can only lower it.
const maxReplyBytes = 4 << 20

// replyOverhead covers a reply's fields besides its events: a few
// varints (ReadResponse: applied_index, next_seq, end; TailResponse:
// safe_pos, applied_index), each at most 11 bytes with its tag.
const replyOverhead = 64

// replyBudget is the event bytes a reply may hold for a request's
// max_bytes (0: maxReplyBytes).
func replyBudget(maxBytes uint32) int {
	n := maxReplyBytes
	if maxBytes > 0 && int64(maxBytes) < int64(n) {
		n = int(maxBytes)
	}
	return max(n-replyOverhead, 0)
}

// eventWireSize is e's encoded size as an element of a reply's repeated
// StoredEvent field: tag, length and the message (pb.StoredEvent has
// fields 1-6, each with a one-byte tag; proto3 leaves out zero values).
func eventWireSize(e *fsmpb.StoredEvent) int {
	n := 0
	for _, v := range [...]uint64{e.Seq, e.RequestSeq, e.Index} {
		if v != 0 {
			n += 1 + protowire.SizeVarint(v)
		}
	}
	for _, l := range [...]int{len(e.Type), len(e.Payload), len(e.ClientId)} {
		if l != 0 {
			n += 1 + protowire.SizeBytes(l)
		}
	}
	return 1 + protowire.SizeBytes(n)
}

// fitReply returns how many events from the front of evs fit in budget
// bytes: at least one (a reply must make progress, whatever an event's
// size), and whether the budget, not the end of evs, stopped it.
func fitReply(evs []*fsmpb.StoredEvent, budget int) (n int, cut bool) {
	size := 0
	for i, e := range evs {
		size += eventWireSize(e)
		if size > budget && i > 0 {
			return i, true
		}
	}
	return len(evs), false
}

// readPage is the reply to a Read from evs, the events st.Read returned
// (up to the read's max), on a member whose next seq is next.
func readPage(evs []*fsmpb.StoredEvent, maxBytes uint32, next uint64) ([]*pb.StoredEvent, pb.ReadEnd) {
	n, cut := fitReply(evs, replyBudget(maxBytes))
	out := apiEvents(evs[:n])
	switch {
	case cut:
		return out, pb.ReadEnd_READ_END_BYTES
	case n == 0 || out[n-1].Seq+1 >= next:
		return out, pb.ReadEnd_READ_END_SAFE_POS
	}
	// st.Read stopped short of next: at the read's max.
	return out, pb.ReadEnd_READ_END_MAX
}
