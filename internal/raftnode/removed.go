package raftnode

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// InConfiguration reports whether the latest configuration Raft holds
// names this member, and whether that configuration has any server at all
// (a member that has not joined yet holds none).
func (n *Node) InConfiguration() (in, known bool, err error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, false, fmt.Errorf("raftnode: read raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	for _, srv := range servers {
		if srv.ID == raft.ServerID(n.cfg.ID) {
			return true, true, nil
		}
	}
	return false, len(servers) > 0, nil
}

// Removed reports whether this member's own log (or, without a
// configuration in it, its newest snapshot) shows it was removed from
// the cluster: the newest configuration lacks it while an older one had
// it. A member still catching up sees older configurations without
// itself, but none with it, so it is not taken for removed.
func (n *Node) Removed() (bool, error) {
	removed, err := removedFromLog(raft.ServerID(n.cfg.ID), n.store, n.snaps)
	if err != nil {
		return false, fmt.Errorf("raftnode: read the configuration history: %w", err)
	}
	return removed, nil
}

func removedFromLog(id raft.ServerID, logs raft.LogStore, snaps raft.SnapshotStore) (bool, error) {
	has := func(c raft.Configuration) bool {
		for _, srv := range c.Servers {
			if srv.ID == id {
				return true
			}
		}
		return false
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return false, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return false, err
	}
	latestSeen := false
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				break
			}
			return false, err
		}
		if l.Type != raft.LogConfiguration {
			continue
		}
		c := raft.DecodeConfiguration(l.Data)
		if !latestSeen {
			if has(c) || len(c.Servers) == 0 {
				return false, nil
			}
			latestSeen = true
		} else if has(c) {
			return true, nil
		}
	}
	list, err := snaps.List()
	if err != nil {
		return false, err
	}
	for _, m := range list {
		if !latestSeen {
			if has(m.Configuration) || len(m.Configuration.Servers) == 0 {
				return false, nil
			}
			latestSeen = true
		} else if has(m.Configuration) {
			return true, nil
		}
	}
	return false, nil
}
