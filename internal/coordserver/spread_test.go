package coordserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	dto "github.com/prometheus/client_model/go"
)

// okCalls is how many calls of method a member answered OK.
func okCalls(s *Server, method string) int {
	var m dto.Metric
	if err := s.metrics.rpc.Requests(method, "OK").Write(&m); err != nil {
		panic(err)
	}
	return int(m.GetCounter().GetValue())
}

// TestSpreadOverMembers: an SDK client with SpreadOverMembers sends its
// appends and linearizable reads to the follower it was given, which
// forwards them; the append stream still goes to the leader; without the
// option the same client goes to the leader.
func TestSpreadOverMembers(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newClient := func(spread bool) *client.Client {
		c, err := client.New(ctx, client.Config{Endpoints: []string{tc.cfgs[f].GRPCAddr}, AttemptTimeout: 2 * time.Second, SpreadOverMembers: spread})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	appendM, readM := pb.Journal_Append_FullMethodName, pb.Journal_Read_FullMethodName

	c := newClient(true)
	var last uint64
	for i := range 20 {
		seqs, err := c.Journal().Append(ctx, client.Event{Type: "spread", Payload: fmt.Appendf(nil, "%d", i)})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if len(seqs) != 1 || (last != 0 && seqs[0] != last+1) {
			t.Fatalf("append %d: seqs %v after %d", i, seqs, last)
		}
		last = seqs[0]
		evs, _, err := c.Journal().Read(ctx, last, 1)
		if err != nil || len(evs) != 1 || string(evs[0].Payload) != fmt.Sprint(i) {
			t.Fatalf("linearizable read of %d: %v, %v", last, evs, err)
		}
	}
	if got, lead := okCalls(tc.server(f), appendM), okCalls(tc.server(leader), appendM); got != 20 || lead != 0 {
		t.Fatalf("appends answered: follower %d, leader %d; want 20, 0", got, lead)
	}
	if got := okCalls(tc.server(f), readM); got != 20 {
		t.Fatalf("reads answered by the follower: %d, want 20", got)
	}
	// The append stream is served by the leader only: routed to the
	// follower it would be refused, and retried there, forever.
	if _, err := c.Journal().Submit(client.Event{Type: "spread", Payload: []byte("streamed")}).Wait(ctx); err != nil {
		t.Fatalf("streamed append: %v", err)
	}

	d := newClient(false)
	if _, err := d.Journal().Append(ctx, client.Event{Type: "leader"}); err != nil {
		t.Fatal(err)
	}
	if got := okCalls(tc.server(leader), appendM); got != 1 {
		t.Fatalf("default routing: the leader answered %d appends, want 1", got)
	}
}
