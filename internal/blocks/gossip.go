package blocks

import (
	"context"
	"sync"
	"time"

	"github.com/logbookhq/logbook/membership"
)

// nodeGossip is what memberlist says about the storage nodes that joined
// the coordinators' gossip (node serve --join): the second half of node
// liveness. A node gossip reports dead or gone is not live (no target,
// source or primary) even while its last heartbeat is recent, so a crash
// is noticed in the failure detector's time rather than the stale
// interval's; it is declared dead only by heartbeat silence
// (--dead-node-interval), so a gossip flap never starts re-replication.
// Nodes that never gossiped are judged by heartbeats alone. Kept by every
// member (gossip is not leadership state).
type nodeGossip struct {
	mu sync.Mutex
	m  map[string]membership.State
}

// state is node id's gossip state ("" if it never gossiped).
func (g *nodeGossip) state(id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st, ok := g.m[id]; ok {
		return st.String()
	}
	return ""
}

// down reports whether gossip says node id failed or left.
func (g *nodeGossip) down(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.m[id]
	return ok && (st == membership.StateDead || st == membership.StateLeft || st == membership.StateLeaving)
}

func (g *nodeGossip) set(id string, st membership.State) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]membership.State{}
	}
	g.m[id] = st
}

// watchNodeGossip follows the membership events of storage nodes, and
// every second re-reads the live members (an event dropped on a full
// channel is made up for; a dead one comes only as an event, and heartbeat
// staleness covers a lost one).
func (m *Manager) watchNodeGossip(ctx context.Context, g Gossip) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-g.Events():
			if mem := ev.Member; mem.Meta.Role == membership.RoleNode {
				m.gossip.set(mem.Meta.ID, mem.State)
				if ev.Type == membership.EventLeave {
					m.log.Info("storage node gone from gossip", "node", mem.Meta.ID, "state", mem.State.String())
				}
			}
		case <-tick.C:
			for _, mem := range g.Members() {
				if mem.Meta.Role == membership.RoleNode {
					m.gossip.set(mem.Meta.ID, mem.State)
				}
			}
		}
	}
}

// GossipState is node id's gossip state ("" if it never gossiped).
func (m *Manager) GossipState(id string) string { return m.gossip.state(id) }
