package journal

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbookhq/logbook/fsm"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// Sink hands a batch of ops to the replicated log. Start is called from the
// batcher's loop, one batch at a time and in queue order, and hands the
// batch on before it returns (to Raft, or onto the ordered stream to the
// leader), so ops enter the log in the order they were submitted even with
// several batches in flight; it must not block for the commit.
// The returned wait blocks until the batch is safe (committed and applied)
// or failed, and returns one Result per op, in order.
type Sink interface {
	Start(ops []*pb.AppendOp) (wait func() ([]fsm.Result, error))
}

// SinkFunc picks the sink for the next batch (the local leader, a forwarder
// to the current leader, or an error when there is no leader). It may block
// until a leader is known; ctx ends with the batcher.
type SinkFunc func(ctx context.Context) (Sink, error)

// BatcherConfig bounds group commit.
type BatcherConfig struct {
	// MaxBatchOps and MaxBatchBytes bound one log entry.
	MaxBatchOps   int
	MaxBatchBytes int
	// InFlight is how many batches may await commit at once (1 or 2 is
	// best: more only shrinks batches).
	InFlight int
	// MaxQueued bounds ops waiting for a batch; beyond it Submit fails with
	// ErrQueueFull (admission control, not unbounded memory).
	MaxQueued int
	// Linger bounds how long the next batch waits, once a slot is free,
	// for the submitters of the batch that just completed to come back:
	// it is taken as soon as as many ops are queued as that batch held,
	// or when Linger has passed. A batch of one op never makes the next
	// wait (a lone client pays nothing), nor does a queue that already
	// holds that many. 0 never waits. See DefaultBatcherConfig.
	Linger time.Duration
}

// DefaultBatcherConfig: up to 1024 ops or 4 MiB per entry, one in flight.
//
// One batch in flight makes every Raft entry as large as the load allows:
// each entry costs a log store commit with an fdatasync on every member, and
// on the reference machine that per-entry cost, not the bytes, bounds the
// throughput. Measured with coord bench journal on coord dev, 100 clients
// spread over the members (docs/benchmarks.md, "What the settings are
// worth"): two in flight make the same appends/s (16.9-20.1k against
// 17.3-19.0k with one) from entries of 21-22 appends instead of 32, so
// every append pays a larger share of each entry's syncs on every member.
//
// Linger 500µs: when an entry commits, its submitters get their replies and
// most send their next op within a few hundred microseconds; taken at once,
// the next batch misses them and they wait out a whole commit, so the
// clients split into cohorts that take turns. Waiting for them (at most
// 500µs, never for a batch of one) merges the cohorts, in the spirit of
// PostgreSQL's commit_delay/commit_siblings. Measured against no linger
// (docs/benchmarks.md, "What the settings are worth"; 100 clients spread
// over 3 members): ops per entry 27 → 32, a median of +13% appends/s over
// nine alternating pairs, -6% server CPU per append, +16% at 10 clients;
// 1 client unchanged (it never waits). 250 µs and 1 ms both measured below
// 500 µs.
func DefaultBatcherConfig() BatcherConfig {
	return BatcherConfig{MaxBatchOps: 1024, MaxBatchBytes: 4 << 20, InFlight: 1, MaxQueued: 65536, Linger: 500 * time.Microsecond}
}

type pending struct {
	op   *pb.AppendOp
	size int
	done chan outcome
	// ctx is the submitter's: an op whose caller gave up before it was
	// taken into a batch is never proposed.
	ctx context.Context
}

func newPending(ctx context.Context, op *pb.AppendOp) *pending {
	return &pending{op: op, size: proto.Size(op), done: make(chan outcome, 1), ctx: ctx}
}

type outcome struct {
	res fsm.Result
	err error
}

// result is the op's result with the error that failed it: the batch's
// (err) if the batch failed, else the op's own from the state machine
// (res.Err).
func (o outcome) result() fsm.Result {
	if o.err != nil {
		o.res.Err = o.err
	}
	return o.res
}

