package nodeserver

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
)

// The node's half of cache directives (HDFS DNA_CACHE, DNA_UNCACHE and the
// cache report): the coordinator decides what to cache where; the dataset
// (replica.Dataset.Cache) locks the bytes within --max-locked-memory.

// cacheReport is the heartbeat's cache report: the locked-memory budget
// and use, and the cached replicas of the pool (the lowest
// pb.MaxCacheReportBlocks ids if more).
func (l *coordLink) cacheReport() *clusterpb.CacheReport {
	ids, err := l.s.store.CacheReport(l.pool)
	if err != nil {
		l.log.Warn("cache report failed", "error", err)
		return nil
	}
	return &clusterpb.CacheReport{Capacity: u64(l.s.cfg.MaxLockedMemory), Used: u64(l.s.store.Stats().BytesCached), BlockIds: ids[:min(len(ids), pb.MaxCacheReportBlocks)]}
}

// queueCache queues replicas to cache (HDFS DNA_CACHE) and starts the
// worker if it is not running. Called on the link's goroutine, so the
// worker joins l.wg before stop waits.
func (l *coordLink) queueCache(blocks []*fsmpb.BlockRef) {
	l.mu.Lock()
	if l.toCacheSet == nil {
		l.toCacheSet = map[uint64]bool{}
	}
	for _, b := range blocks {
		if !l.toCacheSet[b.GetId()] && len(l.toCacheSet) < linkMaxCacheQueued {
			l.toCacheSet[b.GetId()] = true
			l.toCache = append(l.toCache, b)
		}
	}
	start := !l.caching && len(l.toCache) > 0 && l.ctx.Err() == nil
	l.caching = l.caching || start
	l.mu.Unlock()
	if start {
		l.wg.Add(1)
		go l.cacheWorker()
	}
}

// cacheWorker caches the queued replicas in turn; once the queue is empty
// it heartbeats at once, so the coordinator sees them cached.
func (l *coordLink) cacheWorker() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		var b *fsmpb.BlockRef
		for b == nil && len(l.toCache) > 0 {
			if next := l.toCache[0]; l.toCacheSet[next.GetId()] {
				b = next
			}
			l.toCache = l.toCache[1:]
		}
		if b == nil || l.ctx.Err() != nil {
			l.caching = false
			l.mu.Unlock()
			l.heartbeatNow()
			return
		}
		delete(l.toCacheSet, b.GetId())
		l.mu.Unlock()
		l.cacheBlock(l.ctx, b)
	}
}

// cacheBlock caches a FINALIZED replica at the command's GS; a replica at
// another GS is left alone (the coordinator's view is older or newer than
// ours).
func (l *coordLink) cacheBlock(ctx context.Context, b *fsmpb.BlockRef) {
	ctx, cancel := context.WithTimeout(ctx, linkCacheTimeout)
	defer cancel()
	r, err := l.s.store.GetReplica(l.pool, b.GetId())
	if err == nil && r.GS != b.GetGs() {
		l.log.Info("cache command for another GS: ignored", "block-id", b.GetId(), "gs", b.GetGs(), "replica-gs", r.GS)
		return
	}
	if err == nil {
		err = l.s.store.Cache(ctx, l.pool, b.GetId())
	}
	if err != nil {
		l.log.Warn("cache command failed", "block-id", b.GetId(), "gs", b.GetGs(), "error", err)
		return
	}
	l.log.Info("replica cached", "block-id", b.GetId(), "gs", b.GetGs())
}

// uncache releases cached replicas, and drops queued ones (HDFS
// DNA_UNCACHE).
func (l *coordLink) uncache(cmd *clusterpb.UncacheCommand) {
	for _, b := range cmd.GetBlocks() {
		l.mu.Lock()
		delete(l.toCacheSet, b.GetId())
		l.mu.Unlock()
		if err := l.s.store.Uncache(l.pool, b.GetId()); err != nil {
			l.log.Warn("uncache command failed", "block-id", b.GetId(), "error", err)
			continue
		}
		l.log.Info("replica uncached", "block-id", b.GetId())
	}
}
