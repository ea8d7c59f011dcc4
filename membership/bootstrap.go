package membership

import (
	"errors"
	"fmt"
	"slices"
)

// Server is a Raft voter chosen by BootstrapDecision.
type Server struct {
	// ID is the Raft server ID (the member's Meta.ID).
	ID string
	// RaftAddr is the Raft transport address.
	RaftAddr string
}

// BootstrapDecision decides, purely from what gossip currently shows, whether
// the member selfID must call raft.BootstrapCluster now, and with which
// voters. seen are the metas of the members currently seen, including our own
// (typically from Members); expect is the bootstrap-expect count.
//
// Only coordinators of our cluster (the ClusterID of selfID's entry) count:
//   - if any of them is Bootstrapped, a cluster already exists and nobody
//     bootstraps (wait to be added);
//   - until at least expect of them are seen, nobody bootstraps;
//   - otherwise they are sorted by ID and the first expect are the voters;
//     only the lowest ID among them bootstraps, so a member not among them
//     never does.
//
// Seeing the same ID with two Raft addresses, or two IDs with one Raft
// address, is a misconfiguration: it returns an error and nobody
// bootstraps. So does a missing self entry or cluster ID, an empty ID or Raft
// address, or expect < 1. A non-coordinator self never bootstraps.
//
// The decision is only safe if exactly expect coordinators take part in
// forming the cluster; with more, members with different views could pick
// different voter sets.
func BootstrapDecision(selfID string, expect int, seen []Meta) (bootstrap bool, servers []Server, err error) {
	if selfID == "" {
		return false, nil, errors.New("membership: bootstrap: self id is empty")
	}
	if expect < 1 {
		return false, nil, fmt.Errorf("membership: bootstrap: expect must be at least 1, got %d", expect)
	}
	selfIdx := slices.IndexFunc(seen, func(m Meta) bool { return m.ID == selfID })
	if selfIdx < 0 {
		return false, nil, fmt.Errorf("membership: bootstrap: self %q is not among the seen members", selfID)
	}
	self := seen[selfIdx]
	if self.Role != RoleCoordinator {
		return false, nil, nil
	}
	if self.ClusterID == "" {
		return false, nil, fmt.Errorf("membership: bootstrap: self %q has no cluster id", selfID)
	}

	addrByID := make(map[string]string)
	idByAddr := make(map[string]string)
	bootstrapped := false
	for _, m := range seen {
		if m.Role != RoleCoordinator || m.ClusterID != self.ClusterID {
			continue
		}
		if m.ID == "" || m.RaftAddr == "" {
			return false, nil, fmt.Errorf("membership: bootstrap: coordinator %q has an empty id or raft address %q", m.ID, m.RaftAddr)
		}
		if a, ok := addrByID[m.ID]; ok && a != m.RaftAddr {
			return false, nil, fmt.Errorf("membership: bootstrap: coordinator id %q seen with raft addresses %q and %q", m.ID, a, m.RaftAddr)
		}
		if id, ok := idByAddr[m.RaftAddr]; ok && id != m.ID {
			return false, nil, fmt.Errorf("membership: bootstrap: raft address %q used by coordinators %q and %q", m.RaftAddr, id, m.ID)
		}
		addrByID[m.ID] = m.RaftAddr
		idByAddr[m.RaftAddr] = m.ID
		bootstrapped = bootstrapped || m.Bootstrapped
	}
	if bootstrapped || len(addrByID) < expect {
		return false, nil, nil
	}
	ids := make([]string, 0, len(addrByID))
	for id := range addrByID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if ids[0] != selfID {
		return false, nil, nil
	}
	servers = make([]Server, expect)
	for i, id := range ids[:expect] {
		servers[i] = Server{ID: id, RaftAddr: addrByID[id]}
	}
	return true, servers, nil
}
