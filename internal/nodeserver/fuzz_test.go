package nodeserver

import (
	"bufio"
	"bytes"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// FuzzPacketValidation feeds random WriteBlock streams (length-delimited
// WritePacket messages) to the server-side validation: it must never panic,
// and whatever it accepts must be within the protocol's bounds.
func FuzzPacketValidation(f *testing.F) {
	var seed bytes.Buffer
	data := randomBytes(1500, 9)
	for _, m := range []*pb.WritePacket{
		setupMsg(createSetup(1, 2, "127.0.0.1:7401", "[::1]:7402")),
		packetMsg(0, 0, data[:1024]),
		packetMsg(1, 1024, data[1024:]),
		{Msg: &pb.WritePacket_Packet{Packet: &pb.Packet{Seqno: 2, Offset: 1024, LastPacketInBlock: true}}},
	} {
		protodelim.MarshalTo(&seed, m)
	}
	f.Add(seed.Bytes())
	one, _ := proto.Marshal(setupMsg(&pb.WriteSetup{Pool: "../x", BlockId: 1, Gs: 1, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY, NewGs: 2}))
	f.Add(append([]byte{byte(len(one))}, one...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		opts := protodelim.UnmarshalOptions{MaxSize: maxRecvMsgBytes}
		var chk packetChecker
		for i := 0; ; i++ {
			var m pb.WritePacket
			if err := opts.UnmarshalFrom(r, &m); err != nil {
				return
			}
			if i == 0 {
				s := m.GetSetup()
				if err := validateSetup(s, blockio.MaxTargets); err != nil {
					return
				}
				if len(s.GetTargets()) > blockio.MaxTargets || s.GetPool() == "" || s.GetBlockId() == 0 {
					t.Fatalf("accepted setup %v", s)
				}
				continue
			}
			p := m.GetPacket()
			if err := chk.check(p); err != nil {
				return
			}
			if len(p.GetData()) > blockio.MaxPacketData || p.GetOffset()%blockio.ChunkSize != 0 ||
				len(p.GetChecksums()) != (len(p.GetData())+blockio.ChunkSize-1)/blockio.ChunkSize {
				t.Fatalf("accepted packet %v", p)
			}
			if err := verifyPacket(p); err != nil {
				return
			}
		}
	})
}
