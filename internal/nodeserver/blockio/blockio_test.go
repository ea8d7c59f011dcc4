package blockio

import (
	"hash/crc32"
	"testing"
)

func TestChecksumsAndVerify(t *testing.T) {
	data := make([]byte, 3*ChunkSize+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sums := Checksums(data)
	if len(sums) != 4 || sums[3] != crc32.Checksum(data[3*ChunkSize:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("checksums %v", sums)
	}
	if bad := Verify(data, sums); bad != -1 {
		t.Fatalf("Verify = %d", bad)
	}
	data[ChunkSize+1] ^= 1
	if bad := Verify(data, sums); bad != 1 {
		t.Fatalf("Verify after a flip = %d, want 1", bad)
	}
	if bad := Verify(data[:ChunkSize], sums); bad != 1 {
		t.Fatalf("extra checksums: Verify = %d, want 1", bad)
	}
	if len(Checksums(nil)) != 0 || Verify(nil, nil) != -1 {
		t.Fatal("empty data")
	}
}

func TestSplitPackets(t *testing.T) {
	block := make([]byte, 10_000)
	pkts := SplitPackets(block, 0, 4096)
	if len(pkts) != 3 || pkts[2].Offset != 8192 || pkts[2].End() != 10_000 {
		t.Fatalf("%+v", pkts)
	}
	// A resend from inside a chunk starts at its boundary.
	pkts = SplitPackets(block, 5000, 3000) // size rounds down to 2560
	if pkts[0].Offset != 4608 || len(pkts[0].Data) != 2560 || pkts[len(pkts)-1].End() != 10_000 {
		t.Fatalf("%+v", pkts[0])
	}
	if n := len(SplitPackets(block, 0, 1<<30)[0].Data); n != 10_000 {
		t.Fatalf("size is capped at MaxPacketData: %d", n)
	}
	// From the end: the partial last chunk again.
	if pkts := SplitPackets(block, 10_000, 4096); len(pkts) != 1 || pkts[0].Offset != 9728 {
		t.Fatalf("%+v", pkts)
	}
	if len(SplitPackets(block[:9728], 9728, 4096)) != 0 {
		t.Fatal("nothing past an aligned end")
	}
}
