package blocks

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// Cache directives, the leader's half (HDFS CacheReplicationMonitor), kept
// in the leader's soft state like re-replication (replication.go):
//
//   - Directives are replicated (fsm): path → cached replicas wanted. What
//     each node holds in locked memory comes from its cache report, sent
//     with every heartbeat (capacity, bytes used, cached block ids).
//   - Each cycle (Config.CacheCheckInterval, outside safe mode) checks
//     the blocks of a bounded slice of the directives (maxCacheChecksPerCycle
//     blocks, resuming where the last cycle stopped) and a bounded sample of
//     the blocks nodes report cached. A COMPLETE block of a directive's
//     file should be cached on `replication` distinct nodes that hold a
//     good replica (FINALIZED at the block's GS and length, not reported
//     corrupt, node not dead): short of that, cache commands go to live
//     good holders with the most free cache first; above it, the extras
//     are uncached (stale nodes first, then the fullest caches). A block
//     waits while one of its good holders has sent no cache report this
//     term (a new leader does not cache a copy too many).
//   - A cached replica no directive covers (directive removed, file
//     deleted or reopened, replica no longer good on that node) is
//     uncached.
//   - Commands ride the next heartbeat reply (at most maxCacheCmdsPerBeat
//     blocks of each kind). A command is pending until a report shows it
//     done; a sent cache command not shown within Config.CacheTimeout is
//     forgotten and the block judged again (so re-sent, maybe elsewhere).
//
// Nothing here is journaled: a new leader starts with no cache state and
// re-derives it from the reports of the heartbeats that follow.

const (
	// maxCacheCmdsPerBeat bounds the blocks of the cache and of the
	// uncache command of one heartbeat reply.
	maxCacheCmdsPerBeat = 1000
	// maxCacheChecksPerCycle bounds the directive blocks, and the reported
	// cached blocks, one cycle checks.
	maxCacheChecksPerCycle = 10000
)

// nodeCache is a node's latest cache report and the cache work for it.
type nodeCache struct {
	reported       bool
	capacity, used uint64
	cached         map[uint64]struct{}
	// pending: commands queued or sent and not yet shown by a report.
	pending map[uint64]*cacheCmd
}

type cacheCmd struct {
	uncache bool
	block   *fsmpb.BlockRef
	sent    bool
	expires time.Time // once sent
}

func (c *nodeCache) has(id uint64) bool {
	_, ok := c.cached[id]
	return ok
}

// caching: the block is cached and not being uncached, or being cached.
func (c *nodeCache) caching(id uint64) bool {
	cmd := c.pending[id]
	return cmd == nil && c.has(id) || cmd != nil && !cmd.uncache
}

// free is the capacity left once the pending cache commands are done.
func (c *nodeCache) free() uint64 {
	used := c.used
	for _, cmd := range c.pending {
		if !cmd.uncache {
			used += cmd.block.NumBytes
		}
	}
	return c.capacity - min(used, c.capacity)
}

// queue asks for block b to be cached (or uncached) and reports whether
// that is new: an equal command already pending is kept as it is.
func (c *nodeCache) queue(b *fsmpb.BlockRef, uncache bool) bool {
	if cmd := c.pending[b.Id]; cmd != nil && cmd.uncache == uncache {
		return false
	}
	if c.pending == nil {
		c.pending = map[uint64]*cacheCmd{}
	}
	c.pending[b.Id] = &cacheCmd{uncache: uncache, block: b}
	return true
}

// setReport records a heartbeat's cache report (the zero report: the
// node caches nothing) and settles the commands it shows done.
func (c *nodeCache) setReport(r CacheReport) {
	c.reported, c.capacity, c.used = true, r.Capacity, r.Used
	c.cached = make(map[uint64]struct{}, len(r.BlockIDs))
	for _, id := range r.BlockIDs {
		c.cached[id] = struct{}{}
	}
	for id, cmd := range c.pending {
		if c.has(id) != cmd.uncache {
			delete(c.pending, id)
		}
	}
}

