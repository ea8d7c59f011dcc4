package coordserver

import (
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fill sets every field of m, recursively, to a value that depends on its
// number and depth, so that a conversion that drops or swaps a field is
// seen.
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && i > 0 && fields.Get(i-1).ContainingOneof() == fd.ContainingOneof() {
			continue // one member of each oneof
		}
		val := func() protoreflect.Value {
			n := int(fd.Number()) + 10*depth
			switch fd.Kind() {
			case protoreflect.BoolKind:
				return protoreflect.ValueOfBool(true)
			case protoreflect.EnumKind:
				vals := fd.Enum().Values()
				return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
			case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
				return protoreflect.ValueOfInt32(int32(n))
			case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
				return protoreflect.ValueOfInt64(int64(n) << 33)
			case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
				return protoreflect.ValueOfUint32(uint32(n))
			case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
				return protoreflect.ValueOfUint64(uint64(n) << 34)
			case protoreflect.StringKind:
				return protoreflect.ValueOfString(string(fd.Name()))
			case protoreflect.BytesKind:
				return protoreflect.ValueOfBytes([]byte(fd.Name()))
			case protoreflect.MessageKind:
				sub := m.NewField(fd)
				if fd.IsList() {
					sub = m.Get(fd).List().NewElement()
				}
				fill(sub.Message(), depth+1)
				return sub
			}
			panic("fill: unexpected kind " + fd.Kind().String())
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			l.Append(val())
			l.Append(val())
			continue
		}
		m.Set(fd, val())
	}
}

// TestAPIConversionsCarryEveryField: each conversion between a replicated
// record and the API's copy keeps every field (the two are wire-identical
// today, so the API message read back as the record equals the original).
// A field added to one side and not converted fails here.
func TestAPIConversionsCarryEveryField(t *testing.T) {
	t.Parallel()
	check := func(name string, from proto.Message, convert func(proto.Message) proto.Message) {
		t.Helper()
		fill(from.ProtoReflect(), 0)
		to := convert(from)
		if got, want := to.ProtoReflect().Descriptor().Fields().Len(), from.ProtoReflect().Descriptor().Fields().Len(); got != want {
			t.Errorf("%s: the API's copy has %d fields, the record %d", name, got, want)
		}
		b, err := proto.Marshal(to)
		if err != nil {
			t.Fatal(err)
		}
		back := from.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, from) {
			t.Errorf("%s: converted and read back as the record:\n%v\nwant\n%v", name, back, from)
		}
	}
	check("StoredEvent", &fsmpb.StoredEvent{}, func(m proto.Message) proto.Message { return apiEvent(m.(*fsmpb.StoredEvent)) })
	check("StoredEvent page", &fsmpb.StoredEvent{}, func(m proto.Message) proto.Message {
		return apiEvents([]*fsmpb.StoredEvent{m.(*fsmpb.StoredEvent)})[0]
	})
	check("JournalConfig", &fsmpb.JournalConfig{}, func(m proto.Message) proto.Message { return apiJournalConfig(m.(*fsmpb.JournalConfig)) })
	check("BlockRecord", &fsmpb.BlockRecord{}, func(m proto.Message) proto.Message { return apiBlockRecord(m.(*fsmpb.BlockRecord)) })
	check("FileStatus", &fsmpb.FileStatus{}, func(m proto.Message) proto.Message { return apiFileStatus(m.(*fsmpb.FileStatus)) })
	check("NodeRecord", &fsmpb.NodeRecord{}, func(m proto.Message) proto.Message { return apiNodeRecord(m.(*fsmpb.NodeRecord)) })
	check("CacheDirective", &fsmpb.CacheDirective{}, func(m proto.Message) proto.Message { return apiCacheDirective(m.(*fsmpb.CacheDirective)) })
	check("NamespaceResult", &fsmpb.NamespaceResult{}, func(m proto.Message) proto.Message { return apiNamespaceResult(m.(*fsmpb.NamespaceResult)) })
	check("BlockRef from the API", &pb.BlockRef{}, func(m proto.Message) proto.Message { return formatBlockRef(m.(*pb.BlockRef)) })
	check("StoredEvent from the API", &pb.StoredEvent{}, func(m proto.Message) proto.Message {
		return formatEvents([]*pb.StoredEvent{m.(*pb.StoredEvent)})[0]
	})
	for _, s := range []fsmpb.BlockState{fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION, fsmpb.BlockState_BLOCK_STATE_UNDER_RECOVERY, fsmpb.BlockState_BLOCK_STATE_COMMITTED, fsmpb.BlockState_BLOCK_STATE_COMPLETE} {
		if got := apiBlockState(s); got.String() != s.String() {
			t.Errorf("block state %v converts to %v", s, got)
		}
	}
	if apiNamespaceResult(nil) != nil || apiBlockRecord(nil) != nil || apiFileStatus(nil) != nil || formatBlockRef(nil) != nil {
		t.Error("a nil record converts to a non-nil message")
	}
}
