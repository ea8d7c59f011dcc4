package raftnode

import (
	"context"
	"sync"

	"github.com/hashicorp/raft"
)

// VerifyLeader returns nil once a leadership check (Raft's VerifyLeader: a
// round of heartbeats a quorum answered) that started after the call
// confirmed this member still leads: the check of a linearizable read.
// Calls queued while one round runs share the next round, so a burst of
// reads costs one round, not one each.
func (n *Node) VerifyLeader(ctx context.Context) error { return n.reads.verify(ctx) }

// readIndex batches the leadership checks of VerifyLeader.
type readIndex struct {
	r    *raft.Raft
	reqs chan chan error
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func newReadIndex(r *raft.Raft) *readIndex {
	ri := &readIndex{r: r, reqs: make(chan chan error, 1024), stop: make(chan struct{})}
	ri.wg.Add(1)
	go ri.loop()
	return ri
}

func (ri *readIndex) loop() {
	defer ri.wg.Done()
	for {
		var batch []chan error
		select {
		case c := <-ri.reqs:
			batch = append(batch, c)
		case <-ri.stop:
			return
		}
	drain:
		for {
			select {
			case c := <-ri.reqs:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		err := Await(ri.stop, ri.r.VerifyLeader())
		for _, c := range batch {
			c <- err
		}
	}
}

func (ri *readIndex) verify(ctx context.Context) error {
	c := make(chan error, 1)
	select {
	case ri.reqs <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-ri.stop:
		return raft.ErrRaftShutdown
	}
	select {
	case err := <-c:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-ri.stop:
		return raft.ErrRaftShutdown
	}
}

func (ri *readIndex) close() {
	ri.once.Do(func() { close(ri.stop) })
	ri.wg.Wait()
}