// takeWork drains up to maxCacheCmdsPerBeat unsent commands of each kind
// for a heartbeat reply, lowest block id first; they expire timeout after.
func (c *nodeCache) takeWork(now time.Time, timeout time.Duration) (cache, uncache []*fsmpb.BlockRef) {
	ids := make([]uint64, 0, len(c.pending))
	for id, cmd := range c.pending {
		if !cmd.sent {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		cmd := c.pending[id]
		out := &cache
		if cmd.uncache {
			out = &uncache
		}
		if len(*out) < maxCacheCmdsPerBeat {
			*out = append(*out, cmd.block)
			cmd.sent, cmd.expires = true, now.Add(timeout)
		}
	}
	return cache, uncache
}

// cacheTarget is what a cache check needs of a block: its record (nil
// when deleted) and the cached replicas wanted (0: none).
type cacheTarget struct {
	block *fsmpb.BlockRecord
	want  int
}

// cacheCycle expires old commands, forgets dead nodes' caches, then checks
// a bounded set of blocks (see the top of this file).
func (m *Manager) cacheCycle(now time.Time) {
	f := m.locked()
	if f.safeMode {
		f.mu.Unlock()
		return
	}
	var sample []uint64
	for nid, n := range f.nodes {
		c := &n.cache
		if n.dead {
			f.forgetCache(n)
			continue
		}
		for id, cmd := range c.pending {
			if cmd.sent && now.After(cmd.expires) {
				delete(c.pending, id)
				f.unindexCacher(id, n)
				m.log.Warn("cache command not reported in time; judging the block again", "block-id", id, "node", nid, "uncache", cmd.uncache)
			}
		}
		for id := range c.cached {
			if len(sample) >= maxCacheChecksPerCycle {
				break
			}
			sample = append(sample, id)
		}
		for id := range c.pending {
			if len(sample) >= maxCacheChecksPerCycle {
				break
			}
			sample = append(sample, id)
		}
	}
	cursor := f.cacheCursor
	f.mu.Unlock()

	targets, next := m.readCacheTargets(sample, cursor)
	ids := make([]uint64, 0, len(targets))
	for id := range targets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cfg := m.cfg
	f = m.locked()
	defer f.mu.Unlock()
	if f.safeMode { // a new term began meanwhile
		return
	}
	f.cacheCursor = next
	for _, id := range ids {
		m.checkCacheLocked(f, id, targets[id], now, cfg)
	}
}

// readCacheTargets reads from the FSM the blocks of sample (reported
// cached or pending) and of the directives from the one with id cursor on,
// up to about maxCacheChecksPerCycle blocks (wrapping around); it returns
// the directive id the next cycle starts from.
func (m *Manager) readCacheTargets(sample []uint64, cursor uint64) (map[uint64]cacheTarget, uint64) {
	out := make(map[uint64]cacheTarget, len(sample))
	next := cursor
	m.fsm.View(func(st *fsm.State) {
		for _, id := range sample {
			b, ok := st.Block(id)
			if !ok {
				out[id] = cacheTarget{}
				continue
			}
			t := cacheTarget{block: b}
			if d, ok := st.CacheDirectiveOfPath(b.Path); ok && b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE {
				t.want = int(d.Replication)
			}
			out[id] = t
		}
		dirs := st.CacheDirectives()
		start := sort.Search(len(dirs), func(i int) bool { return dirs[i].Id >= cursor })
		budget := maxCacheChecksPerCycle
		for k := range dirs {
			d := dirs[(start+k)%len(dirs)]
			blocks, _ := st.BlocksOfFile(d.Path)
			if k > 0 && len(blocks) > budget {
				break
			}
			for _, b := range blocks {
				if b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE {
					out[b.Id] = cacheTarget{block: b, want: int(d.Replication)}
				}
			}
			budget -= len(blocks)
			next = d.Id + 1
		}
	})
	return out, next
}

// checkCacheLocked brings block id to t.want cached replicas on good
// holders, and uncaches it wherever it is not wanted.
func (m *Manager) checkCacheLocked(f *fsSoft, id uint64, t cacheTarget, now time.Time, cfg Config) {
	ref := &fsmpb.BlockRef{Id: id}
	if t.block != nil {
		ref = &fsmpb.BlockRef{Id: id, Gs: t.block.Gs, NumBytes: t.block.NumBytes}
	}
	var cachedOn, candidates []string
	for _, n := range f.cacheCandidates(id) {
		nid, c := n.id, &n.cache
		good := t.want > 0 && f.goodReplicaLocked(nid, t.block, now, cfg.NodeDeadInterval)
		if good && !c.reported {
			// A holder that has not heartbeated to this leader yet (a new
			// term, a node between its block report and its first
			// heartbeat) may have it cached: wait for its cache report
			// rather than cache a copy too many.
			return
		}
		switch {
		case c.caching(id) && !good:
			if f.queueCache(n, ref, true) {
				m.log.Info("uncaching block: no directive wants it there", "block-id", id, "node", nid)
			}
		case c.caching(id):
			cachedOn = append(cachedOn, nid)
		case good && c.reported && c.pending[id] == nil && f.live(nid, now, cfg.NodeStaleInterval) && c.free() >= ref.NumBytes:
			candidates = append(candidates, nid)
		}
	}
	switch {
	case len(cachedOn) > t.want:
		// Stale nodes first, then the fullest caches.
		slices.SortFunc(cachedOn, func(x, y string) int {
			lx, ly := f.live(x, now, cfg.NodeStaleInterval), f.live(y, now, cfg.NodeStaleInterval)
			if lx != ly {
				if !lx {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(f.nodes[x].cache.free(), f.nodes[y].cache.free()), cmp.Compare(x, y))
		})
		for _, nid := range cachedOn[:len(cachedOn)-t.want] {
			f.queueCache(f.nodes[nid], ref, true)
			m.log.Info("uncaching excess cached replica", "block-id", id, "node", nid, "cached", len(cachedOn), "replication", t.want)
		}
	case len(cachedOn) < t.want:
		free := make(map[string]uint64, len(candidates))
		for _, nid := range candidates {
			free[nid] = f.nodes[nid].cache.free()
		}
		slices.SortFunc(candidates, func(x, y string) int { return cmp.Or(cmp.Compare(free[y], free[x]), cmp.Compare(x, y)) })
		for _, nid := range candidates[:min(len(candidates), t.want-len(cachedOn))] {
			f.queueCache(f.nodes[nid], ref, false)
			m.log.Info("caching block", "block-id", id, "gs", ref.Gs, "path", t.block.Path, "node", nid, "cached", len(cachedOn), "replication", t.want)
		}
	}
}

// goodReplicaLocked reports whether node nid holds a good replica of b:
// FINALIZED at its GS and length, not reported corrupt, the node not dead.
func (f *fsSoft) goodReplicaLocked(nid string, b *fsmpb.BlockRecord, now time.Time, dead time.Duration) bool {
	n := f.nodes[nid]
	if n == nil || b == nil {
		return false
	}
	r, ok := n.replicas[b.Id]
	return ok && r.state == lr.ReplicaFinalized && r.gs == b.Gs && r.numBytes == int64(b.NumBytes) &&
		f.alive(nid, now, dead) && !f.corruptLocked(b.Id, nid, r)
}

// cachedCountLocked counts the live-or-stale (not dead) nodes whose
// report lists block id cached.
func (f *fsSoft) cachedCountLocked(id uint64) int {
	c := 0
	for x := range f.cachers.each(id) {
		if n := f.byIndex[x-1]; !n.dead && n.cache.has(id) {
			c++
		}
	}
	return c
}

// cacheCandidates returns the nodes a cache check of block id looks at:
// its holders, then the other nodes caching it or asked to (the rest can
// neither cache it nor need uncaching).
func (f *fsSoft) cacheCandidates(id uint64) []*nodeSoft {
	var out []*nodeSoft
	for h := range f.holdersOf(id) {
		out = append(out, h.node)
	}
	for x := range f.cachers.each(id) {
		if n := f.byIndex[x-1]; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// queueCache asks node n to cache (or uncache) block b, as
// nodeCache.queue, and lists n among b's cachers.
func (f *fsSoft) queueCache(n *nodeSoft, b *fsmpb.BlockRef, uncache bool) bool {
	f.cachers.add(b.Id, n.index+1)
	return n.cache.queue(b, uncache)
}

// unindexCacher takes node n off block id's cachers unless its report
// lists the block cached or a command for it is pending.
func (f *fsSoft) unindexCacher(id uint64, n *nodeSoft) {
	if _, pending := n.cache.pending[id]; !pending && !n.cache.has(id) {
		f.cachers.remove(id, n.index+1)
	}
}

// setCacheReport records node n's cache report (nodeCache.setReport) and
// brings its cachers entries up to date.
func (f *fsSoft) setCacheReport(n *nodeSoft, r CacheReport) {
	c := &n.cache
	old := c.cached
	var settled []uint64
	for id := range c.pending {
		settled = append(settled, id)
	}
	c.setReport(r)
	for id := range c.cached {
		if _, was := old[id]; !was {
			f.cachers.add(id, n.index+1)
		}
	}
	for id := range old {
		f.unindexCacher(id, n)
	}
	for _, id := range settled {
		f.unindexCacher(id, n)
	}
}

// forgetCache drops a dead node's cache state and its cachers entries.
func (f *fsSoft) forgetCache(n *nodeSoft) {
	old := n.cache
	n.cache = nodeCache{}
	for id := range old.cached {
		f.unindexCacher(id, n)
	}
	for id := range old.pending {
		f.unindexCacher(id, n)
	}
}

// DirectiveStatus is a cache directive with how much of it is cached: its
// file's COMPLETE blocks, each wanted on Directive.Replication nodes.
type DirectiveStatus struct {
	Directive                  *fsmpb.CacheDirective
	BlocksNeeded, BlocksCached uint64
	BytesNeeded, BytesCached   uint64
}

// CacheDirectives lists every directive (replicated) with the leader's
// view of how much of it is cached (soft state, from cache reports).
func (m *Manager) CacheDirectives() []DirectiveStatus {
	var out []DirectiveStatus
	var blocks [][]*fsmpb.BlockRecord
	m.fsm.View(func(st *fsm.State) {
		for _, d := range st.CacheDirectives() {
			out = append(out, DirectiveStatus{Directive: d})
			bs, _ := st.BlocksOfFile(d.Path)
			blocks = append(blocks, bs)
		}
	})
	f := m.locked()
	defer f.mu.Unlock()
	for i := range out {
		ds := &out[i]
		want := uint64(ds.Directive.Replication)
		for _, b := range blocks[i] {
			if b.State != fsmpb.BlockState_BLOCK_STATE_COMPLETE {
				continue
			}
			cached := min(uint64(f.cachedCountLocked(b.Id)), want)
			ds.BlocksNeeded++
			ds.BytesNeeded += want * b.NumBytes
			ds.BytesCached += cached * b.NumBytes
			if cached == want {
				ds.BlocksCached++
			}
		}
	}
	return out
}
