//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
)

// ack is one acknowledged append.
type ack struct {
	seq      uint64
	payload  string
	sent, at time.Time // call start, acknowledgement
}

// load appends from the host with several workers, each its own SDK
// client (and so its own exactly-once session), and records every
// acknowledged append. Payloads are unique: a failed append's payload is
// never sent again, so a payload present twice in the journal is a
// duplicate the cluster made.
type load struct {
	cl     *cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	acks    []ack
	seqs    map[uint64]string
	dupSeqs []uint64 // seqs acknowledged twice
	errs    int
	lastErr error
	stopped bool
}

const (
	// appendTimeout bounds one Append call, retries through a leader
	// change included.
	appendTimeout = 20 * time.Second
	// A load stops by itself after loadLifetime or maxCallsPerWorker.
	loadLifetime      = 10 * time.Minute
	maxCallsPerWorker = 1_000_000
)

// startLoad starts workers appending until stop (registered as a cleanup
// too, so a failing test stops its load before its cluster goes).
func startLoad(cl *cluster, workers int) *load {
	ctx, cancel := context.WithTimeout(context.Background(), loadLifetime)
	l := &load{cl: cl, cancel: cancel, seqs: map[uint64]string{}}
	tag := cl.name
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.worker(ctx, fmt.Sprintf("%s/w%d", tag, w))
		}()
	}
	cl.t.Cleanup(l.stop)
	return l
}

func (l *load) worker(ctx context.Context, name string) {
	var (
		c   *client.Client
		gen = -1
	)
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for i := 0; i < maxCallsPerWorker && ctx.Err() == nil; i++ {
		// A member's published port changed: reconnect between calls.
		if g := l.cl.generation(); c == nil || g != gen {
			if c != nil {
				c.Close()
				c = nil
			}
			var err error
			if c, gen, err = l.cl.newClient(ctx); err != nil {
				l.failed(err)
				backoff(ctx, 100*time.Millisecond)
				continue
			}
		}
		payload := fmt.Sprintf("%s/%d", name, i)
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, appendTimeout)
		seqs, err := c.Journal().Append(actx, client.Event{Type: "e2e", Payload: []byte(payload)})
		at := time.Now()
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.failed(err)
				backoff(ctx, 20*time.Millisecond)
			}
			continue
		}
		l.acked(ack{seq: seqs[0], payload: payload, sent: sent, at: at})
	}
}

func backoff(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (l *load) acked(a ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.seqs[a.seq]; dup {
		l.dupSeqs = append(l.dupSeqs, a.seq)
	}
	l.seqs[a.seq] = a.payload
	l.acks = append(l.acks, a)
}

func (l *load) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs++
	l.lastErr = err
}

// count is the number of acknowledged appends so far.
func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// firstAckSentAfter is the acknowledgement time of the first append whose
// call started after t.
func (l *load) firstAckSentAfter(t time.Time) (first time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acks {
		if a.sent.After(t) && (!ok || a.at.Before(first)) {
			first, ok = a.at, true
		}
	}
	return first, ok
}

// waitCount waits until at least n appends are acknowledged in all.
func (l *load) waitCount(n int, timeout time.Duration) {
	l.cl.t.Helper()
	err := poll(timeout, 50*time.Millisecond, func(context.Context) error {
		if c := l.count(); c < n {
			l.mu.Lock()
			defer l.mu.Unlock()
			return fmt.Errorf("%d of %d appends acknowledged (%d errors, last: %v)", c, n, l.errs, l.lastErr)
		}
		return nil
	})
	if err != nil {
		l.cl.t.Fatal(err)
	}
}

// waitMore waits for n more acknowledged appends than now.
func (l *load) waitMore(n int, timeout time.Duration) {
	l.cl.t.Helper()
	l.waitCount(l.count()+n, timeout)
}

// stop cancels the workers and waits for them; calls in flight end
// unacknowledged (their outcome is unknown, and not checked).
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		l.cl.logf("load stopped: %d appends acknowledged, %d failed calls (last: %v)", len(l.acks), l.errs, l.lastErr)
	}
}

// ackedSeqs returns the acknowledged appends, seq -> payload, and fails the
// test if any seq was acknowledged twice.
func (l *load) ackedSeqs() map[uint64]string {
	l.cl.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dupSeqs) > 0 {
		l.cl.t.Errorf("%d seqs acknowledged to two appends, e.g. %v", len(l.dupSeqs), l.dupSeqs[:min(5, len(l.dupSeqs))])
	}
	return l.seqs
}

// stopAndVerify stops the load and checks every member against what it
// acknowledged (cluster.verify).
func (l *load) stopAndVerify() {
	l.cl.t.Helper()
	l.stop()
	l.cl.verify(l.ackedSeqs())
}
