package coordserver

import (
	"sync"
	"time"

	"github.com/logbookhq/logbook/membership"
)

// gossipAdmits reports whether a node may register now. With the gossip
// encrypted the gossip key is a second credential beside the node's
// certificate: a node is admitted only once this member's gossip sees it
// alive as that node, which a node without the cluster's key never is
// (memberlist drops what it cannot decrypt). Until then Register answers
// NodeRegisterResponse.awaiting_gossip and the node, told the cluster id,
// joins the gossip and asks again. Gossip in clear admits every node, as
// liveness then rests on heartbeats.
func (s *Server) gossipAdmits(nodeID string) bool {
	if s.members == nil || s.members.Keyring() == nil {
		return true
	}
	for _, m := range s.members.Members() {
		if m.Name == nodeID && m.Meta.Role == membership.RoleNode && m.State == membership.StateAlive {
			s.admission.seen(nodeID)
			return true
		}
	}
	if s.admission.warn(nodeID, time.Now()) {
		s.log.Warn("storage node not admitted: its certificate is valid but this cluster's encrypted gossip does not see it "+
			"(has it the cluster's gossip key, and can it reach the coordinators' gossip port?)", "node", nodeID)
	}
	return false
}

// admissionLog says when to warn about a node held back by gossipAdmits:
// a node's first Register comes before it joins the gossip (it learns the
// cluster id from the answer), so only once it has been held for
// admissionGrace, then once a minute; a node admitted starts afresh.
type admissionLog struct {
	mu   sync.Mutex
	held map[string]*admissionHeld
}

type admissionHeld struct {
	first, logged time.Time
	attempts      int
}

const (
	admissionGrace = 10 * time.Second
	// admissionLogMax bounds the nodes remembered (ids come from the
	// network, though only from callers holding a node certificate).
	admissionLogMax = 1024
)

// warn records that id was held back at now and reports whether to log it.
func (a *admissionLog) warn(id string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.held[id]
	if h == nil {
		if a.held == nil || len(a.held) >= admissionLogMax {
			a.held = map[string]*admissionHeld{}
		}
		h = &admissionHeld{first: now}
		a.held[id] = h
	}
	h.attempts++
	if now.Sub(h.first) < admissionGrace || now.Sub(h.logged) < time.Minute {
		return false
	}
	h.logged = now
	return true
}

func (a *admissionLog) seen(id string) {
	a.mu.Lock()
	delete(a.held, id)
	a.mu.Unlock()
}

// attempts is how often id has been held back since it was last admitted.
func (a *admissionLog) attempts(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[id]; h != nil {
		return h.attempts
	}
	return 0
}
