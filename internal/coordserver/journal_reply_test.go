package coordserver

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// eventWireSize must be the exact encoded size of an event in a reply,
// or replies sized by it could pass the caller's limit.
func TestEventWireSize(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		e := &fsmpb.StoredEvent{Type: strings.Repeat("t", rng.Intn(300)), Payload: make([]byte, rng.Intn(3)*rng.Intn(1<<20)), ClientId: strings.Repeat("c", rng.Intn(2)*rng.Intn(129))}
		if rng.Intn(4) > 0 {
			e.Seq, e.RequestSeq, e.Index = rng.Uint64()>>rng.Intn(64), uint64(rng.Intn(2))*rng.Uint64()>>rng.Intn(64), rng.Uint64()>>rng.Intn(64)
		}
		got := eventWireSize(e)
		want := proto.Size(&pb.ReadResponse{Events: []*pb.StoredEvent{apiEvent(e)}})
		if got != want {
			t.Fatalf("event %+v: wire size %d, encoded %d", e, got, want)
		}
	}
}

// bigEvents is a mix of event sizes up to the 1 MiB cap, many at it.
func bigEvents() [][]byte {
	var out [][]byte
	sizes := []int{1 << 20, 1 << 20, 10, 1 << 20, 700 << 10, 1 << 20, 1 << 20, 0, 1 << 20, 1<<20 - 1, 300 << 10, 1 << 20, 1 << 20, 5, 1 << 20, 2 << 10, 1 << 20}
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		out = append(out, p)
	}
	return out
}

