package blocks

import (
	"testing"

	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// TestNodeReplicaCounts: a node's replicas by state follow its full and
// incremental reports (a changed state moves a replica, a deletion drops
// it) and sum to its replica count; the report times are set.
func TestNodeReplicaCounts(t *testing.T) {
	e := newTestEnv(t, DefaultConfig())
	e.register("n1", 1<<30)
	a, b := e.openWithBlock("/a", 1), e.openWithBlock("/b", 1)
	e.fullReport("n1", Replica{BlockID: a.Id, GS: a.Gs, State: lr.ReplicaRBW}, Replica{BlockID: b.Id, GS: b.Gs, State: lr.ReplicaRBW},
		Replica{BlockID: a.Id, GS: a.Gs, State: lr.ReplicaFinalized}) // a listed twice: the last one counts
	check := func(what string, want ReplicaCounts, incremental bool) {
		t.Helper()
		ns := nodeStatus(t, e, "n1")
		var sum uint64
		for _, c := range ns.ReplicasByState {
			sum += c
		}
		if ns.ReplicasByState != want || sum != ns.Replicas {
			t.Fatalf("%s: by state %v (sum %d), want %v; replicas %d", what, ns.ReplicasByState, sum, want, ns.Replicas)
		}
		if ns.LastFullReport.IsZero() || ns.LastIncrementalReport.IsZero() != !incremental {
			t.Fatalf("%s: full report at %v, incremental at %v", what, ns.LastFullReport, ns.LastIncrementalReport)
		}
	}
	check("full report", ReplicaCounts{lr.ReplicaFinalized: 1, lr.ReplicaRBW: 1}, false)
	e.report("n1", b, 10, lr.ReplicaFinalized)
	check("b finalized", ReplicaCounts{lr.ReplicaFinalized: 2}, true)
	if err := e.m.IncrementalReport("n1", []Change{{Deleted: true, StorageID: "s1", Replica: Replica{BlockID: a.Id}}}); err != nil {
		t.Fatal(err)
	}
	check("a deleted", ReplicaCounts{lr.ReplicaFinalized: 1}, true)
	c := e.openWithBlock("/c", 1)
	e.report("n1", c, 0, lr.ReplicaTemporary)
	check("c temporary", ReplicaCounts{lr.ReplicaFinalized: 1, lr.ReplicaTemporary: 1}, true)
	if _, err := e.m.Register(&fsmpb.NodeRecord{Id: "n1", GrpcAddr: "127.0.0.1:9001", StorageIds: []string{"s1"}, InstanceId: "inst-n1"}, nil); err != nil {
		t.Fatal(err)
	}
	if ns := nodeStatus(t, e, "n1"); ns.ReplicasByState != (ReplicaCounts{}) || !ns.LastFullReport.IsZero() {
		t.Fatalf("re-registered: by state %v, full report at %v", ns.ReplicasByState, ns.LastFullReport)
	}
}

func nodeStatus(t *testing.T, e *testEnv, id string) NodeStatus {
	t.Helper()
	for _, ns := range e.m.Nodes().Nodes {
		if ns.Record.Id == id {
			return ns
		}
	}
	t.Fatalf("node %s not listed", id)
	return NodeStatus{}
}
