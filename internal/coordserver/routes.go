package coordserver

import (
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// methodRoute is how the RPC layer routes one method: its proto's
// (logbook.v1.route) option (api/logbookv1/options.proto), for a
// forwarded method the type of its reply, and its (logbook.v1.access)
// option: who may call it (security.go enforces it).
type methodRoute struct {
	route  pb.Route
	reply  protoreflect.MessageType
	access pb.Access
}

// servedFiles are the proto files of every Logbook service a coordinator
// registers on its gRPC server.
var servedFiles = []protoreflect.FileDescriptor{
	pb.File_logbookv1_cluster_proto,
	pb.File_logbookv1_journal_proto,
	pb.File_logbookv1_namespace_proto,
	pb.File_logbookv1_acl_proto,
	clusterpb.File_internal_clusterpb_peer_proto,
	clusterpb.File_internal_clusterpb_nodelink_proto,
}

// routes holds every method of servedFiles by full method name
// ("/logbook.v1.Journal/Trim"). A method absent from it (gRPC's health and
// reflection services) is answered by the member it reaches.
var routes = routesOf(servedFiles...)

func routesOf(files ...protoreflect.FileDescriptor) map[string]methodRoute {
	out := map[string]methodRoute{}
	for _, fd := range files {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				r := methodRoute{
					route:  proto.GetExtension(md.Options(), pb.E_Route).(pb.Route),
					access: proto.GetExtension(md.Options(), pb.E_Access).(pb.Access),
				}
				if r.route == pb.Route_ROUTE_FORWARD {
					mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
					if err != nil {
						panic(fmt.Sprintf("coordserver: reply type of %s: %v", md.FullName(), err))
					}
					r.reply = mt
				}
				out[fmt.Sprintf("/%s/%s", sd.FullName(), md.Name())] = r
			}
		}
	}
	return out
}
