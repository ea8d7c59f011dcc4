package nodeserver

import (
	"fmt"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// servedFiles are the proto files of every Logbook service a storage node
// registers on its gRPC server.
var servedFiles = []protoreflect.FileDescriptor{
	pb.File_logbookv1_node_proto,
}

// accessClasses holds the (logbook.v1.access) option
// (api/logbookv1/options.proto) of every method of servedFiles, by full
// method name ("/logbook.v1.DataNode/ReadBlock"): who may call it
// (security.go enforces it). A method absent from it (gRPC's health and
// reflection services) is not a Logbook RPC.
var accessClasses = accessOf(servedFiles...)

func accessOf(files ...protoreflect.FileDescriptor) map[string]pb.Access {
	out := map[string]pb.Access{}
	for _, fd := range files {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				out[fmt.Sprintf("/%s/%s", sd.FullName(), md.Name())] = proto.GetExtension(md.Options(), pb.E_Access).(pb.Access)
			}
		}
	}
	return out
}
