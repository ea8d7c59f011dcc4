package nodeserver

import (
	"slices"
	"testing"
	"time"

	"github.com/logbookhq/logbook/fsm/fsmpb"

	"github.com/logbookhq/logbook/internal/clusterpb"
)

// lastCacheReport is the cache report of the latest heartbeat.
func (f *fakeCoord) lastCacheReport() *clusterpb.CacheReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.heartbeats) == 0 {
		return nil
	}
	return f.heartbeats[len(f.heartbeats)-1].GetCache()
}

// Every heartbeat carries the cache report; a cache command caches the
// replica at its GS through the dataset (the next reports list it), one
// for another GS or a missing replica is ignored, and uncache releases it.
func TestCoordLinkCacheCommands(t *testing.T) {
	fc := startFakeCoord(t)
	n := startNode(t, "n1", withCoord(50*time.Millisecond, fc.addr), func(c *Config) { c.MaxLockedMemory = 1 << 20 })
	data := randomBytes(20_000, 5)
	writeReplica(t, n, 7, 1007, data, true)
	writeReplica(t, n, 8, 1008, data, true)
	waitFor(t, "an empty cache report", func() bool {
		r := fc.lastCacheReport()
		return r != nil && r.Capacity == 1<<20 && r.Used == 0 && len(r.BlockIds) == 0
	})

	fc.queue(&clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_Cache{Cache: &clusterpb.CacheCommand{Blocks: []*fsmpb.BlockRef{
		{Id: 7, Gs: 1007, NumBytes: 20_000}, {Id: 8, Gs: 999, NumBytes: 20_000}, {Id: 9, Gs: 1009}}}}})
	waitFor(t, "blk_7 cached and reported", func() bool {
		r := fc.lastCacheReport()
		return slices.Equal(r.GetBlockIds(), []uint64{7}) && r.GetUsed() >= 20_000
	})
	if ids, _ := n.srv.Store().CacheReport(testPool); !slices.Equal(ids, []uint64{7}) {
		t.Fatalf("cached %v: a command at another GS or for a missing replica was run", ids)
	}

	fc.queue(&clusterpb.NodeCommand{Command: &clusterpb.NodeCommand_Uncache{Uncache: &clusterpb.UncacheCommand{Blocks: []*fsmpb.BlockRef{{Id: 7}, {Id: 9}}}}})
	waitFor(t, "blk_7 uncached and reported", func() bool {
		r := fc.lastCacheReport()
		return r != nil && len(r.BlockIds) == 0 && r.Used == 0
	})
}
