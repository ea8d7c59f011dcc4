package nodeserver

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
)

// Throughput benchmarks (go test -run '^$' -bench . ./internal/nodeserver).
// Every node of a benchmark stores its volume in the test's temp dir, so
// all of them and BenchmarkRawDiskDirect measure the same disk; compare
// the MB/s columns. Each write op is one whole block, 64 KiB packets,
// fsynced at the end (the last packet's hsync and the finalize).

const benchBlock = 16 << 20

func benchWrite(b *testing.B, nodes []*testNode) {
	ctx := testCtx(b)
	data := randomBytes(benchBlock, 42)
	pkts := blockio.SplitPackets(data, 0, blockio.MaxPacketData)
	pkts[len(pkts)-1].Last, pkts[len(pkts)-1].Fsync = true, true
	var targets []string
	for _, n := range nodes[1:] {
		targets = append(targets, n.addr)
	}
	b.SetBytes(benchBlock)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := blockio.Open(ctx, nodes[0].conn, createSetup(uint64(i+1), 1, targets...), blockio.Options{Address: nodes[0].addr})
		if err != nil {
			b.Fatal(err)
		}
		if err := sendAll(b, ctx, p, pkts); err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteOneNode(b *testing.B) {
	benchWrite(b, []*testNode{startNode(b, "n1")})
}

func BenchmarkWritePipeline3(b *testing.B) {
	benchWrite(b, []*testNode{startNode(b, "n1"), startNode(b, "n2"), startNode(b, "n3")})
}

func BenchmarkRead(b *testing.B) {
	ctx := testCtx(b)
	n := startNode(b, "n1")
	data := randomBytes(benchBlock, 43)
	p, err := blockio.Open(ctx, n.conn, createSetup(1, 1), blockio.Options{Address: n.addr})
	if err != nil {
		b.Fatal(err)
	}
	pkts := blockio.SplitPackets(data, 0, blockio.MaxPacketData)
	pkts[len(pkts)-1].Last = true
	if err := sendAll(b, ctx, p, pkts); err != nil {
		b.Fatal(err)
	}
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchBlock)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stream, err := n.client.ReadBlock(ctx, &pb.ReadBlockRequest{Pool: testPool, BlockId: 1, Gs: 1})
		if err != nil {
			b.Fatal(err)
		}
		var got int
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if blockio.Verify(c.GetData(), c.GetChecksums()) >= 0 {
				b.Fatal("chunk does not verify")
			}
			got += len(c.GetData())
		}
		if got != benchBlock {
			b.Fatalf("read %d bytes", got)
		}
	}
}

// BenchmarkRawDiskDirect is `dd if=/dev/zero of=F bs=1M oflag=direct` plus
// a final fsync, on the benchmarks' disk: the ceiling the write benchmarks
// compare against. Where O_DIRECT is refused (tmpfs, some overlay file
// systems) it writes and fdatasyncs every 1 MiB instead.
func BenchmarkRawDiskDirect(b *testing.B) {
	const bs = 1 << 20
	dir := b.TempDir()
	raw := make([]byte, bs+4096)
	buf := raw[(4096-int(uintptr(unsafe.Pointer(&raw[0]))&4095))&4095:][:bs]
	copy(buf, randomBytes(bs, 44))
	mode := "O_DIRECT"
	b.SetBytes(benchBlock)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, "dd")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_DIRECT, 0o600)
		direct := err == nil
		if !direct {
			mode = "write+fdatasync"
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		for off := 0; off < benchBlock; off += bs {
			if _, err := f.Write(buf); err != nil {
				if direct && errors.Is(err, syscall.EINVAL) {
					b.Fatalf("O_DIRECT write refused: %v", err)
				}
				b.Fatal(err)
			}
			if !direct {
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.StopTimer()
	b.Logf("raw sequential write mode: %s, 1 MiB writes", mode)
}
