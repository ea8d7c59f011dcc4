package membership

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/hashicorp/memberlist"
)

// State is a member's liveness as seen by the local member.
//
// memberlist does not report suspicion to its delegates, so a suspect member
// is reported as StateAlive (or StateLeaving) until it refutes or is declared
// dead.
type State int

const (
	// StateAlive: the member is alive (possibly suspected, see State).
	StateAlive State = iota + 1
	// StateLeaving: the member is alive and has announced a graceful Leave.
	StateLeaving
	// StateDead: the member failed (it stopped answering probes).
	StateDead
	// StateLeft: the member left gracefully.
	StateLeft
)

// String returns the lower-case name of s.
func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateLeaving:
		return "leaving"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	default:
		return fmt.Sprintf("state(%d)", int(s))
	}
}

// Member is a cluster member with its decoded metadata.
type Member struct {
	// Name is the memberlist node name; it always equals Meta.ID.
	Name string
	// Addr is the member's gossip address (host:port).
	Addr string
	// Meta is the member's metadata.
	Meta Meta
	// State is the member's liveness.
	State State
}

// EventType says what happened to a member.
type EventType int

const (
	// EventJoin: a member joined (or came back after being dead).
	EventJoin EventType = iota + 1
	// EventUpdate: a member's metadata changed.
	EventUpdate
	// EventLeave: a member is gone; Member.State is StateDead or StateLeft.
	EventLeave
)

// String returns the lower-case name of t.
func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	default:
		return fmt.Sprintf("event(%d)", int(t))
	}
}

// Event is a membership change.
type Event struct {
	// Type says what happened.
	Type EventType
	// Member is the member's state after the change.
	Member Member
}

// maxRejected bounds the set of peers whose rejection has been logged.
const maxRejected = 1024

// delegate implements memberlist.Delegate, EventDelegate and
// ConflictDelegate.
// memberlist calls the event methods with its node lock held, so they must
// never block or call back into memberlist.
type delegate struct {
	m *Memberlist
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta returns the encoded local metadata.
func (d *delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	if len(d.m.metaBuf) > limit {
		// Cannot happen: encodeMeta enforces memberlist.MetaMaxSize.
		return nil
	}
	return slices.Clone(d.m.metaBuf)
}

// NotifyMsg ignores user messages; this package sends none.
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts returns no user broadcasts.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState returns no user state for push/pull.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores remote user state.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin records a member that became alive.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.upsert(n, EventJoin) }

// NotifyUpdate records a member's new metadata.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.upsert(n, EventUpdate) }

// NotifyConflict records other, a member claiming existing's name from
// another address, which memberlist refused because existing is not (yet)
// dead: most often existing crashed and came back at a new address. When
// existing is declared dead, NotifyLeave has the join loop fetch other's
// state. A claim on the local member's own name is not recorded.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	m := d.m
	if other.Name == m.cfg.Meta.ID {
		return
	}
	m.membersMu.Lock()
	if _, ok := m.claimants[other.Name]; !ok && len(m.claimants) >= maxRejected {
		clear(m.claimants)
	}
	m.claimants[other.Name] = other.Address()
	m.membersMu.Unlock()
}

// NotifyLeave removes a member that died or left, and hands a claimant of
// its name at another address (see NotifyConflict) to the join loop.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	m := d.m
	meta, leaving, _ := decodeMeta(n.Meta)
	m.membersMu.Lock()
	old, ok := m.members[n.Name]
	delete(m.members, n.Name)
	delete(m.rejected, n.Name)
	claimant, claimed := m.claimants[n.Name]
	delete(m.claimants, n.Name)
	m.membersMu.Unlock()
	if claimed && claimant != n.Address() {
		select {
		case m.reclaim <- claimant:
		default: // full: memberlist's periodic push/pull gets there later
		}
	}
	if !ok {
		return // never admitted
	}
	if meta.ID != n.Name || meta.ClusterID != m.cfg.ClusterID {
		meta = old.Meta
	}
	st := StateDead
	if leaving || old.State == StateLeaving {
		st = StateLeft
	}
	mem := Member{Name: n.Name, Addr: n.Address(), Meta: meta, State: st}
	m.log.Info("membership: member gone", "id", n.Name, "addr", mem.Addr, "state", st.String())
	m.emit(Event{Type: EventLeave, Member: mem})
}

// upsert admits or updates a member, excluding (and logging once) members
// whose metadata is invalid or belongs to another cluster.
func (d *delegate) upsert(n *memberlist.Node, typ EventType) {
	m := d.m
	mem, reason := d.check(n)
	m.membersMu.Lock()
	if reason != "" {
		_, known := m.members[n.Name]
		delete(m.members, n.Name)
		logged := m.rejected[n.Name] == reason
		if !logged {
			if len(m.rejected) >= maxRejected {
				clear(m.rejected)
			}
			m.rejected[n.Name] = reason
		}
		m.membersMu.Unlock()
		if !logged {
			m.log.Warn("membership: excluding member", "name", n.Name, "addr", n.Address(), "reason", reason)
		}
		if known {
			// It was a member until this update: report it as gone.
			mem.State = StateDead
			m.emit(Event{Type: EventLeave, Member: mem})
		}
		return
	}
	delete(m.rejected, n.Name)
	if m.claimants[n.Name] == mem.Addr {
		delete(m.claimants, n.Name)
	}
	_, known := m.members[n.Name]
	m.members[n.Name] = mem
	m.membersMu.Unlock()
	if !known {
		typ = EventJoin
		m.log.Info("membership: member joined", "id", mem.Name, "addr", mem.Addr, "role", string(mem.Meta.Role))
	}
	m.emit(Event{Type: typ, Member: mem})
}

// check decodes n into a Member; a non-empty reason means n is excluded. On
// exclusion the returned Member carries the previously known metadata, if
// any is needed for a leave event.
func (d *delegate) check(n *memberlist.Node) (Member, string) {
	mem := Member{Name: n.Name, Addr: n.Address(), State: StateAlive}
	meta, leaving, err := decodeMeta(n.Meta)
	var reason string
	switch {
	case err != nil:
		reason = strings.TrimPrefix(err.Error(), "membership: ")
	case meta.ClusterID != d.m.cfg.ClusterID:
		reason = fmt.Sprintf("cluster id %q differs from ours (%q)", meta.ClusterID, d.m.cfg.ClusterID)
	case meta.ID != n.Name:
		reason = fmt.Sprintf("meta id %q differs from node name", meta.ID)
	}
	if reason != "" {
		d.m.membersMu.RLock()
		mem.Meta = d.m.members[n.Name].Meta
		d.m.membersMu.RUnlock()
		return mem, reason
	}
	mem.Meta = meta
	if leaving {
		mem.State = StateLeaving
	}
	return mem, ""
}

// emit queues ev without ever blocking: when the channel is full the oldest
// event is dropped and counted.
func (m *Memberlist) emit(ev Event) {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	if m.evClosed {
		return
	}
	for {
		select {
		case m.events <- ev:
			return
		default:
		}
		select {
		case <-m.events:
			if n := m.dropped.Add(1); bits.OnesCount64(n) == 1 { // log at 1, 2, 4, 8, ...
				m.log.Warn("membership: event buffer full, dropped oldest events", "dropped_total", n)
			}
		default:
		}
	}
}
