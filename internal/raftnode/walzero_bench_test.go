package raftnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
)

// BenchmarkWALStoreLogs: one StoreLogs (one write and one sync) into raft-wal
// with fallocated or zeroed segments, for one log or three logs on the same
// disk at once (a coord dev cluster), with a small batch (one 400-byte
// entry, one client) and a large one (~10 KB, what 100 clients make).
// Needs a real disk under the temp dir (TMPDIR). docs/benchmarks.md, "Raft
// log store: one synced write".
func BenchmarkWALStoreLogs(b *testing.B) {
	for _, size := range []int{400, 10000} {
		for _, logs := range []int{1, 3} {
			for _, prefill := range []bool{false, true} {
				kind := "fallocated"
				if prefill {
					kind = "zeroed"
				}
				b.Run(fmt.Sprintf("bytes=%d/logs=%d/%s", size, logs, kind), func(b *testing.B) {
					benchStoreLogs(b, size, logs, prefill)
				})
			}
		}
	}
}

func benchStoreLogs(b *testing.B, size, logs int, prefill bool) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for p := range logs {
		dir := filepath.Join(b.TempDir(), fmt.Sprint(p))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		var w *raftwal.WAL
		var err error
		if prefill {
			z, zerr := newZeroedSegments(dir, uint64(raftwal.DefaultSegmentSize), testLogger(b))
			if zerr != nil {
				b.Fatal(zerr)
			}
			defer z.Close()
			w, err = raftwal.Open(dir, raftwal.WithSegmentFiler(segment.NewFiler(dir, z)))
			z.wg.Wait() // the next spare: written once a segment, not per append
		} else {
			w, err = raftwal.Open(dir)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, size)
			<-start
			for i := 0; i < b.N; i++ {
				if err := w.StoreLogs([]*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	b.ResetTimer()
	close(start)
	wg.Wait()
}
