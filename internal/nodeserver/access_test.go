package nodeserver

import (
	"strings"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// TestEveryRPCHasAnAccessClass: every method of every Logbook service a
// storage node serves names its access class in its proto, the table holds
// no method that is not served, and the classes are the storage node's:
// never a coordinator's (member, node) or public.
func TestEveryRPCHasAnAccessClass(t *testing.T) {
	t.Parallel()
	n := startNode(t, "n1")
	allowed := map[pb.Access]bool{
		pb.Access_ACCESS_BLOCK: true, pb.Access_ACCESS_RECOVERY: true,
		pb.Access_ACCESS_READ: true, pb.Access_ACCESS_ADMIN: true,
		// Coordinators only: the gossip keyring's fan-out.
		pb.Access_ACCESS_MEMBER: true,
	}
	served := map[string]bool{}
	for svc, info := range n.srv.grpcSrv.GetServiceInfo() {
		if strings.HasPrefix(svc, "grpc.") { // health and reflection
			continue
		}
		for _, m := range info.Methods {
			name := "/" + svc + "/" + m.Name
			served[name] = true
			a, ok := accessClasses[name]
			switch {
			case !ok:
				t.Errorf("%s is served, but its proto file is not in servedFiles", name)
			case a == pb.Access_ACCESS_UNSPECIFIED:
				t.Errorf("%s has no (logbook.v1.access) option in its proto", name)
			case !allowed[a]:
				t.Errorf("%s is %s: a storage node's RPC is block, recovery, read, admin or member", name, a)
			}
		}
	}
	for name := range accessClasses {
		if !served[name] {
			t.Errorf("%s has an access class but is not served", name)
		}
	}
	if len(served) < 10 {
		t.Fatalf("only %d methods served: the service list is not what it seems", len(served))
	}
	// The classes that guard data and recovery, spelled out, so that a
	// slip in node.proto shows here.
	for name, want := range map[string]pb.Access{
		"/logbook.v1.DataNode/WriteBlock":                 pb.Access_ACCESS_BLOCK,
		"/logbook.v1.DataNode/ReadBlock":                  pb.Access_ACCESS_BLOCK,
		"/logbook.v1.DataNode/TransferBlock":              pb.Access_ACCESS_BLOCK,
		"/logbook.v1.DataNode/GetReplicaVisibleLength":    pb.Access_ACCESS_BLOCK,
		"/logbook.v1.DataNode/InitReplicaRecovery":        pb.Access_ACCESS_RECOVERY,
		"/logbook.v1.DataNode/UpdateReplicaUnderRecovery": pb.Access_ACCESS_RECOVERY,
		"/logbook.v1.DataNode/ShutdownNode":               pb.Access_ACCESS_ADMIN,
	} {
		if got := accessClasses[name]; got != want {
			t.Errorf("%s is %s, want %s", name, got, want)
		}
	}
}
