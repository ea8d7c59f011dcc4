package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbookhq/logbook/client"
)

// What the file workloads (RunWrite, RunRecovery) share: the files' paths
// and deterministic content, pools of SDK clients and workers, the wait for
// storage nodes, error counting and cleanup.

const (
	// nodesWait bounds how long a file workload waits for enough live
	// storage nodes before it starts.
	nodesWait = 10 * time.Second
	// afterTimeout bounds the verification, journal read and cleanup that
	// follow the measured phases (they run even when the run's Timeout ran
	// out).
	afterTimeout = 2 * time.Minute
	mb           = 1e6
)

// validDir reports whether dir is an absolute path below / (or "": a
// fresh one).
func validDir(dir string) bool {
	return dir == "" || strings.HasPrefix(dir, "/") && dir != "/"
}

// randomDir is a fresh directory name under /bench.
func randomDir(kind string) string {
	var b [6]byte
	rand.Read(b[:])
	return "/bench/" + kind + "-" + hex.EncodeToString(b[:])
}

// fileData is the deterministic content of file i of a run: a ChaCha8
// stream keyed by the run's seed and i, regenerated to verify reads.
func fileData(seed uint64, i int) *mrand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(i))
	return mrand.NewChaCha8(key)
}

// filePath is the path of file i under dir.
func filePath(dir string, i int) string { return fmt.Sprintf("%s/f%06d", dir, i) }

// connectClients opens n SDK clients concurrently.
func connectClients(ctx context.Context, cfg client.Config, n int) ([]*client.Client, error) {
	cs := make([]*client.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = client.New(ctx, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeClients(cs)
		return nil, fmt.Errorf("connect: %w", err)
	}
	return cs, nil
}

func closeClients(cs []*client.Client) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// waitLiveNodes waits up to nodesWait until the leader counts at least
// want live storage nodes.
func waitLiveNodes(ctx context.Context, c *client.Client, want int) error {
	ctx, cancel := context.WithTimeout(ctx, nodesWait)
	defer cancel()
	var last error
	for {
		r, err := c.Nodes(ctx)
		if err == nil {
			live := 0
			for _, n := range r.Nodes {
				if n.Live {
					live++
				}
			}
			if live >= want {
				return nil
			}
			last = fmt.Errorf("%d live storage nodes, want %d for --replication (coord dev runs 3 with --nodes 3)", live, want)
		} else {
			last = err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("storage nodes not ready within %s: %w", nodesWait, last)
		case <-t.C:
		}
	}
}

// forEach runs fn(worker, i) for i in [0, n) on workers goroutines, each
// taking the next index; it returns once all are done.
func forEach(n, workers int, fn func(worker, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

// errCounter counts errors and keeps the first.
type errCounter struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *errCounter) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
}

func (e *errCounter) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *errCounter) firstErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// removeDir deletes dir and everything under it.
func removeDir(ctx context.Context, c *client.Client, dir string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterTimeout)
	defer cancel()
	_, err := c.FS().Delete(ctx, dir, true)
	if errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}
