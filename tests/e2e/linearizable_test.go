//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/logbookhq/logbook/client"
)

// The journal as a porcupine model. The state is the journal's length: an
// append is linearized where the journal grew to exactly its seq, and a
// linearizable read of [from, from+max) returns exactly the events present
// at its linearization point. Which payload sits at which seq is checked
// separately against the final journal (each seq has one payload).
type appendIn struct{ payload string }
type appendOut struct{ seq uint64 }
type readIn struct {
	from uint64
	max  int
}
type readOut struct{ count int }

// tailIn is a tail consumer receiving the event at seq: the journal holds
// at least seq events by then (Call = Return = the time it arrived).
type tailIn struct{ seq uint64 }

var journalModel = journalModelFrom(0)

// journalModelFrom is the model of a journal that holds base events when
// the history starts (the coordinators' own audit events: the ACL
// bootstrap).
func journalModelFrom(base uint64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return base },
		Step: func(state, input, output any) (bool, any) {
			n := state.(uint64)
			switch in := input.(type) {
			case appendIn:
				return output.(appendOut).seq == n+1, n + 1
			case readIn:
				want := 0
				if in.from <= n {
					want = int(min(uint64(in.max), n-in.from+1))
				}
				return output.(readOut).count == want, n
			case tailIn:
				return in.seq <= n, n
			}
			return false, n
		},
		DescribeOperation: func(input, output any) string {
			switch in := input.(type) {
			case appendIn:
				return fmt.Sprintf("append(%s) -> %d", in.payload, output.(appendOut).seq)
			case readIn:
				return fmt.Sprintf("read(%d,%d) -> %d events", in.from, in.max, output.(readOut).count)
			case tailIn:
				return fmt.Sprintf("tail got %d", in.seq)
			}
			return "?"
		},
	}
}

