// Package blockio is the client side of the storage node's write pipeline
// (DataNode.WriteBlock): open a pipeline to the first node with the rest as
// targets, send packets with one CRC32C per 512-byte chunk, collect the
// acks, and learn which node failed. The SDK and the node itself (transfer)
// use it; it imports neither the server nor the replica package.
//
// Packets start at chunk boundaries. A packet that ends inside a chunk
// (an hflush, or the end of a transfer) is followed by one that starts at
// that chunk's boundary again and resends its bytes; the nodes check that
// the resent bytes match (SplitPackets does this for a buffered block).
package blockio

import (
	"fmt"
	"hash/crc32"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc/codes"
)

const (
	// ChunkSize is the bytes covered by one checksum.
	ChunkSize = 512
	// MaxPacketData is the most data one packet may carry.
	MaxPacketData = 64 << 10
	// MaxTargets is the most downstream nodes a setup may name.
	MaxTargets = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksums returns one CRC32C per ChunkSize chunk of data (the last may be
// short).
func Checksums(data []byte) []uint32 {
	sums := make([]uint32, 0, (len(data)+ChunkSize-1)/ChunkSize)
	for i := 0; i < len(data); i += ChunkSize {
		sums = append(sums, crc32.Checksum(data[i:min(i+ChunkSize, len(data))], castagnoli))
	}
	return sums
}

// Verify checks data (starting at a chunk boundary) against sums and
// returns the index of the first bad chunk, or -1.
func Verify(data []byte, sums []uint32) int {
	k := 0
	for i := 0; i < len(data); i, k = i+ChunkSize, k+1 {
		if k >= len(sums) || crc32.Checksum(data[i:min(i+ChunkSize, len(data))], castagnoli) != sums[k] {
			return k
		}
	}
	if k != len(sums) {
		return k
	}
	return -1
}

// Packet is one packet to send. Offset is a multiple of ChunkSize.
type Packet struct {
	Offset int64
	Data   []byte
	// Last ends the block: the nodes finalize the replica before acking.
	Last bool
	// Sync (hflush): acked once every node made the data visible.
	Sync bool
	// Fsync (hsync): every node fsyncs before acking.
	Fsync bool
}

// End is the block offset just past the packet's data.
func (p Packet) End() int64 { return p.Offset + int64(len(p.Data)) }

// SplitPackets cuts block[from':] into packets of at most size bytes
// (rounded down to whole chunks, at most MaxPacketData), where from' is
// from rounded down to a chunk boundary; block holds the block's bytes
// from offset 0. It is the resend after a pipeline recovery (from = bytes
// acked) and a plain write (from = 0). No packet is flagged.
func SplitPackets(block []byte, from int64, size int) []Packet {
	size = max(ChunkSize, min(size, MaxPacketData)/ChunkSize*ChunkSize)
	var out []Packet
	for off := from / ChunkSize * ChunkSize; off < int64(len(block)); off += int64(size) {
		end := min(off+int64(size), int64(len(block)))
		out = append(out, Packet{Offset: off, Data: block[off:end]})
	}
	return out
}

// Error is a pipeline failure. Index is the failed node: 0 is the node the
// client dialed, i the i-th target of the setup. A failure without a node
// status (the stream broke) is charged to node 0, as HDFS does.
type Error struct {
	Index   int
	Address string
	Code    codes.Code
	Reason  string
	Msg     string
	// Seqno of the packet that failed, -1 for the setup.
	Seqno int64
}

func (e *Error) Error() string {
	s := fmt.Sprintf("blockio: pipeline node %d", e.Index)
	if e.Address != "" {
		s += " (" + e.Address + ")"
	}
	s += " failed"
	if e.Seqno >= 0 {
		s += fmt.Sprintf(" at packet %d", e.Seqno)
	} else {
		s += " at setup"
	}
	s += ": " + e.Code.String()
	if e.Reason != "" {
		s += " " + e.Reason
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// FirstBad returns the index of the first non-OK status, or -1.
func FirstBad(statuses []*pb.NodeStatus) int {
	for i, st := range statuses {
		if codes.Code(st.GetCode()) != codes.OK {
			return i
		}
	}
	return -1
}
