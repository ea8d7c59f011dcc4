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

var journalModel = porcupine.Model{
	Init: func() any { return uint64(0) },
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
		}
		return false, n
	},
	DescribeOperation: func(input, output any) string {
		switch in := input.(type) {
		case appendIn:
			return fmt.Sprintf("append(%s) -> %d", in.payload, output.(appendOut).seq)
		case readIn:
			return fmt.Sprintf("read(%d,%d) -> %d events", in.from, in.max, output.(readOut).count)
		}
		return "?"
	},
}

type history struct {
	mu       sync.Mutex
	ops      []porcupine.Operation
	unknown  map[string]int64  // payload -> call time of an append whose outcome is unknown
	observed map[uint64]string // seq -> payload, as reads saw it
}

// TestLinearizableHistoryThroughLeaderKill records appends and
// linearizable reads from several clients while the leader is killed and
// restarted, and checks the history with porcupine.
func TestLinearizableHistoryThroughLeaderKill(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	h := &history{unknown: map[string]int64{}, observed: map[uint64]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers, maxOps = 4, 5000
	for w := 0; w < workers; w++ {
		c, _, err := cl.newClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(ctx, c, w, maxOps, stop)
		}()
	}
	h.waitOps(t, 500)
	old := cl.leader()
	cl.logf("SIGKILL leader %s", old)
	if err := cl.kill(old); err != nil {
		t.Fatal(err)
	}
	cl.leader(cl.others(old)...)
	h.waitOps(t, h.count()+500)
	cl.restart(old)
	cl.waitRejoined(old)
	h.waitOps(t, h.count()+200)
	close(stop)
	wg.Wait()

	// Resolve appends with unknown outcome from the final journal: present
	// means it took effect some time after its call.
	final, err := cl.readMember(cl.leader())
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[uint64]string{}
	byPayload := map[string]uint64{}
	for _, e := range final {
		bySeq[e.Seq] = string(e.Payload)
		byPayload[string(e.Payload)] = e.Seq
	}
	for p, call := range h.unknown {
		if seq, ok := byPayload[p]; ok {
			h.ops = append(h.ops, porcupine.Operation{ClientId: workers, Input: appendIn{p}, Call: call, Output: appendOut{seq}, Return: math.MaxInt64})
		}
	}
	for _, op := range h.ops {
		if in, ok := op.Input.(appendIn); ok && bySeq[op.Output.(appendOut).seq] != in.payload {
			t.Fatalf("append %q acknowledged at seq %d, which holds %q", in.payload, op.Output.(appendOut).seq, bySeq[op.Output.(appendOut).seq])
		}
	}
	for seq, p := range h.observed {
		if bySeq[seq] != p {
			t.Fatalf("a read saw %q at seq %d, which holds %q", p, seq, bySeq[seq])
		}
	}
	res := porcupine.CheckOperationsTimeout(journalModel, h.ops, time.Minute)
	cl.logf("porcupine: %d operations (%d of unknown outcome resolved), result %v", len(h.ops), len(h.unknown), res)
	if res != porcupine.Ok {
		t.Fatalf("history is not linearizable (%v)", res)
	}
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
}
