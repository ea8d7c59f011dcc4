package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeJournal serves Read and Positions over events first..last (types
// "e<seq>"), and Status naming itself the leader. trimAfter > 0 trims
// through trimTo once that many reads were served.
type fakeJournal struct {
	pb.UnimplementedJournalServer
	pb.UnimplementedClusterServer
	addr string

	mu                sync.Mutex
	first, last       uint64
	reads             []uint64 // from of every read
	trimAfter, trimTo uint64
}

func (f *fakeJournal) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{LeaderId: "c1", LeaderGrpcAddr: f.addr, Members: []*pb.MemberStatus{{Id: "c1", GrpcAddr: f.addr}}}, nil
}

func (f *fakeJournal) Positions(context.Context, *pb.PositionsRequest) (*pb.PositionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.PositionsResponse{TrimmedPos: f.first, SafePos: f.last, WritePos: f.last}, nil
}

func (f *fakeJournal) Read(_ context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, req.From)
	if f.trimAfter > 0 && uint64(len(f.reads)) > f.trimAfter {
		f.first = max(f.first, f.trimTo)
	}
	if req.From < f.first {
		return nil, status.Errorf(codes.OutOfRange, "seq %d is trimmed; earliest retained is %d", req.From, f.first)
	}
	resp := &pb.ReadResponse{NextSeq: f.last + 1}
	for s := req.From; s <= f.last && len(resp.Events) < int(req.Max); s++ {
		resp.Events = append(resp.Events, &pb.StoredEvent{Seq: s, Type: "e" + itoa(s)})
	}
	return resp, nil
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func startFakeJournal(t *testing.T, first, last uint64) (*fakeJournal, *Client) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeJournal{addr: lis.Addr().String(), first: first, last: last}
	srv := grpc.NewServer()
	pb.RegisterJournalServer(srv, f)
	pb.RegisterClusterServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ctx, Config{Endpoints: []string{f.addr}, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return f, c
}

func collect(t *testing.T, c *Client, from, to uint64, opts ...ReadOption) ([]uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	err := c.Journal().ReadRange(ctx, from, to, func(e StoredEvent) error {
		if e.Type != "e"+itoa(e.Seq) {
			t.Errorf("seq %d has type %q", e.Seq, e.Type)
		}
		seqs = append(seqs, e.Seq)
		return nil
	}, opts...)
	return seqs, err
}

func seqRange(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

func equalSeqs(a, b []uint64) bool { return slices.Equal(a, b) }

func TestReadRange(t *testing.T) {
	t.Parallel()
	f, c := startFakeJournal(t, 1, 25)
	for _, tc := range []struct {
		name     string
		from, to uint64
		want     []uint64
	}{
		{"to the end", 0, 0, seqRange(1, 25)},
		{"from the middle to the end", 7, 0, seqRange(7, 25)},
		{"a bounded range", 3, 17, seqRange(3, 17)},
		{"one event", 25, 25, []uint64{25}},
		{"past the end", 26, 0, nil},
		{"an empty range", 9, 8, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t, c, tc.from, tc.to, WithPageSize(4))
			if err != nil || !equalSeqs(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	f.mu.Lock()
	f.reads = nil
	f.mu.Unlock()
	if got, err := collect(t, c, 1, 25, WithPageSize(10)); err != nil || len(got) != 25 {
		t.Fatalf("pages of 10: %d events, %v", len(got), err)
	}
	f.mu.Lock()
	reads := append([]uint64(nil), f.reads...)
	f.mu.Unlock()
	if !equalSeqs(reads, []uint64{1, 11, 21}) {
		t.Fatalf("pages of 10 read from %v, want [1 11 21]", reads)
	}
	if _, err := collect(t, c, 20, 30); err == nil || !strings.Contains(err.Error(), "journal ended at seq 25, before 30") {
		t.Fatalf("a range past the end: %v", err)
	}
	stop := errors.New("stop")
	n := 0
	err := c.Journal().ReadRange(context.Background(), 1, 0, func(StoredEvent) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("fn's error: %v after %d events", err, n)
	}
}

func TestReadRangeTrimmed(t *testing.T) {
	t.Parallel()
	f, c := startFakeJournal(t, 5, 20)
	if _, err := collect(t, c, 1, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("from a trimmed seq: %v, want ErrOutOfRange", err)
	}
	if got, err := collect(t, c, 0, 0, SkipTrimmed()); err != nil || !equalSeqs(got, seqRange(5, 20)) {
		t.Fatalf("SkipTrimmed from the start: %v, %v", got, err)
	}
	// Trimmed through 12 after the first page (5..8) was read.
	f.mu.Lock()
	f.reads, f.trimAfter, f.trimTo = nil, 1, 12
	f.mu.Unlock()
	if got, err := collect(t, c, 5, 0, WithPageSize(4), SkipTrimmed()); err != nil || !equalSeqs(got, append(seqRange(5, 8), seqRange(12, 20)...)) {
		t.Fatalf("trimmed while reading: %v, %v", got, err)
	}
}
