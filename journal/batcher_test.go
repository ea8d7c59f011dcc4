package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

// fakeLog is an in-memory sink: Start records batches in call order and
// assigns seqs; commits are released by the test.
type fakeLog struct {
	mu       sync.Mutex
	next     uint64
	batches  [][]*pb.AppendOp
	inflight int
	maxIn    int
	release  chan struct{} // nil: commit at once
	err      error
}

func (f *fakeLog) Start(ops []*pb.AppendOp) func() ([]fsm.Result, error) {
	f.mu.Lock()
	f.batches = append(f.batches, ops)
	f.inflight++
	if f.inflight > f.maxIn {
		f.maxIn = f.inflight
	}
	res := make([]fsm.Result, len(ops))
	for i := range ops {
		f.next++
		res[i] = fsm.Result{FirstSeq: f.next, Count: 1}
	}
	err := f.err
	f.mu.Unlock()
	return func() ([]fsm.Result, error) {
		if f.release != nil {
			<-f.release
		}
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
		return res, err
	}
}

func opN(i int) *pb.AppendOp {
	return &pb.AppendOp{Events: []*pb.JournalEvent{{Type: "t", Payload: []byte(fmt.Sprint(i))}}}
}

func TestGroupCommitBatchesWhileInFlight(t *testing.T) {
	log := &fakeLog{release: make(chan struct{})}
	cfg := DefaultBatcherConfig()
	cfg.InFlight = 2
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]fsm.Result, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Submit(ctx, opN(i))
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	// Two batches are in flight and held; everything else queues.
	waitFor(t, func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.batches) == 2
	})
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		for _, bt := range log.batches {
			n += len(bt)
		}
		return n+len(b.queue) == 100
	})
	close(log.release)
	wg.Wait()
	if log.maxIn > 2 {
		t.Fatalf("%d batches in flight, want at most 2", log.maxIn)
	}
	// The queued ops went out in few entries, not one each.
	if len(log.batches) > 4 {
		t.Fatalf("%d entries for 100 ops: not group committed", len(log.batches))
	}
	seen := map[uint64]bool{}
	for _, r := range results {
		if r.FirstSeq == 0 || seen[r.FirstSeq] {
			t.Fatalf("bad or duplicate seq %d", r.FirstSeq)
		}
		seen[r.FirstSeq] = true
	}
}

func TestSubmitAllKeepsOrder(t *testing.T) {
	log := &fakeLog{}
	b := NewBatcher(DefaultBatcherConfig(), func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	ops := make([]*pb.AppendOp, 50)
	for i := range ops {
		ops[i] = opN(i)
	}
	res := b.SubmitAll(context.Background(), ops)
	for i, r := range res {
		if r.Err != nil || r.FirstSeq != uint64(i+1) {
			t.Fatalf("op %d: %+v", i, r)
		}
	}
}

func TestBatchBounds(t *testing.T) {
	log := &fakeLog{}
	cfg := DefaultBatcherConfig()
	cfg.MaxBatchOps = 8
	cfg.MaxBatchBytes = 1 << 20
	cfg.InFlight = 1
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	ops := make([]*pb.AppendOp, 30)
	for i := range ops {
		ops[i] = opN(i)
	}
	b.SubmitAll(context.Background(), ops)
	for _, bt := range log.batches {
		if len(bt) > 8 {
			t.Fatalf("batch of %d ops exceeds the bound of 8", len(bt))
		}
	}
}

func TestErrorsAndAdmission(t *testing.T) {
	boom := errors.New("no leader")
	b := NewBatcher(DefaultBatcherConfig(), func(context.Context) (Sink, error) { return nil, boom })
	if _, err := b.Submit(context.Background(), opN(1)); !errors.Is(err, boom) {
		t.Fatalf("pick error: %v", err)
	}
	b.Close()
	if _, err := b.Submit(context.Background(), opN(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}

	log := &fakeLog{release: make(chan struct{})}
	cfg := DefaultBatcherConfig()
	cfg.MaxQueued = 3
	cfg.InFlight = 1
	b2 := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	ctx, cancel := context.WithCancel(context.Background())
	go b2.Submit(ctx, opN(0)) // taken into the held batch
	waitFor(t, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return len(log.batches) == 1 })
	for i := 0; i < 3; i++ {
		go b2.Submit(ctx, opN(i))
	}
	waitFor(t, func() bool { b2.mu.Lock(); defer b2.mu.Unlock(); return len(b2.queue) == 3 })
	if _, err := b2.Submit(ctx, opN(9)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("over the queue bound: %v", err)
	}
	cancel()
	close(log.release)
	b2.Close()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

func TestPauseResumeKeepsOrder(t *testing.T) {
	log := &fakeLog{}
	cfg := DefaultBatcherConfig()
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	b.Pause()
	done := make(chan []fsm.Result, 1)
	ops := make([]*pb.AppendOp, 20)
	for i := range ops {
		ops[i] = opN(i)
	}
	go func() { done <- b.SubmitAll(context.Background(), ops) }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 20 })
	log.mu.Lock()
	if len(log.batches) != 0 {
		t.Fatal("a paused batcher handed ops to the log")
	}
	log.mu.Unlock()
	b.Resume()
	res := <-done
	for i, r := range res {
		if r.Err != nil || r.FirstSeq != uint64(i+1) {
			t.Fatalf("op %d after resume: %+v", i, r)
		}
	}
}

