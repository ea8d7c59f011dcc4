package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/coordserver"
)

// startJournalCluster starts 3 coordinators with their default limits
// (1 MiB events, 4 MiB requests) and no storage nodes.
func startJournalCluster(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts 3 coordinators")
	}
	c, err := coordserver.StartCluster(coordserver.ClusterOptions{
		Coordinators: 3, Dir: t.TempDir(), Ports: ephemeralPorts(t), Logger: slog.New(slog.DiscardHandler),
		Coordinator: func(_ int, cfg *coordserver.Config) { cfg.WALPrefill = false },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Endpoints()
}

func newTestClient(t *testing.T, ctx context.Context, eps []string, maxMsg int) *Client {
	t.Helper()
	c, err := New(ctx, Config{Endpoints: eps, MaxMessageBytes: maxMsg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Events of mixed sizes, many at the 1 MiB cap, read back whole by
// ReadRange and Tail, by a client with the default 8 MiB message limit
// and by one with 2 MiB: the replies are sized under both.
func TestJournalBigEvents(t *testing.T) {
	eps := startJournalCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newTestClient(t, ctx, eps, 0)
	sizes := []int{1 << 20, 1 << 20, 1 << 20, 10, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 600 << 10, 1 << 20, 0, 1 << 20, 1<<20 - 7, 4 << 10, 1 << 20, 1 << 20}
	payloads := make([][]byte, len(sizes))
	var first uint64
	for i, n := range sizes {
		payloads[i] = bytes.Repeat([]byte{byte('A' + i)}, n)
		seqs, err := w.Journal().Append(ctx, Event{Type: fmt.Sprintf("big-%d", i), Payload: payloads[i]})
		if err != nil {
			t.Fatalf("append %d (%d bytes): %v", i, n, err)
		}
		if i == 0 {
			first = seqs[0]
		}
	}
	last := first + uint64(len(sizes)) - 1
	check := func(what string, want uint64, e StoredEvent) {
		t.Helper()
		i := int(want - first)
		if e.Seq != want || e.Type != fmt.Sprintf("big-%d", i) || !bytes.Equal(e.Payload, payloads[i]) {
			t.Fatalf("%s: want seq %d (%d bytes), got seq %d %q (%d bytes)", what, want, len(payloads[i]), e.Seq, e.Type, len(e.Payload))
		}
	}
	for _, maxMsg := range []int{0, 2 << 20} {
		c := newTestClient(t, ctx, eps, maxMsg)
		what := fmt.Sprintf("MaxMessageBytes %d", maxMsg)
		next := first
		if err := c.Journal().ReadRange(ctx, first, 0, func(e StoredEvent) error {
			check(what+": read range", next, e)
			next++
			return nil
		}); err != nil || next != last+1 {
			t.Fatalf("%s: read range: through %d, want %d: %v", what, next-1, last, err)
		}
		// One Read asking for far more than fits: cut by bytes, says so.
		evs, info, err := c.Journal().Read(ctx, first, 1_000_000)
		if err != nil || len(evs) == 0 || len(evs) >= len(sizes) || info.End != ReadEndBytes {
			t.Fatalf("%s: read of 1,000,000: %d events, end %v: %v", what, len(evs), info.End, err)
		}
		if evs, info, err := c.Journal().Read(ctx, first+3, 1); err != nil || len(evs) != 1 || info.End != ReadEndMax {
			t.Fatalf("%s: read of 1: %d events, end %v: %v", what, len(evs), info.End, err)
		}
		if evs, info, err := c.Journal().Read(ctx, last, 5); err != nil || len(evs) != 1 || info.End != ReadEndSafePos {
			t.Fatalf("%s: read of the last: %d events, end %v: %v", what, len(evs), info.End, err)
		}
		next = first
		errDone := errors.New("done")
		err = c.Journal().Tail(ctx, first, func(e StoredEvent) error {
			check(what+": tail", next, e)
			if next++; next > last {
				return errDone
			}
			return nil
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("%s: tail through %d of %d: %v", what, next-1, last, err)
		}
	}
}

// Every oversized event is refused with the cap it broke, by Append and
// Submit alike, before it is sent (a 20 MB request would otherwise meet
// gRPC's own limits, which name no cap), and nothing is appended.
func TestJournalOversizedEvents(t *testing.T) {
	eps := startJournalCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newTestClient(t, ctx, eps, 0)
	before, err := c.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1<<20 + 1, 8_000_000, 10_000_000, 20_000_000} {
		want := fmt.Sprintf("payload of %d bytes exceeds the 1048576-byte cap", n)
		ev := Event{Type: "big", Payload: make([]byte, n)}
		if _, err := c.Journal().Append(ctx, ev); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("append of %d bytes: %v; want %q", n, err, want)
		}
		if _, err := c.Journal().Submit(ev).Wait(ctx); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("submit of %d bytes: %v; want %q", n, err, want)
		}
	}
	five := make([]Event, 5)
	for i := range five {
		five[i] = Event{Type: "big", Payload: make([]byte, 1<<20)}
	}
	if _, err := c.Journal().Append(ctx, five...); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "exceeds the 4194304-byte cap") {
		t.Fatalf("append of 5 events at the cap: %v", err)
	}
	small := newTestClient(t, ctx, eps, 512<<10)
	if _, err := small.Journal().Append(ctx, Event{Type: "big", Payload: make([]byte, 600<<10)}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "message limit (Config.MaxMessageBytes)") {
		t.Fatalf("append over the client's message limit: %v", err)
	}
	after, err := c.Journal().Positions(ctx)
	if err != nil || after.SafePos != before.SafePos {
		t.Fatalf("safe pos moved from %d to %d: %v", before.SafePos, after.SafePos, err)
	}
	if l, err := c.Journal().Limits(ctx); err != nil || l.MaxEventBytes != 1<<20 || l.MaxRequestBytes != 4<<20 {
		t.Fatalf("limits: %+v %v", l, err)
	}
}
