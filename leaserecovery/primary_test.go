package leaserecovery

import (
	"slices"
	"testing"
	"time"
)

func loc(n NodeID, alive bool, agoSecs int64) Location {
	return Location{Node: n, Alive: alive, LastHeartbeat: t0.Add(-secs(agoSecs))}
}

func TestChoosePrimary(t *testing.T) {
	tests := []struct {
		name       string
		rule       string
		expected   []Location
		chosen     []NodeID
		want       NodeID
		wantChosen []NodeID
		ok         bool
	}{
		{"no locations", "§3.3 no expected replicas", nil, nil, "", nil, false},
		{"all dead", "§3.3 no alive candidate, §7.17", []Location{loc("a", false, 1), loc("b", false, 1)}, []NodeID{"a"}, "", []NodeID{"a"}, false},
		{"most recent heartbeat", "§3.3", []Location{loc("a", true, 3), loc("b", true, 1), loc("c", true, 2)}, nil, "b", []NodeID{"b"}, true},
		{"dead node skipped", "§3.3 alive only", []Location{loc("a", false, 0), loc("b", true, 5)}, nil, "b", []NodeID{"b"}, true},
		{"tie broken by node id", "determinism", []Location{loc("c", true, 1), loc("a", true, 1), loc("b", true, 1)}, nil, "a", []NodeID{"a"}, true},
		{"previous primary skipped", "§3.3 prefer not chosenAsPrimary, §7.10",
			[]Location{loc("a", true, 0), loc("b", true, 5)}, []NodeID{"a"}, "b", []NodeID{"a", "b"}, true},
		{"every alive chosen: start over", "§3.3 clear the flags, §7.17 attempt 4",
			[]Location{loc("a", true, 2), loc("b", true, 1)}, []NodeID{"a", "b"}, "b", []NodeID{"b"}, true},
		{"only unchosen node is dead: start over", "§3.3",
			[]Location{loc("a", true, 2), loc("b", true, 1), loc("c", false, 0)}, []NodeID{"a", "b"}, "b", []NodeID{"b"}, true},
		{"chosen node no longer expected", "§3.3",
			[]Location{loc("a", true, 2), loc("b", true, 1)}, []NodeID{"z"}, "b", []NodeID{"z", "b"}, true},
		{"repeated location counted once", "input hygiene",
			[]Location{loc("a", true, 9), loc("a", true, 0), loc("b", true, 5)}, nil, "b", []NodeID{"b"}, true},
		{"empty node id skipped", "input hygiene", []Location{loc("", true, 0), loc("b", true, 5)}, nil, "b", []NodeID{"b"}, true},
		{"fewest recoveries first", "load spreading (a burst of recoveries)",
			[]Location{{Node: "a", Alive: true, Fresh: true, Load: 5}, {Node: "b", Alive: true, Fresh: true, Load: 2}, {Node: "c", Alive: true, Fresh: true, Load: 7}}, nil, "b", []NodeID{"b"}, true},
		{"fresh before a less loaded stale node", "§3.4 stale nodes last",
			[]Location{{Node: "a", Alive: true, Fresh: false, Load: 0}, {Node: "b", Alive: true, Fresh: true, Load: 9}}, nil, "b", []NodeID{"b"}, true},
		{"equal load: most recent heartbeat", "§3.3",
			[]Location{{Node: "a", Alive: true, Fresh: true, Load: 1, LastHeartbeat: time.Unix(10, 0)}, {Node: "b", Alive: true, Fresh: true, Load: 1, LastHeartbeat: time.Unix(20, 0)}}, nil, "b", []NodeID{"b"}, true},
		{"load never beats chosen-as-primary", "§3.3 prefer not chosenAsPrimary",
			[]Location{{Node: "a", Alive: true, Fresh: true, Load: 0}, {Node: "b", Alive: true, Fresh: true, Load: 9}}, []NodeID{"a"}, "b", []NodeID{"a", "b"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.chosen)
			got, ok := ChoosePrimary(tt.expected, tt.chosen)
			if ok != tt.ok || got.Node != tt.want || !slices.Equal(got.Chosen, tt.wantChosen) {
				t.Fatalf("%s: got %+v ok=%v, want %q %v ok=%v", tt.rule, got, ok, tt.want, tt.wantChosen, tt.ok)
			}
			if !slices.Equal(tt.chosen, in) {
				t.Fatal("input chosen set modified")
			}
		})
	}
}

// §R7.17: attempts 1..3 on a 3-replica block with all nodes alive choose
// three different primaries, most recent heartbeat first; attempt 4 starts
// over. §R7.10: a primary that died is not chosen again.
func TestChoosePrimaryRotation(t *testing.T) {
	expected := []Location{loc("a", true, 1), loc("b", true, 3), loc("c", true, 2)}
	var chosen []NodeID
	var got []NodeID
	for range 4 {
		p, ok := ChoosePrimary(expected, chosen)
		if !ok {
			t.Fatal("no primary")
		}
		got, chosen = append(got, p.Node), p.Chosen
	}
	if want := []NodeID{"a", "c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("primaries %v, want %v", got, want)
	}

	expected[0].Alive = false // a died after being chosen
	p, _ := ChoosePrimary(expected, []NodeID{"a"})
	if p.Node != "c" {
		t.Fatalf("after the primary died: %q, want c", p.Node)
	}
}

func TestRecoveryLocations(t *testing.T) {
	stale := int64(30)
	tests := []struct {
		name     string
		rule     string
		expected []Location
		want     []NodeID
	}{
		{"none", "§3.4", nil, nil},
		{"all fresh", "§3.4", []Location{loc("a", true, 1), loc("b", true, 2), loc("c", true, 3)}, []NodeID{"a", "b", "c"}},
		{"one stale", "§3.4, §7.16: 2 locations", []Location{loc("a", true, 1), loc("b", true, 31), loc("c", true, 3)}, []NodeID{"a", "c"}},
		{"two stale", "§3.4, §7.16: ≤ 1 left, all listed", []Location{loc("a", true, 1), loc("b", true, 31), loc("c", true, 40)}, []NodeID{"a", "b", "c"}},
		{"all stale", "§3.4", []Location{loc("a", true, 31), loc("b", true, 40)}, []NodeID{"a", "b"}},
		{"heartbeat exactly stale interval ago", "§3.4: stale at the interval", []Location{loc("a", true, stale), loc("b", true, 1), loc("c", true, 2)}, []NodeID{"b", "c"}},
		{"dead never listed", "§3.4 HDFS-17430", []Location{loc("a", false, 1), loc("b", true, 1), loc("c", true, 2)}, []NodeID{"b", "c"}},
		{"dead and stale", "§3.4 HDFS-17430, §7.16", []Location{loc("a", false, 1), loc("b", true, 31), loc("c", true, 2)}, []NodeID{"b", "c"}},
		{"only dead", "§3.4 HDFS-17430", []Location{loc("a", false, 1)}, nil},
		{"repeated node once", "input hygiene", []Location{loc("a", true, 1), loc("a", true, 1), loc("b", true, 1)}, []NodeID{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RecoveryLocations(tt.expected, t0, time.Duration(stale)*time.Second)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("%s: %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}
