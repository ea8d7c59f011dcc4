package replica

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkWriter: one replica writer, 64 KiB packets, 8 MiB replica,
// fsync and finalize at the end (MB/s = throughput).
func BenchmarkWriter(b *testing.B) {
	d := openT(b, tconfig(volDirs(b, 1)...))
	defer d.Close()
	const size = 8 << 20
	data := tdata(1, size)
	sums := ChecksumsPerChunk(data, 512)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := d.CreateRbw(bg, tpool, Block{ID: uint64(i + 1), GS: 1}, CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < size; off += 64 << 10 {
			if err := w.WritePacket(bg, int64(off), data[off:off+64<<10], sums[off/512:(off+64<<10)/512]); err != nil {
				b.Fatal(err)
			}
			w.SetBytesAcked(int64(off + 64<<10))
		}
		if _, err := w.Finalize(bg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReader: ReadChunks (verifying) over an 8 MiB finalized replica.
func BenchmarkReader(b *testing.B) {
	d := openT(b, tconfig(volDirs(b, 1)...))
	defer d.Close()
	const size = 8 << 20
	finalizedT(b, d, 1, 1, tdata(1, size))
	buf := make([]byte, 64<<10)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br, err := d.OpenBlock(tpool, Block{ID: 1, GS: 1})
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; {
			n, _, err := br.ReadChunks(off, buf)
			if err != nil {
				b.Fatal(err)
			}
			off += int64(n)
		}
		br.Close()
	}
}

// BenchmarkLoad: restart time with LOGBOOK_BENCH_REPLICAS (default 10 000)
// finalized replicas of 1 KiB (plus 1% in rbw/) on two volumes.
func BenchmarkLoad(b *testing.B) {
	n := envInt("LOGBOOK_BENCH_REPLICAS", 10_000)
	dirs := volDirs(b, 2)
	data := tdata(1, 1024)
	meta := append(DefaultMetaHeader(512).Encode(), encodeSums(ChecksumsPerChunk(data, 512))...)
	for i := 0; i < n; i++ {
		id := uint64(i + 1)
		pp := newPoolPaths(dirs[i%2], tpool)
		dir := pp.dir(inFinalized, id)
		if i%100 == 99 {
			dir = pp.rbw
		}
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, blockName(id)), data, 0o644)
		os.WriteFile(filepath.Join(dir, metaName(id, 1)), meta, 0o644)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		d := openT(b, tconfig(dirs...))
		el := time.Since(start)
		if got, _ := d.Replicas(tpool); len(got) != n {
			b.Fatalf("loaded %d of %d", len(got), n)
		}
		d.Close()
		b.ReportMetric(float64(el.Milliseconds()), "ms/load")
		b.ReportMetric(float64(n), "replicas")
	}
}

// BenchmarkBlockReport: building the full report of an in-memory map of
// LOGBOOK_BENCH_REPORT_REPLICAS (default 100 000) replicas.
func BenchmarkBlockReport(b *testing.B) {
	n := envInt("LOGBOOK_BENCH_REPORT_REPLICAS", 100_000)
	d := openT(b, tconfig(volDirs(b, 2)...))
	defer d.Close()
	d.mu.Lock()
	p := d.pools[tpool]
	for i := 0; i < n; i++ {
		v := d.vols[i%2]
		p.replicas[uint64(i+1)] = &replica{pool: tpool, id: uint64(i + 1), gs: 7, state: StateFinalized,
			numBytes: 128 << 20, bytesOnDisk: 128 << 20, vol: v, hdr: DefaultMetaHeader(512)}
	}
	d.mu.Unlock()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := d.BlockReport(tpool)
		if err != nil || len(rep[0].Replicas)+len(rep[1].Replicas) != n {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "replicas")
}