// Batcher is the submit path: it takes everything queued, up to the bounds,
// into one log entry (group commit) with at most InFlight entries awaiting
// commit. One owner goroutine runs the loop; Close waits for it and for
// every in-flight batch.
type Batcher struct {
	cfg    BatcherConfig
	pick   SinkFunc
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	queue  []*pending
	wake   chan struct{}
	closed bool
	paused bool

	slots chan struct{}
	wg    sync.WaitGroup
	// lastOps is how many ops the most recently completed batch held:
	// the submitters a lingering batch waits for.
	lastOps atomic.Int64
}

// NewBatcher starts the loop.
func NewBatcher(cfg BatcherConfig, pick SinkFunc) *Batcher {
	if cfg.InFlight < 1 {
		cfg.InFlight = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Batcher{
		cfg: cfg, pick: pick, ctx: ctx, cancel: cancel,
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, cfg.InFlight),
	}
	b.wg.Add(1)
	go b.loop()
	return b
}

// Submit queues one op and waits until it is safe, failed, or ctx ends. When
// ctx ends first the op may still commit later: callers that need to know
// retry with the same (client id, request seq), which the FSM deduplicates.
//
// It is SubmitAll for one op without the slices and the closure: the
// unary append path, taken by every call.
func (b *Batcher) Submit(ctx context.Context, op *pb.AppendOp) (fsm.Result, error) {
	p := newPending(ctx, op)
	if err := b.push(p); err != nil {
		return fsm.Result{Err: err}, err
	}
	select {
	case o := <-p.done:
		r := o.result()
		return r, r.Err
	case <-ctx.Done():
		return fsm.Result{Err: ctx.Err()}, ctx.Err()
	}
}

// SubmitAll queues ops together, in order, and waits for all of them. Each
// result carries its own error in Err.
//
// Ops still queued when ctx ends are dropped, not proposed: the caller
// gets ctx's error and cannot tell them from ops lost in transit (a retry
// with the same client id and request seq is applied once either way).
func (b *Batcher) SubmitAll(ctx context.Context, ops []*pb.AppendOp) []fsm.Result {
	return b.enqueue(ctx, ops)(ctx)
}

// Enqueue queues ops together, in order, and returns at once; the returned
// wait blocks until all of them are safe or failed (or ctx ends). Callers
// that enqueue in order get their ops into the log in that order.
func (b *Batcher) Enqueue(ops []*pb.AppendOp) (wait func(ctx context.Context) []fsm.Result) {
	return b.enqueue(context.Background(), ops)
}

func (b *Batcher) enqueue(ctx context.Context, ops []*pb.AppendOp) (wait func(ctx context.Context) []fsm.Result) {
	out := make([]fsm.Result, len(ops))
	ps := make([]*pending, len(ops))
	for i, op := range ops {
		ps[i] = newPending(ctx, op)
	}
	if err := b.push(ps...); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return func(context.Context) []fsm.Result { return out }
	}
	return func(ctx context.Context) []fsm.Result {
		for i, p := range ps {
			select {
			case o := <-p.done:
				out[i] = o.result()
			case <-ctx.Done():
				out[i].Err = ctx.Err()
			}
		}
		return out
	}
}

// push queues ps together and wakes the loop, or refuses all of them.
func (b *Batcher) push(ps ...*pending) error {
	b.mu.Lock()
	var err error
	switch {
	case b.closed:
		err = ErrClosed
	case len(b.queue)+len(ps) > b.cfg.MaxQueued:
		err = ErrQueueFull
	default:
		b.queue = append(b.queue, ps...)
	}
	b.mu.Unlock()
	if err == nil {
		b.signal()
	}
	return err
}

// Close fails queued ops with ErrClosed and waits for in-flight batches.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, p := range q {
		p.done <- outcome{err: ErrClosed}
	}
}

