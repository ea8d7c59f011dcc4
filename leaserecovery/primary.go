package leaserecovery

import (
	"slices"
	"time"
)

// Location is one expected location as the leader sees it (soft state).
type Location struct {
	Node NodeID
	// Alive: the node is not declared dead.
	Alive bool
	// LastHeartbeat is when the leader last heard from the node.
	LastHeartbeat time.Time
	// Fresh: heard from within the stale interval (and not failed in
	// gossip). Load: recoveries the node is primary of already. Both only
	// order the choice (ChoosePrimary).
	Fresh bool
	Load  int
}

// PrimaryChoice is the primary of a new attempt and the chosen-as-primary
// set to store with it (Recovery.Primary, Recovery.Chosen).
type PrimaryChoice struct {
	Node   NodeID // "" when no expected location is alive
	Chosen []NodeID
}

// ChoosePrimary picks the primary of a new recovery attempt (§R3.3, §R7.17).
// chosen is the block's Recovery.Chosen (nil for a first attempt).
//
// Rules: only alive expected locations qualify; among them prefer those not
// chosen by an earlier attempt, so a dead or stuck primary is not chosen
// again; when every alive location has been chosen, the set is cleared and
// all alive locations qualify again. Pick a fresh location before a stale
// one, then the one with the fewest recoveries already (so a burst of
// recoveries spreads over the nodes instead of landing on whichever
// heartbeated last), then the most recent heartbeat (HDFS's rule), ties
// broken by the smaller node id. No alive location → ok is false, no
// primary, chosen unchanged (the block stays UNDER_RECOVERY with no command).
func ChoosePrimary(expected []Location, chosen []NodeID) (PrimaryChoice, bool) {
	var alive, fresh []Location
	for _, l := range expected {
		if !l.Alive || l.Node == "" || slices.ContainsFunc(alive, func(a Location) bool { return a.Node == l.Node }) {
			continue
		}
		alive = append(alive, l)
		if !slices.Contains(chosen, l.Node) {
			fresh = append(fresh, l)
		}
	}
	if len(alive) == 0 {
		return PrimaryChoice{Chosen: slices.Clone(chosen)}, false
	}
	pool, next := fresh, slices.Clone(chosen)
	if len(fresh) == 0 {
		pool, next = alive, nil // every alive location was primary: start over
	}
	better := func(l, b Location) bool {
		switch {
		case l.Fresh != b.Fresh:
			return l.Fresh
		case l.Load != b.Load:
			return l.Load < b.Load
		case !l.LastHeartbeat.Equal(b.LastHeartbeat):
			return l.LastHeartbeat.After(b.LastHeartbeat)
		}
		return l.Node < b.Node
	}
	best := pool[0]
	for _, l := range pool[1:] {
		if better(l, best) {
			best = l
		}
	}
	return PrimaryChoice{Node: best.Node, Chosen: append(next, best.Node)}, true
}

// RecoveryLocations lists the locations a recovery command names (§R3.4,
// §R7.16): the alive expected locations heard from within staleInterval; if
// that leaves at most one, every alive expected location (the primary copes
// with failures). Dead nodes are never listed (HDFS-17430). Order follows
// expected.
func RecoveryLocations(expected []Location, now time.Time, staleInterval time.Duration) []NodeID {
	var alive, fresh []NodeID
	for _, l := range expected {
		if !l.Alive || l.Node == "" || slices.Contains(alive, l.Node) {
			continue
		}
		alive = append(alive, l.Node)
		if now.Sub(l.LastHeartbeat) < staleInterval {
			fresh = append(fresh, l.Node)
		}
	}
	if len(fresh) > 1 {
		return fresh
	}
	return alive
}
