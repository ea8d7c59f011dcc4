//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// TestTLSRefusesUnauthenticated runs the compose cluster, which runs with
// TLS by default, and calls every member's published port as each of
// strangers' callers (plaintext, an expired certificate of the cluster
// CA, a reader's token, a malformed token, no certificate, a certificate
// of another CA not sent and sent), which must be refused with the code
// strangers names. Each tries an append, Journal.Trim and Journal.Reset;
// afterwards every event read back is as before, but for the
// logbook.acl.denied audit events of the reader's refusals.
func TestTLSRefusesUnauthenticated(t *testing.T) {
	cl := startCluster(t, "docker-compose.yml", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Events and a trim point worth protecting.
	err := cl.withClient(ctx, func(c *client.Client) error {
		for i := range 20 {
			if _, err := c.Journal().Append(ctx, client.Event{Type: "tls-e2e", Payload: fmt.Appendf(nil, "event-%d", i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append as admin: %v", err)
	}
	before := journalState(ctx, t, cl)
	cl.logf("journal before: %+v, %d events", before.pos, len(before.events))

	clients, _ := strangers(ctx, t, cl, "e2e-reader")
	before = journalState(ctx, t, cl)
	calls := []struct {
		name string
		call func(ctx context.Context, j pb.JournalClient) error
	}{
		{"Append", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{{Type: "intruder", Payload: []byte("x")}}})
			return err
		}},
		{"Trim", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Trim(ctx, &pb.TrimRequest{})
			return err
		}},
		{"Reset", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Reset(ctx, &pb.ResetRequest{Confirm: true})
			return err
		}},
	}
	for _, m := range cl.members {
		for _, c := range clients {
			conn, err := c.dial(cl.addr(m))
			if err != nil {
				t.Fatal(err)
			}
			j := pb.NewJournalClient(conn)
			for _, call := range calls {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				err := call.call(cctx, j)
				ccancel()
				if got := status.Code(err); got != c.coord {
					t.Errorf("%s, %s on %s: %v (code %s), want %s", c.name, call.name, m, err, got, c.coord)
				} else {
					cl.logf("%s, %s on %s: refused, %s", c.name, call.name, m, got)
				}
			}
			conn.Close()
		}
	}
	if t.Failed() {
		return
	}

	// The control: the same raw calls with admin's certificate pass
	// authentication (a read, so the journal stays as it is).
	conn, err := grpc.NewClient(cl.addr(cl.members[0]), cl.creds())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewJournalClient(conn).Positions(ctx, &pb.PositionsRequest{}); err != nil {
		t.Fatalf("Positions as admin on the same path: %v", err)
	}

	// The refusals of the reader journaled logbook.acl.denied audit
	// events and nothing else.
	after := journalState(ctx, t, cl)
	if err := before.sameBut(after, "logbook.acl.denied"); err != nil {
		t.Error(err)
	}
	cl.logf("journal after: %+v, %d events, identical", after.pos, len(after.events))
}

// positions are the journal positions that only appends, trims and
// resets move (not the applied index, which other entries advance).
type positions struct {
	WritePos, SafePos, ExpirePos, TrimmedPos, EventCount, SegmentCount uint64
}

type journalSnapshot struct {
	pos    positions
	events []client.StoredEvent
}

// journalState is the leader's positions and a linearizable read of every
// retained event, as admin.
func journalState(ctx context.Context, t *testing.T, cl *cluster) journalSnapshot {
	t.Helper()
	var s journalSnapshot
	err := cl.withClient(ctx, func(c *client.Client) error {
		p, err := c.Journal().Positions(ctx)
		if err != nil {
			return err
		}
		s.pos = positions{p.WritePos, p.SafePos, p.ExpirePos, p.TrimmedPos, p.EventCount, p.SegmentCount}
		s.events = s.events[:0]
		return c.Journal().ReadRange(ctx, 1, 0, func(e client.StoredEvent) error {
			s.events = append(s.events, e)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("journal state as admin: %v", err)
	}
	if len(s.events) == 0 {
		t.Fatal("journal state: no events")
	}
	return s
}

// sameBut checks that after holds the very events of s, and the same trim
// and expiry positions: only events of the types except may have been
// appended since.
func (s journalSnapshot) sameBut(after journalSnapshot, except ...string) error {
	if after.pos.TrimmedPos != s.pos.TrimmedPos || after.pos.ExpirePos != s.pos.ExpirePos {
		return fmt.Errorf("positions changed: before %+v, after %+v", s.pos, after.pos)
	}
	kept := after.events[:0:0]
	for _, e := range after.events {
		if e.Seq > s.pos.SafePos && slices.Contains(except, e.Type) {
			continue
		}
		kept = append(kept, e)
	}
	if err := sameEvents(s.events, kept); err != nil {
		return fmt.Errorf("events changed: %w", err)
	}
	return nil
}