// take removes the next batch from the queue, within the bounds. Ops
// whose submitter gave up meanwhile are failed with its error instead.
func (b *Batcher) take() []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*pending
	i, bytes := 0, 0
	for ; i < len(b.queue) && len(batch) < b.cfg.MaxBatchOps; i++ {
		p := b.queue[i]
		if err := p.ctx.Err(); err != nil {
			p.done <- outcome{err: err}
			continue
		}
		if len(batch) > 0 && bytes+p.size > b.cfg.MaxBatchBytes {
			break
		}
		bytes += p.size
		batch = append(batch, p)
	}
	b.queue = b.queue[i:]
	if len(b.queue) == 0 {
		b.queue = nil
	}
	return batch
}

// signal wakes the loop without blocking; one pending wake is enough, as
// the loop rechecks the queue.
func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// queued reports whether a batch can be taken: ops are queued and the
// submit path is not paused.
func (b *Batcher) queued() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue) > 0 && !b.paused
}

// queueLen is how many ops are queued.
func (b *Batcher) queueLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// linger waits, up to cfg.Linger, until as many ops are queued as the last
// completed batch held (see BatcherConfig.Linger). It returns at once for a
// batch of one, when the queue already holds that many, on pause, and when
// the batcher closes.
func (b *Batcher) linger() {
	want := int(b.lastOps.Load())
	if b.cfg.Linger <= 0 || want < 2 || b.queueLen() >= want {
		return
	}
	t := time.NewTimer(b.cfg.Linger)
	defer t.Stop()
	for b.queueLen() < want && !b.Paused() {
		select {
		case <-b.wake:
		case <-t.C:
			return
		case <-b.ctx.Done():
			return
		}
	}
}

// Pause stops handing ops to the log (like mds_log_pause): appends queue
// and wait, in order; batches already handed over still complete.
func (b *Batcher) Pause() {
	b.mu.Lock()
	b.paused = true
	b.mu.Unlock()
	b.signal() // a lingering batch stops waiting
}

// Resume restarts the submit path; queued ops drain in submission order.
func (b *Batcher) Resume() {
	b.mu.Lock()
	b.paused = false
	b.mu.Unlock()
	b.signal()
}

// Paused reports whether the submit path is paused.
func (b *Batcher) Paused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused
}

func (b *Batcher) loop() {
	defer b.wg.Done()
	for {
		// Wait for an in-flight slot first: while every slot is busy the
		// queue keeps growing, and the next batch takes all of it.
		select {
		case b.slots <- struct{}{}:
		case <-b.ctx.Done():
			return
		}
		for !b.queued() {
			select {
			case <-b.wake:
			case <-b.ctx.Done():
				<-b.slots
				return
			}
		}
		if b.linger(); !b.queued() { // paused meanwhile
			<-b.slots
			continue
		}
		sink, err := b.pick(b.ctx)
		if err != nil {
			if b.ctx.Err() != nil {
				<-b.slots
				return
			}
			// No leader within the hold time: fail everything queued, not
			// one batch per hold period.
			b.mu.Lock()
			q := b.queue
			b.queue = nil
			b.mu.Unlock()
			for _, p := range q {
				p.done <- outcome{err: err}
			}
			<-b.slots
			continue
		}
		batch := b.take()
		if len(batch) == 0 { // every queued op's submitter gave up
			<-b.slots
			continue
		}
		ops := make([]*pb.AppendOp, len(batch))
		for i, p := range batch {
			ops[i] = p.op
		}
		wait := sink.Start(ops)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.slots }()
			results, err := wait()
			b.lastOps.Store(int64(len(batch)))
			for i, p := range batch {
				switch {
				case err != nil:
					p.done <- outcome{err: err}
				case i < len(results):
					p.done <- outcome{res: results[i]}
				default:
					p.done <- outcome{err: errShortResults}
				}
			}
		}()
	}
}
