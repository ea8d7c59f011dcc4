package coordserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestEveryRPCHasARoute: every method of every Logbook service a
// coordinator serves names its route and its access class in its proto
// (TestAccessClassesByService checks which classes), forwarded methods are
// unary with the reply type the proto gives, leader-only ones are streams,
// and the table holds no method that is not served.
func TestEveryRPCHasARoute(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1)
	served := map[string]bool{}
	for svc, info := range tc.server(0).grpcSrv.GetServiceInfo() {
		if strings.HasPrefix(svc, "grpc.") { // health and reflection
			continue
		}
		for _, m := range info.Methods {
			name := "/" + svc + "/" + m.Name
			served[name] = true
			r, ok := routes[name]
			switch {
			case !ok:
				t.Errorf("%s is served, but its proto file is not in servedFiles", name)
			case r.route == pb.Route_ROUTE_UNSPECIFIED:
				t.Errorf("%s has no (logbook.v1.route) option in its proto", name)
			case r.access == pb.Access_ACCESS_UNSPECIFIED:
				t.Errorf("%s has no (logbook.v1.access) option in its proto", name)
			case r.route == pb.Route_ROUTE_FORWARD && (m.IsClientStream || m.IsServerStream):
				t.Errorf("%s is a stream: only a unary call can be forwarded (ROUTE_FORWARD)", name)
			case r.route == pb.Route_ROUTE_LEADER && !m.IsClientStream && !m.IsServerStream:
				t.Errorf("%s is unary: ROUTE_LEADER is for streams (use ROUTE_FORWARD)", name)
			case r.route == pb.Route_ROUTE_FORWARD:
				d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + m.Name))
				if err != nil {
					t.Fatal(err)
				}
				if want := d.(protoreflect.MethodDescriptor).Output().FullName(); r.reply.Descriptor().FullName() != want {
					t.Errorf("%s forwards into a %s, its reply is a %s", name, r.reply.Descriptor().FullName(), want)
				}
			}
		}
	}
	for name := range routes {
		if !served[name] {
			t.Errorf("%s has a route but is not served", name)
		}
	}
	if len(served) < 50 {
		t.Fatalf("only %d methods served: the service list is not what it seems", len(served))
	}
}

// TestAccessClassesByService: the cluster-internal services are closed to
// users (every Peer RPC is ACCESS_MEMBER, every NodeLink RPC ACCESS_NODE),
// and the client services use only the user classes (public, read, write,
// admin, or any authenticated caller), never a component's or the
// storage nodes' block classes; the Acl service is admin's, but for
// who-am-I and the one-time bootstrap.
func TestAccessClassesByService(t *testing.T) {
	t.Parallel()
	user := map[pb.Access]bool{pb.Access_ACCESS_PUBLIC: true, pb.Access_ACCESS_READ: true, pb.Access_ACCESS_WRITE: true, pb.Access_ACCESS_ADMIN: true, pb.Access_ACCESS_AUTHENTICATED: true}
	perService := map[string]int{}
	for name, r := range routes {
		svc := strings.Split(strings.TrimPrefix(name, "/"), "/")[0]
		perService[svc]++
		switch svc {
		case "logbook.v1.Peer":
			if r.access != pb.Access_ACCESS_MEMBER {
				t.Errorf("%s is %s: every Peer RPC is ACCESS_MEMBER", name, r.access)
			}
		case "logbook.v1.NodeLink":
			if r.access != pb.Access_ACCESS_NODE {
				t.Errorf("%s is %s: every NodeLink RPC is ACCESS_NODE", name, r.access)
			}
		case "logbook.v1.Cluster", "logbook.v1.Journal", "logbook.v1.Namespace":
			if !user[r.access] {
				t.Errorf("%s is %s: a client service's RPC is public, read, write, admin or authenticated", name, r.access)
			}
		case "logbook.v1.Acl":
			if open := name == "/logbook.v1.Acl/WhoAmI" || name == "/logbook.v1.Acl/Bootstrap"; open != (r.access == pb.Access_ACCESS_AUTHENTICATED) || !open && r.access != pb.Access_ACCESS_ADMIN {
				t.Errorf("%s is %s: the Acl service is admin's, but for WhoAmI and Bootstrap (authenticated)", name, r.access)
			}
		default:
			t.Errorf("%s: service %s has no access rule in this test", name, svc)
		}
	}
	for _, svc := range []string{"logbook.v1.Peer", "logbook.v1.NodeLink", "logbook.v1.Cluster", "logbook.v1.Journal", "logbook.v1.Namespace", "logbook.v1.Acl"} {
		if perService[svc] == 0 {
			t.Errorf("no RPC of %s in the table", svc)
		}
	}
	// A few classes spelled out, so that a slip in a proto shows here.
	for name, want := range map[string]pb.Access{
		"/logbook.v1.Journal/Append":              pb.Access_ACCESS_WRITE,
		"/logbook.v1.Journal/Tail":                pb.Access_ACCESS_READ,
		"/logbook.v1.Journal/Trim":                pb.Access_ACCESS_ADMIN,
		"/logbook.v1.Journal/SetConfig":           pb.Access_ACCESS_ADMIN,
		"/logbook.v1.Cluster/Status":              pb.Access_ACCESS_AUTHENTICATED,
		"/logbook.v1.Cluster/AddVoter":            pb.Access_ACCESS_ADMIN,
		"/logbook.v1.Namespace/Stat":              pb.Access_ACCESS_READ,
		"/logbook.v1.Namespace/Create":            pb.Access_ACCESS_WRITE,
		"/logbook.v1.Namespace/AddCacheDirective": pb.Access_ACCESS_ADMIN,
	} {
		if got := routes[name].access; got != want {
			t.Errorf("%s is %s, want %s", name, got, want)
		}
	}
}

// TestRoutesInAction: a ROUTE_FORWARD call answered through a follower is
// the leader's answer, and a ROUTE_LEADER stream opened on a follower is
// refused with NOT_LEADER and the leader's address.
func TestRoutesInAction(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := tc.waitLeader()
	f := tc.server(tc.followers(leader)[0])
	conn, err := grpc.NewClient(f.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc := pb.NewJournalClient(conn)
	if _, err := jc.RegisterConsumer(ctx, &pb.RegisterConsumerRequest{Name: "through-a-follower"}); err != nil {
		t.Fatalf("a forwarded RegisterConsumer: %v", err)
	}
	var held int
	tc.server(leader).fsm.View(func(st *fsm.State) { held = len(st.Consumers()) })
	if held != 1 {
		t.Fatalf("the leader holds %d consumers after a register forwarded to it and answered", held)
	}
	stream, err := jc.AppendStream(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || infoReason(st) != ReasonNotLeader || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an append stream on a follower: %v, want UNAVAILABLE NOT_LEADER", err)
	}
	named := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			named = info.Metadata[MetaLeaderAddr]
		}
	}
	if named != tc.server(leader).GRPCAddr() {
		t.Fatalf("the refusal names leader address %q, want %s", named, tc.server(leader).GRPCAddr())
	}
}
