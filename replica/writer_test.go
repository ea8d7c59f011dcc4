package replica

import (
	"testing"
	"time"
)

// A writer stuck inside a call (a stalled disk) cannot be stopped: the
// recovery gives up after WriterStopTimeout with KindDeadlineExceeded and
// leaves the replica as it was; once the call returns, recovery succeeds.
func TestStopWriterTimeout(t *testing.T) {
	cfg := tconfig(volDirs(t, 1)...)
	cfg.WriterStopTimeout = 50 * time.Millisecond
	d := openT(t, cfg)
	defer d.Close()
	w := rbwT(t, d, 1, 10, tdata(1, 1024))
	entered, release := make(chan struct{}), make(chan struct{})
	setHook(t, func(name string) error {
		if name == "write/before-data" {
			close(entered)
			<-release
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		p := tdata(2, 512)
		done <- w.WritePacket(bg, 1024, p, ChecksumsPerChunk(p, 512))
	}()
	<-entered
	_, err := d.RecoverRbw(bg, tpool, Block{ID: 1, GS: 10}, 11, 1024, 1536)
	wantKind(t, err, KindDeadlineExceeded)
	if ri, _ := d.GetReplica(tpool, 1); ri.GS != 10 || ri.State != StateRBW {
		t.Fatalf("replica changed: %+v", ri)
	}
	select {
	case <-w.Stopped():
	default:
		t.Fatal("writer not told to stop")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("in-flight write: %v", err)
	}
	failpointHook.Store(nil)
	w2, err := d.RecoverRbw(bg, tpool, Block{ID: 1, GS: 10}, 11, 1024, 1536)
	if err != nil {
		t.Fatal(err)
	}
	if ri := w2.Replica(); ri.NumBytes != 1024 || ri.GS != 11 {
		t.Fatalf("after recovery: %+v (unacked tail must be cut)", ri)
	}
	wantKind(t, w.SetBytesAcked(1024), KindAborted)
}

// Concurrent writers and recoveries on many replicas (race detector food).
func TestConcurrentWritersAndRecovery(t *testing.T) {
	d := openT(t, tconfig(volDirs(t, 2)...))
	defer d.Close()
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(id uint64) {
			data := tdata(byte(id), 300_000)
			w, err := d.CreateRbw(bg, tpool, Block{ID: id, GS: 1}, CreateOptions{})
			if err != nil {
				done <- err
				return
			}
			for off := 0; off < len(data); off += 64 << 10 {
				p := data[off:min(off+64<<10, len(data))]
				if err := w.WritePacket(bg, int64(off), p, ChecksumsPerChunk(p, 512)); err != nil {
					done <- err
					return
				}
				w.SetBytesAcked(int64(off + len(p)))
				d.BlockReport(tpool)
			}
			w2, err := d.RecoverRbw(bg, tpool, Block{ID: id, GS: 1}, 2, 0, int64(len(data)))
			if err != nil {
				done <- err
				return
			}
			_, err = w2.Finalize(bg)
			done <- err
		}(uint64(i + 1))
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 8; id++ {
		if got := readAllT(t, d, id); len(got) != 300_000 || !equalPrefix(got, tdata(byte(id), 300_000)) {
			t.Fatalf("replica %d bytes differ", id)
		}
	}
}
