package membership

import (
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/hashicorp/memberlist"
)

// newTestState returns a Memberlist with only the state the delegate uses.
func newTestState(buffer int, h slog.Handler) (*Memberlist, *delegate) {
	m := &Memberlist{
		cfg:       Config{ClusterID: testCluster},
		log:       slog.New(h),
		members:   make(map[string]Member),
		rejected:  make(map[string]string),
		claimants: make(map[string]string),
		reclaim:   make(chan string, 16),
		events:    make(chan Event, buffer),
	}
	m.cfg.Meta.ID = "self"
	return m, &delegate{m: m}
}

func node(t *testing.T, name string, meta Meta, leaving bool) *memberlist.Node {
	t.Helper()
	b, err := encodeMeta(meta, leaving)
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: b}
}

// TestConflictThenDeathReclaims: a claim on a member's name from another
// address, refused while the old entry lived, is handed to the join loop
// once the old entry dies; a claim that was admitted meanwhile, one at the
// dead address itself, and one on our own name are not.
func TestConflictThenDeathReclaims(t *testing.T) {
	m, d := newTestState(16, &recordingHandler{})
	meta := func(id string) Meta {
		return Meta{Role: RoleCoordinator, ID: id, ClusterID: testCluster, RaftAddr: id + ":7000"}
	}
	at := func(n *memberlist.Node, port uint16) *memberlist.Node { c := *n; c.Port = port; return &c }
	reclaimed := func() []string {
		var out []string
		for {
			select {
			case a := <-m.reclaim:
				out = append(out, a)
			default:
				return out
			}
		}
	}

	a := node(t, "a", meta("a"), false) // 127.0.0.1:7946
	d.NotifyJoin(a)
	d.NotifyConflict(a, at(a, 8000))
	d.NotifyConflict(a, at(a, 8001)) // the latest claim counts
	if got := reclaimed(); len(got) != 0 {
		t.Fatalf("reclaim before the old entry died: %v", got)
	}
	d.NotifyLeave(a)
	if got := reclaimed(); len(got) != 1 || got[0] != "127.0.0.1:8001" {
		t.Fatalf("reclaim after death = %v, want [127.0.0.1:8001]", got)
	}
	d.NotifyLeave(a) // the claim was used up
	if got := reclaimed(); len(got) != 0 {
		t.Fatalf("second death reclaimed %v", got)
	}

	b := node(t, "b", meta("b"), false)
	d.NotifyJoin(b)
	d.NotifyConflict(b, at(b, 9000))
	d.NotifyJoin(at(b, 9000)) // admitted at the new address meanwhile
	d.NotifyLeave(at(b, 9000))
	d.NotifyConflict(b, b) // a claim at the very address that died
	d.NotifyLeave(b)
	self := node(t, "self", meta("self"), false)
	d.NotifyConflict(self, at(self, 9100))
	d.NotifyLeave(self)
	if got := reclaimed(); len(got) != 0 {
		t.Fatalf("reclaimed %v, want nothing", got)
	}

	for i := range maxRejected + 10 { // bounded however many names are claimed
		n := node(t, fmt.Sprintf("n%d", i), meta(fmt.Sprintf("n%d", i)), false)
		d.NotifyConflict(n, at(n, 1000))
	}
	if got := len(m.claimants); got > maxRejected {
		t.Fatalf("%d claimants kept, bound %d", got, maxRejected)
	}
}

func TestEventsDropOldest(t *testing.T) {
	m, _ := newTestState(2, &recordingHandler{})
	for i := range 5 {
		m.emit(Event{Type: EventUpdate, Member: Member{Name: string(rune('a' + i))}})
	}
	if got := m.DroppedEvents(); got != 3 {
		t.Fatalf("DroppedEvents = %d, want 3", got)
	}
	if a, b := <-m.events, <-m.events; a.Member.Name != "d" || b.Member.Name != "e" {
		t.Fatalf("kept %q, %q; want the newest d, e", a.Member.Name, b.Member.Name)
	}
}

func TestDelegateExcludesInvalidMembersAndLogsOnce(t *testing.T) {
	h := &recordingHandler{}
	m, d := newTestState(16, h)
	good := Meta{Role: RoleNode, ID: "n1", ClusterID: testCluster}
	foreign := good
	foreign.ClusterID = "other"

	d.NotifyJoin(node(t, "n1", foreign, false))
	d.NotifyUpdate(node(t, "n1", foreign, false))
	d.NotifyJoin(&memberlist.Node{Name: "n2", Addr: net.IPv4(127, 0, 0, 1), Meta: []byte("garbage")})
	d.NotifyJoin(&memberlist.Node{Name: "n2", Addr: net.IPv4(127, 0, 0, 1), Meta: []byte("garbage")})
	d.NotifyJoin(node(t, "impostor", good, false)) // meta ID differs from node name
	if got := len(m.Members()); got != 0 {
		t.Fatalf("%d members admitted, want 0", got)
	}
	if got := len(h.snapshot()); got != 3 {
		t.Fatalf("%d log records, want one per excluded member (3)", got)
	}
	if len(m.events) != 0 {
		t.Fatalf("events emitted for excluded members")
	}
	d.NotifyLeave(node(t, "n1", foreign, false)) // never admitted: no event
	if len(m.events) != 0 {
		t.Fatalf("leave event for a member that was never admitted")
	}

	// A valid member is admitted; Update of an unknown member is a join.
	d.NotifyUpdate(node(t, "n1", good, false))
	if ev := <-m.events; ev.Type != EventJoin || ev.Member.Meta != good || ev.Member.State != StateAlive || ev.Member.Addr != "127.0.0.1:7946" {
		t.Fatalf("got %+v, want join of n1", ev)
	}
	// Turning invalid removes it with a leave event.
	d.NotifyUpdate(node(t, "n1", foreign, false))
	if ev := <-m.events; ev.Type != EventLeave || ev.Member.State != StateDead || ev.Member.Meta != good {
		t.Fatalf("got %+v, want leave of n1 with its last good meta", ev)
	}
	if len(m.Members()) != 0 {
		t.Fatal("invalid member still listed")
	}
}

func TestDelegateLeavingThenLeft(t *testing.T) {
	m, d := newTestState(16, &recordingHandler{})
	meta := Meta{Role: RoleNode, ID: "n1", ClusterID: testCluster}
	d.NotifyJoin(node(t, "n1", meta, false))
	d.NotifyUpdate(node(t, "n1", meta, true))
	if mem := m.Members(); len(mem) != 1 || mem[0].State != StateLeaving {
		t.Fatalf("members = %+v, want n1 leaving", mem)
	}
	d.NotifyLeave(node(t, "n1", meta, true))
	<-m.events
	<-m.events
	if ev := <-m.events; ev.Type != EventLeave || ev.Member.State != StateLeft {
		t.Fatalf("got %+v, want leave with StateLeft", ev)
	}
	d.NotifyJoin(node(t, "n1", meta, false))
	d.NotifyLeave(node(t, "n1", meta, false))
	<-m.events
	if ev := <-m.events; ev.Type != EventLeave || ev.Member.State != StateDead {
		t.Fatalf("got %+v, want leave with StateDead", ev)
	}
}