// An op whose submitter gave up while it was still queued is never
// proposed; the ops around it keep their order.
func TestAbandonedQueuedOpsAreNotProposed(t *testing.T) {
	log := &fakeLog{release: make(chan struct{})}
	cfg := DefaultBatcherConfig()
	cfg.InFlight = 1
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := b.Submit(ctx, opN(0)); first <- err }()
	waitFor(t, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return len(log.batches) == 1 })
	// Op 0 is in flight and held: 1 is queued and abandoned, 2 waits.
	gone, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() { _, err := b.Submit(gone, opN(1)); abandoned <- err }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 })
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned submit: %v", err)
	}
	kept := make(chan fsm.Result, 1)
	go func() { r, _ := b.Submit(ctx, opN(2)); kept <- r }()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 2 })
	close(log.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-kept; r.Err != nil || r.FirstSeq != 2 {
		t.Fatalf("op 2: %+v, want seq 2", r)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, bt := range log.batches {
		for _, op := range bt {
			if string(op.Events[0].Payload) == "1" {
				t.Fatalf("the abandoned op was proposed: batches %v", log.batches)
			}
		}
	}
}

// lingerBatcher commits at once and lingers up to d; its first batch holds
// three ops, so the next one waits for three.
func lingerBatcher(t *testing.T, d time.Duration) (*Batcher, *fakeLog) {
	t.Helper()
	log := &fakeLog{}
	cfg := DefaultBatcherConfig()
	cfg.InFlight = 1
	cfg.Linger = d
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	for _, r := range b.SubmitAll(context.Background(), []*pb.AppendOp{opN(0), opN(1), opN(2)}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return b, log
}

func (f *fakeLog) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, b := range f.batches {
		n = append(n, len(b))
	}
	return n
}

// After a batch of three commits, the next batch waits for three ops: the
// clients of that batch coming back, one by one, go out in one entry.
func TestLingerWaitsForTheLastBatchsClients(t *testing.T) {
	b, log := lingerBatcher(t, time.Hour)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	for i := 3; i < 6; i++ {
		go func() { _, err := b.Submit(ctx, opN(i)); errs <- err }()
		waitFor(t, func() bool { return b.queueLen() == i-2 || len(log.batchSizes()) > 1 })
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := log.batchSizes(); len(got) != 2 || got[1] != 3 {
		t.Fatalf("batches %v, want [3 3]: the returning clients went out one by one", got)
	}
}

// A lone client never waits: after a batch of one, the next op goes at
// once (with an hour's linger, a wait would end the test at its deadline).
func TestLingerNeverWaitsForALoneClient(t *testing.T) {
	log := &fakeLog{}
	cfg := DefaultBatcherConfig()
	cfg.Linger = time.Hour
	b := NewBatcher(cfg, func(context.Context) (Sink, error) { return log, nil })
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		if r, err := b.Submit(ctx, opN(i)); err != nil || r.FirstSeq != uint64(i+1) {
			t.Fatalf("op %d: %+v %v", i, r, err)
		}
	}
}

// The wait is bounded: fewer clients than the last batch held come back,
// and the batch goes out when the linger ends.
func TestLingerEndsAtItsBound(t *testing.T) {
	b, log := lingerBatcher(t, 20*time.Millisecond)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := b.Submit(ctx, opN(3)); err != nil || r.FirstSeq != 4 {
		t.Fatalf("%+v %v", r, err)
	}
	if got := log.batchSizes(); len(got) != 2 || got[1] != 1 {
		t.Fatalf("batches %v, want [3 1]", got)
	}
}

// Pause stops a lingering batch from being proposed; Close ends the wait.
func TestLingerPauseAndClose(t *testing.T) {
	b, log := lingerBatcher(t, time.Hour)
	errs := make(chan error, 3)
	go func() { _, err := b.Submit(context.Background(), opN(3)); errs <- err }()
	waitFor(t, func() bool { return b.queueLen() == 1 })
	b.Pause()
	for i := 4; i < 6; i++ {
		go func() { _, err := b.Submit(context.Background(), opN(i)); errs <- err }()
	}
	waitFor(t, func() bool { return b.queueLen() == 3 })
	if got := log.batchSizes(); len(got) != 1 {
		t.Fatalf("batches %v while paused", got)
	}
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the linger")
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("queued op at close: %v", err)
		}
	}
}

// opErrLog is a sink whose every op fails on its own (as the state machine
// fails an acked or invalid op) while the batch as a whole commits.
type opErrLog struct{ err error }

func (l opErrLog) Start(ops []*pb.AppendOp) func() ([]fsm.Result, error) {
	return func() ([]fsm.Result, error) {
		res := make([]fsm.Result, len(ops))
		for i := range res {
			res[i] = fsm.Result{Index: 7, Err: l.err}
		}
		return res, nil
	}
}

// TestSubmitReturnsTheOpsOwnError: an op the state machine refused is an
// error for its submitter, not a success with no seq.
func TestSubmitReturnsTheOpsOwnError(t *testing.T) {
	refused := errors.New("refused by the state machine")
	b := NewBatcher(DefaultBatcherConfig(), func(context.Context) (Sink, error) { return opErrLog{refused}, nil })
	defer b.Close()
	r, err := b.Submit(context.Background(), opN(1))
	if !errors.Is(err, refused) || !errors.Is(r.Err, refused) {
		t.Fatalf("Submit = (%+v, %v), want the op's own error %v", r, err, refused)
	}
	if all := b.SubmitAll(context.Background(), []*pb.AppendOp{opN(2)}); !errors.Is(all[0].Err, refused) {
		t.Fatalf("SubmitAll = %+v, want the op's own error", all)
	}
}
