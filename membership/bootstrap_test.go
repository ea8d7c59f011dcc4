package membership

import (
	"reflect"
	"strings"
	"testing"
)

func coord(id, raft string) Meta {
	return Meta{Role: RoleCoordinator, ID: id, ClusterID: "c1", RaftAddr: raft}
}

func TestBootstrapDecision(t *testing.T) {
	a, b, c, d := coord("a", "10.0.0.1:7000"), coord("b", "10.0.0.2:7000"), coord("c", "10.0.0.3:7000"), coord("d", "10.0.0.4:7000")
	boot := func(m Meta) Meta { m.Bootstrapped = true; return m }
	otherCluster := func(m Meta) Meta { m.ClusterID = "c2"; return m }
	storage := Meta{Role: RoleNode, ID: "0-node", ClusterID: "c1", RaftAddr: "10.0.0.9:7000"}
	abc := []Server{{"a", a.RaftAddr}, {"b", b.RaftAddr}, {"c", c.RaftAddr}}

	tests := []struct {
		name    string
		self    string
		expect  int
		seen    []Meta
		want    bool
		servers []Server
		err     string
	}{
		{name: "lowest of exactly N bootstraps", self: "a", expect: 3, seen: []Meta{c, a, b}, want: true, servers: abc},
		{name: "others among N wait", self: "b", expect: 3, seen: []Meta{a, b, c}},
		{name: "highest among N waits", self: "c", expect: 3, seen: []Meta{a, b, c}},
		{name: "fewer than N: nobody", self: "a", expect: 3, seen: []Meta{a, b}},
		{name: "single-node cluster", self: "a", expect: 1, seen: []Meta{a}, want: true, servers: []Server{{"a", a.RaftAddr}}},
		{name: "more than N: first N by id", self: "a", expect: 3, seen: []Meta{d, c, b, a}, want: true, servers: abc},
		{name: "not among first N never bootstraps", self: "d", expect: 3, seen: []Meta{a, b, c, d}},
		{name: "any bootstrapped: nobody", self: "a", expect: 3, seen: []Meta{a, b, boot(c)}},
		{name: "self bootstrapped: nobody", self: "a", expect: 1, seen: []Meta{boot(a)}},
		{name: "bootstrapped beyond first N still blocks", self: "a", expect: 2, seen: []Meta{a, b, boot(c)}},
		{name: "other cluster does not count", self: "a", expect: 3, seen: []Meta{a, b, otherCluster(c)}},
		{name: "other cluster bootstrapped is ignored", self: "a", expect: 2, seen: []Meta{a, b, boot(otherCluster(c))}, want: true, servers: abc[:2]},
		{name: "storage nodes do not count", self: "a", expect: 2, seen: []Meta{a, storage}},
		{name: "bootstrapped storage node is ignored", self: "a", expect: 1, seen: []Meta{a, boot(storage)}, want: true, servers: abc[:1]},
		{name: "non-coordinator self never bootstraps", self: "0-node", expect: 1, seen: []Meta{storage}},
		{name: "same member seen twice is fine", self: "a", expect: 2, seen: []Meta{a, b, a}, want: true, servers: abc[:2]},
		{name: "duplicate seen twice does not reach N", self: "a", expect: 3, seen: []Meta{a, b, b}},
		{name: "duplicate id with different raft addrs", self: "a", expect: 2, seen: []Meta{a, b, coord("b", "10.0.0.99:7000")}, err: "raft addresses"},
		{name: "duplicate id error even when not yet N", self: "a", expect: 5, seen: []Meta{a, coord("a", "10.0.0.99:7000")}, err: "raft addresses"},
		{name: "duplicate id error beats bootstrapped", self: "a", expect: 2, seen: []Meta{boot(a), b, coord("b", "x:1")}, err: "raft addresses"},
		{name: "two ids sharing a raft addr", self: "a", expect: 2, seen: []Meta{a, coord("b", a.RaftAddr)}, err: "used by coordinators"},
		{name: "empty raft addr", self: "a", expect: 2, seen: []Meta{a, coord("b", "")}, err: "empty id or raft address"},
		{name: "self missing", self: "z", expect: 1, seen: []Meta{a}, err: "not among"},
		{name: "self id empty", self: "", expect: 1, seen: []Meta{a}, err: "self id is empty"},
		{name: "expect zero", self: "a", expect: 0, seen: []Meta{a}, err: "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, servers, err := BootstrapDecision(tt.self, tt.expect, tt.seen)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "membership: ") {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				if got || servers != nil {
					t.Fatalf("on error got bootstrap=%v servers=%v, want false, nil", got, servers)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want || !reflect.DeepEqual(servers, tt.servers) {
				t.Fatalf("got (%v, %v), want (%v, %v)", got, servers, tt.want, tt.servers)
			}
		})
	}
}

// TestBootstrapDecisionAgreement checks that, given the same view, exactly one
// member decides to bootstrap and the view's order does not matter.
func TestBootstrapDecisionAgreement(t *testing.T) {
	views := [][]Meta{
		{coord("n3", "h3:1"), coord("n1", "h1:1"), coord("n2", "h2:1")},
		{coord("n2", "h2:1"), coord("n3", "h3:1"), coord("n1", "h1:1")},
	}
	for _, view := range views {
		count := 0
		for _, m := range view {
			ok, servers, err := BootstrapDecision(m.ID, 3, view)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				count++
				if m.ID != "n1" || len(servers) != 3 || servers[0].ID != "n1" || servers[2].ID != "n3" {
					t.Fatalf("unexpected bootstrapper %s with %v", m.ID, servers)
				}
			}
		}
		if count != 1 {
			t.Fatalf("%d members decided to bootstrap, want 1", count)
		}
	}
}