// A Read or Tail of many events at the cap is cut by bytes, under the
// default gRPC receive limit (4 MiB) of a raw client, and under a
// request's smaller max_bytes; paging on from each reply's end reads
// every event once, and the last page says the safe pos is reached.
func TestReadTailSizedByBytes(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(i int) pb.JournalClient { return rawJournal(t, tc.cfgs[i].GRPCAddr) }
	jc := dial(leader)
	payloads := bigEvents()
	var first uint64
	c := tc.client(ctx) // retries through leader changes, exactly once
	for i, p := range payloads {
		seqs, err := c.Journal().Append(ctx, client.Event{Type: fmt.Sprintf("big-%d", i), Payload: p})
		if err != nil {
			t.Fatalf("append %d (%d bytes): %v", i, len(p), err)
		}
		if i == 0 {
			first = seqs[0]
		} else if seqs[0] != first+uint64(i) {
			t.Fatalf("append %d: seq %d after first %d", i, seqs[0], first)
		}
	}
	// Every member has applied them (the reads below are stale).
	last := first + uint64(len(payloads)) - 1
	for i := range tc.cfgs {
		eventually(t, 20*time.Second, fmt.Sprintf("c%d applies seq %d", i, last), func() bool {
			return tc.server(i).safePos() >= last
		})
	}
	check := func(what string, seq uint64, e *pb.StoredEvent) {
		t.Helper()
		i := int(seq - first)
		if e.Seq != seq || e.Type != fmt.Sprintf("big-%d", i) || !bytes.Equal(e.Payload, payloads[i]) {
			t.Fatalf("%s: seq %d: got seq %d type %q, %d bytes; want %d bytes", what, seq, e.Seq, e.Type, len(e.Payload), len(payloads[i]))
		}
	}
	for _, maxBytes := range []uint32{0, 1536 << 10, 1} {
		for _, member := range []int{leader, tc.followers(leader)[0]} {
			what := fmt.Sprintf("read max_bytes %d from c%d", maxBytes, member)
			limit := replyBudget(maxBytes) + replyOverhead
			rc := dial(member)
			next, cuts := first, 0
			for {
				resp, err := rc.Read(ctx, &pb.ReadRequest{From: next, Max: 10000, MaxBytes: maxBytes, Consistency: pb.Consistency_CONSISTENCY_STALE})
				if err != nil {
					t.Fatalf("%s from %d: %v", what, next, err)
				}
				if n := proto.Size(resp); n > limit && len(resp.Events) > 1 {
					t.Fatalf("%s from %d: reply of %d bytes, %d events, over %d", what, next, n, len(resp.Events), limit)
				}
				if len(resp.Events) == 0 {
					if next <= last {
						t.Fatalf("%s from %d: no event, end %v", what, next, resp.End)
					}
				}
				for _, e := range resp.Events {
					check(what, next, e)
					next++
				}
				if resp.End == pb.ReadEnd_READ_END_SAFE_POS {
					if next != resp.NextSeq {
						t.Fatalf("%s: end at safe pos but next %d, member's next seq %d", what, next, resp.NextSeq)
					}
					break
				}
				if resp.End != pb.ReadEnd_READ_END_BYTES {
					t.Fatalf("%s from %d: end %v with %d events", what, next, resp.End, len(resp.Events))
				}
				cuts++
			}
			// Cut at least as often as the bytes need: pages of up to limit.
			total := 0
			for _, p := range payloads {
				total += len(p)
			}
			want := min((total-1)/limit, len(payloads)-1)
			if next != last+1 || cuts < want {
				t.Fatalf("%s: read through seq %d in %d cut pages, want through %d in at least %d", what, next-1, cuts, last, want)
			}
		}
		// Tail, from the start and from mid-way, over the same events.
		for _, from := range []uint64{first, first + 3} {
			what := fmt.Sprintf("tail max_bytes %d from %d", maxBytes, from)
			limit := replyBudget(maxBytes) + replyOverhead
			sctx, scancel := context.WithCancel(ctx)
			stream, err := dial(tc.followers(leader)[1%len(tc.followers(leader))]).Tail(sctx, &pb.TailRequest{From: from, MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			next := from
			for next <= last {
				resp, err := stream.Recv()
				if err != nil {
					t.Fatalf("%s at %d: %v", what, next, err)
				}
				if n := proto.Size(resp); n > limit && len(resp.Events) > 1 {
					t.Fatalf("%s: reply of %d bytes, %d events, over %d", what, n, len(resp.Events), limit)
				}
				for _, e := range resp.Events {
					check(what, next, e)
					next++
				}
			}
			scancel()
		}
	}
	// max beyond the server's bound is served as that bound, and says so.
	resp, err := jc.Read(ctx, &pb.ReadRequest{From: last, Max: 1 << 31})
	if err != nil || len(resp.Events) != 1 || resp.End != pb.ReadEnd_READ_END_SAFE_POS {
		t.Fatalf("read of the last event with max 2^31: %v %v", resp, err)
	}
	resp, err = jc.Read(ctx, &pb.ReadRequest{From: first + 2, Max: 1})
	if err != nil || len(resp.Events) != 1 || resp.End != pb.ReadEnd_READ_END_MAX {
		t.Fatalf("read of 1 event: %v %v", resp, err)
	}
	resp, err = jc.Read(ctx, &pb.ReadRequest{From: last + 5})
	if err != nil || len(resp.Events) != 0 || resp.End != pb.ReadEnd_READ_END_SAFE_POS {
		t.Fatalf("read past the end: %v %v", resp, err)
	}
}

// rawJournal is a plain gRPC journal client of addr, with grpc-go's
// default limits (4 MiB received, no bound sent).
func rawJournal(t *testing.T, addr string) pb.JournalClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewJournalClient(conn)
}

// safePos is the last seq this member has applied.
func (s *Server) safePos() (pos uint64) {
	s.fsm.View(func(st *fsm.State) { pos = st.NextSeq() - 1 })
	return pos
}

// Every oversized append, up to well past the gRPC receive limit a
// member had before, is answered with InvalidArgument naming the cap,
// and changes nothing; one past the bounded grace still gets a clear
// gRPC refusal.
func TestOversizedAppendNamesCap(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, member := range []int{leader, tc.followers(leader)[0]} {
		jc := rawJournal(t, tc.cfgs[member].GRPCAddr)
		before := tc.server(leader).safePos()
		ev := func(n int) *pb.Event { return &pb.Event{Type: "big", Payload: make([]byte, n)} }
		for _, n := range []int{1<<20 + 1, 4 << 20, 8_000_000, 10_000_000, 16 << 20} {
			_, err := jc.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{ev(n)}})
			want := fmt.Sprintf("payload of %d bytes exceeds the 1048576-byte cap", n)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
				t.Fatalf("c%d: append of %d bytes: %v; want InvalidArgument %q", member, n, err, want)
			}
		}
		// Within the event cap, over the request cap.
		many := &pb.AppendRequest{}
		for i := 0; i < 5; i++ {
			many.Events = append(many.Events, ev(1<<20))
		}
		if _, err := jc.Append(ctx, many); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "exceeds the 4194304-byte cap") {
			t.Fatalf("c%d: append of 5 MiB in events at the cap: %v", member, err)
		}
		// Past the grace: gRPC refuses it before any handler, still bounded.
		huge := recvLimit(4<<20) + 1
		if _, err := jc.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{ev(huge)}}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("c%d: append of %d bytes: %v", member, huge, err)
		}
		if after := tc.server(leader).safePos(); after != before {
			t.Fatalf("c%d: safe pos moved from %d to %d", member, before, after)
		}
		// The member still serves.
		if _, err := jc.Positions(ctx, &pb.PositionsRequest{}); err != nil {
			t.Fatalf("c%d: positions after the oversized appends: %v", member, err)
		}
	}
}
