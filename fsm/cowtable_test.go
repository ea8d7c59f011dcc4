package fsm

import (
	"fmt"
	"testing"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

// TestCaptureTablesIsolated: a capture's file and block tables are the
// tables as they were at the capture, however the state's tables change
// afterwards — while the capture is being read on another goroutine (run
// with -race).
func TestCaptureTablesIsolated(t *testing.T) {
	const n = 20000
	s := NewState()
	for i := range n {
		s.ns.blocks.put(uint64(i+1), &pb.BlockRecord{Id: uint64(i + 1), Gs: 1})
		p := fmt.Sprintf("/f/%05d", i)
		s.ns.files.put(p, &pb.FileRecord{Path: p})
	}
	sn := captureSnapshot(s)
	done := make(chan []*pb.BlockRecord)
	go func() {
		sn.sortRecords()
		done <- sn.blocks
	}()
	for i := range n { // delete, replace and add while the capture is read
		id := uint64(i + 1)
		switch i % 3 {
		case 0:
			s.ns.blocks.del(id)
		case 1:
			s.ns.blocks.put(id, &pb.BlockRecord{Id: id, Gs: 2})
		case 2:
			s.ns.blocks.put(id+n, &pb.BlockRecord{Id: id + n, Gs: 2})
		}
		p := fmt.Sprintf("/f/%05d", i)
		if i%2 == 0 {
			s.ns.files.del(p)
		} else {
			s.ns.files.put(p, &pb.FileRecord{Path: p, Replication: 3})
		}
		s.ns.files.put(p+"/new", &pb.FileRecord{Path: p + "/new"})
	}
	got := <-done
	if len(got) != n || sn.header.BlockCount != n {
		t.Fatalf("capture holds %d blocks (header %d), want %d", len(got), sn.header.BlockCount, n)
	}
	for i, b := range got {
		if b.Id != uint64(i+1) || b.Gs != 1 {
			t.Fatalf("capture's block %d: %v, want id %d at GS 1", i, b, i+1)
		}
	}
	if len(sn.files) != n || sn.header.FileCount != n {
		t.Fatalf("capture holds %d files (header %d), want %d", len(sn.files), sn.header.FileCount, n)
	}
	for i, f := range sn.files {
		if want := fmt.Sprintf("/f/%05d", i); f.Path != want || f.Replication != 0 {
			t.Fatalf("capture's file %d: %v, want %s as captured", i, f, want)
		}
	}
	if s.FileCount() != n/2+n {
		t.Fatalf("state holds %d files, want %d", s.FileCount(), n/2+n)
	}
	if want := n - (n+2)/3 + n/3; s.BlockCount() != want {
		t.Fatalf("state holds %d blocks, want %d", s.BlockCount(), want)
	}
	if b, ok := s.Block(2); !ok || b.Gs != 2 {
		t.Fatalf("state's block 2: %v, %v; want the replaced record", b, ok)
	}
	if _, ok := s.Block(1); ok {
		t.Fatal("state's block 1 still there after its delete")
	}
}

// BenchmarkCaptureBlocks: the pause a snapshot or checkpoint capture puts
// in Apply for its block table, at a million blocks.
//
//	go test -run '^$' -bench BenchmarkCaptureBlocks -benchmem ./fsm
func BenchmarkCaptureBlocks(b *testing.B) {
	s := NewState()
	for i := range 1_000_000 {
		s.ns.blocks.put(uint64(i+1), &pb.BlockRecord{Id: uint64(i + 1), Gs: 1})
	}
	b.ResetTimer()
	for b.Loop() {
		captureSnapshot(s)
		s.ns.blocks.put(1, &pb.BlockRecord{Id: 1, Gs: 2}) // the next apply copies a path
	}
}

// BenchmarkBlockTable: a lookup and a replacement in a table of a million
// blocks (what a namespace op costs in it).
func BenchmarkBlockTable(b *testing.B) {
	s := NewState()
	for i := range 1_000_000 {
		s.ns.blocks.put(uint64(i+1), &pb.BlockRecord{Id: uint64(i + 1), Gs: 1})
	}
	rec := &pb.BlockRecord{Id: 1, Gs: 2}
	i := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		i = (i + 7919) % 1_000_000
		if s.ns.blocks.at(i+1) == nil {
			b.Fatal("missing")
		}
		rec.Id = i + 1
		s.ns.blocks.put(rec.Id, rec)
	}
}