// history records the operations of several clients for porcupine.
type history struct {
	mu       sync.Mutex
	ops      []porcupine.Operation
	unknown  map[string]int64  // payload -> call time of an append whose outcome is unknown
	observed map[uint64]string // seq -> payload, as reads saw it
	workers  int
	base     uint64 // the journal's safe position before the first operation
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startHistory runs workers clients, each appending and (every fourth
// operation) reading linearizably, until h.halt.
func startHistory(ctx context.Context, t *testing.T, cl *cluster, workers, maxOps int) *history {
	h := &history{unknown: map[string]int64{}, observed: map[uint64]string{}, workers: workers, stop: make(chan struct{})}
	if err := cl.withClient(ctx, func(c *client.Client) error {
		p, err := c.Journal().Positions(ctx)
		h.base = p.SafePos
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for w := 0; w < workers; w++ {
		c, _, err := cl.newClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer c.Close()
			h.run(ctx, c, w, maxOps, h.stop)
		}()
	}
	return h
}

// halt stops the workers and waits for them.
func (h *history) halt() {
	close(h.stop)
	h.wg.Wait()
}

// acked is seq -> payload of every acknowledged append.
func (h *history) acked() map[uint64]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[uint64]string{}
	for _, op := range h.ops {
		if in, ok := op.Input.(appendIn); ok {
			out[op.Output.(appendOut).seq] = in.payload
		}
	}
	return out
}

// check resolves appends of unknown outcome against the final journal
// (present: it took effect some time after its call), checks that every
// acknowledged append and every read saw the payload the journal holds at
// that seq, and runs porcupine over the history plus extra operations
// (a tail consumer's deliveries).
func (h *history) check(t *testing.T, cl *cluster, final []client.StoredEvent, extra []porcupine.Operation) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	bySeq := map[uint64]string{}
	byPayload := map[string]uint64{}
	for _, e := range final {
		bySeq[e.Seq] = string(e.Payload)
		byPayload[string(e.Payload)] = e.Seq
	}
	ops := append([]porcupine.Operation(nil), h.ops...)
	for p, call := range h.unknown {
		if seq, ok := byPayload[p]; ok {
			ops = append(ops, porcupine.Operation{ClientId: h.workers, Input: appendIn{p}, Call: call, Output: appendOut{seq}, Return: math.MaxInt64})
		}
	}
	for _, op := range ops {
		if in, ok := op.Input.(appendIn); ok && bySeq[op.Output.(appendOut).seq] != in.payload {
			t.Fatalf("append %q acknowledged at seq %d, which holds %q", in.payload, op.Output.(appendOut).seq, bySeq[op.Output.(appendOut).seq])
		}
	}
	for seq, p := range h.observed {
		if bySeq[seq] != p {
			t.Fatalf("a read saw %q at seq %d, which holds %q", p, seq, bySeq[seq])
		}
	}
	ops = append(ops, extra...)
	res := porcupine.CheckOperationsTimeout(journalModelFrom(h.base), ops, 2*time.Minute)
	cl.logf("porcupine: %d operations (%d appends of unknown outcome, %d tail deliveries), result %v", len(ops), len(h.unknown), len(extra), res)
	if res != porcupine.Ok {
		t.Fatalf("history is not linearizable (%v)", res)
	}
}

// TestLinearizableHistoryThroughLeaderKill records appends and
// linearizable reads from several clients while the leader is killed and
// restarted, and checks the history with porcupine.
func TestLinearizableHistoryThroughLeaderKill(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := startHistory(ctx, t, cl, 4, 5000)
	h.waitOps(t, 500)
	cl.killLeaderAndRestart("", func() { h.waitOps(t, h.count()+500) })
	h.waitOps(t, h.count()+200)
	h.halt()
	cl.waitConverged()
	final, err := cl.readMember(cl.leader())
	if err != nil {
		t.Fatal(err)
	}
	h.check(t, cl, final, nil)
}

func (h *history) run(ctx context.Context, c *client.Client, w, maxOps int, stop <-chan struct{}) {
	var last uint64
	for i := 0; i < maxOps; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if i%4 != 3 {
			p := fmt.Sprintf("w%d-%d", w, i)
			call := time.Now().UnixNano()
			seqs, err := c.Journal().Append(cctx, client.Event{Type: "lin", Payload: []byte(p)})
			ret := time.Now().UnixNano()
			h.mu.Lock()
			if err != nil {
				h.unknown[p] = call
			} else {
				h.ops = append(h.ops, porcupine.Operation{ClientId: w, Input: appendIn{p}, Call: call, Output: appendOut{seqs[0]}, Return: ret})
				last = max(last, seqs[0])
			}
			h.mu.Unlock()
		} else {
			from := uint64(1)
			if last > 3 {
				from = last - 3
			}
			call := time.Now().UnixNano()
			evs, _, err := c.Journal().Read(cctx, from, 8)
			ret := time.Now().UnixNano()
			if err == nil {
				h.mu.Lock()
				h.ops = append(h.ops, porcupine.Operation{ClientId: w, Input: readIn{from, 8}, Call: call, Output: readOut{len(evs)}, Return: ret})
				for _, e := range evs {
					h.observed[e.Seq] = string(e.Payload)
				}
				h.mu.Unlock()
			}
		}
		cancel()
	}
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// waitOps waits until the history holds n completed operations.
func (h *history) waitOps(t *testing.T, n int) {
	t.Helper()
	if err := poll(time.Minute, 20*time.Millisecond, func(context.Context) error {
		if c := h.count(); c < n {
			return fmt.Errorf("%d of %d operations", c, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestJournalModelRejectsStaleReadsAndSeqGaps proves the checker can fail.
func TestJournalModelRejectsStaleReadsAndSeqGaps(t *testing.T) {
	op := func(c int, in, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret}
	}
	good := []porcupine.Operation{
		op(0, appendIn{"a"}, appendOut{1}, 0, 10),
		op(1, readIn{1, 8}, readOut{1}, 20, 30),
		op(0, appendIn{"b"}, appendOut{2}, 25, 40), // concurrent with the read: either order
	}
	if porcupine.CheckOperations(journalModel, good) != true {
		t.Fatal("a linearizable history was rejected")
	}
	stale := []porcupine.Operation{
		op(0, appendIn{"a"}, appendOut{1}, 0, 10),
		op(1, readIn{1, 8}, readOut{0}, 20, 30), // starts after the append returned, misses it
	}
	if porcupine.CheckOperations(journalModel, stale) {
		t.Fatal("a stale read was accepted")
	}
	gap := []porcupine.Operation{
		op(0, appendIn{"a"}, appendOut{2}, 0, 10), // seq 1 never assigned
	}
	if porcupine.CheckOperations(journalModel, gap) {
		t.Fatal("a seq gap was accepted")
	}
	early := []porcupine.Operation{
		op(0, appendIn{"a"}, appendOut{1}, 0, 10),
		op(2, tailIn{2}, nil, 15, 15), // the tail delivers seq 2 before its append was called
		op(0, appendIn{"b"}, appendOut{2}, 20, 30),
	}
	if porcupine.CheckOperations(journalModel, early) {
		t.Fatal("a tail delivery ahead of the journal was accepted")
	}
	inTime := []porcupine.Operation{
		op(0, appendIn{"a"}, appendOut{1}, 0, 10),
		op(0, appendIn{"b"}, appendOut{2}, 20, 30),
		op(2, tailIn{2}, nil, 25, 25), // during the append: it committed before returning
	}
	if !porcupine.CheckOperations(journalModel, inTime) {
		t.Fatal("a tail delivery during its append was rejected")
	}
}
