//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/logbookhq/logbook/client"
)

// TestTailConsumerThroughFaults: a tail consumer on the host follows the
// journal while the leader is killed and restarted and a follower is cut off
// the network; it sees every acknowledged event exactly once, in order. The
// clients' appends and linearizable reads, with the tail's deliveries, are
// recorded and checked for linearizability with porcupine.
func TestTailConsumerThroughFaults(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tc, _, err := cl.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var mu sync.Mutex
	var seen []client.StoredEvent
	var tailOps []porcupine.Operation
	const workers = 3
	var order error
	tailCtx, stopTail := context.WithCancel(ctx)
	tailDone := make(chan error, 1)
	go func() {
		tailDone <- tc.Journal().Tail(tailCtx, 1, func(e client.StoredEvent) error {
			mu.Lock()
			defer mu.Unlock()
			if want := uint64(len(seen) + 1); e.Seq != want && order == nil {
				order = errorf("tail delivered seq %d, want %d", e.Seq, want)
			}
			seen = append(seen, e)
			now := time.Now().UnixNano()
			tailOps = append(tailOps, porcupine.Operation{ClientId: workers + 1, Input: tailIn{e.Seq}, Output: nil, Call: now, Return: now})
			return nil
		})
	}()

	h := startHistory(ctx, t, cl, workers, 1_000_000)
	h.waitOps(t, 300)
	cl.killLeaderAndRestart(fmt.Sprintf(" with the tail at %d", tailLen(&mu, &seen)), func() { h.waitOps(t, h.count()+500) })

	f := cl.others(cl.leader())[0]
	cl.logf("disconnect follower %s with the tail at %d", f, tailLen(&mu, &seen))
	if err := cl.disconnect(f); err != nil {
		t.Fatal(err)
	}
	h.waitOps(t, h.count()+500)
	cl.reconnect(f)
	cl.waitRejoined(f)
	h.waitOps(t, h.count()+200)
	h.halt()
	acked := h.acked()
	next := cl.waitConverged()

	if err := poll(2*time.Minute, 50*time.Millisecond, func(context.Context) error {
		if n := tailLen(&mu, &seen); uint64(n) < next-1 {
			return errorf("tail at %d of %d", n, next-1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stopTail()
	<-tailDone
	mu.Lock()
	defer mu.Unlock()
	if order != nil {
		t.Fatal(order)
	}
	if uint64(len(seen)) != next-1 {
		t.Fatalf("tail saw %d events, the journal holds %d", len(seen), next-1)
	}
	for seq, payload := range acked {
		if string(seen[seq-1].Payload) != payload {
			t.Fatalf("acknowledged append %q at seq %d: the tail saw %q", payload, seq, seen[seq-1].Payload)
		}
	}
	cl.logf("tail saw all %d events in order, %d of them acknowledged appends", len(seen), len(acked))
	h.check(t, cl, seen, tailOps)
}

func tailLen(mu *sync.Mutex, seen *[]client.StoredEvent) int {
	mu.Lock()
	defer mu.Unlock()
	return len(*seen)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
