package replica

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestVolumeChoiceAndFullVolume(t *testing.T) {
	dirs := volDirs(t, 3)
	cfg := tconfig(dirs...)
	var free [3]atomic.Int64
	for i := range free {
		free[i].Store(100 << 20)
	}
	cfg.DiskUsage = func(path string) (DiskUsage, error) {
		for i, d := range dirs {
			if d == path {
				return DiskUsage{Capacity: 1 << 30, Available: uint64(free[i].Load())}, nil
			}
		}
		return DiskUsage{}, os.ErrNotExist
	}
	cfg.Volumes[1].Reserved = 99 << 20 // leaves 1 MiB: exactly one reservation
	d := openT(t, cfg)
	defer d.Close()
	used := map[string]int{}
	var ws []Writer
	for id := uint64(1); id <= 6; id++ {
		w, err := d.CreateRbw(bg, tpool, Block{ID: id, GS: 1}, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		used[w.Replica().VolumePath]++
	}
	if used[dirs[0]] != 3 || used[dirs[1]] != 1 || used[dirs[2]] != 2 {
		t.Fatalf("round robin with a nearly full volume: %v", used)
	}
	vi := d.VolumeInfo()
	if vi[0].ReservedForReplicas != 3<<20 || vi[0].NumBlocks != 3 || vi[1].Reserved != 99<<20 {
		t.Fatalf("volume info %+v", vi)
	}
	// Writing releases reservations.
	p := tdata(1, 64<<10)
	if err := ws[0].WritePacket(bg, 0, p, ChecksumsPerChunk(p, 512)); err != nil {
		t.Fatal(err)
	}
	if got := d.VolumeInfo()[0].ReservedForReplicas; got != 3<<20-64<<10 {
		t.Fatalf("reservation after 64 KiB: %d", got)
	}
	// Full volumes → DiskOutOfSpace, nothing created.
	for i := range free {
		free[i].Store(0)
	}
	_, err := d.CreateRbw(bg, tpool, Block{ID: 99, GS: 1}, CreateOptions{})
	wantKind(t, err, KindDiskOutOfSpace)
	if _, err := d.GetReplica(tpool, 99); KindOf(err) != KindNotFound {
		t.Fatalf("replica created on a full volume")
	}
	_, err = d.CreateTemporary(bg, tpool, Block{ID: 1, GS: 5}, true, CreateOptions{})
	wantKind(t, err, KindDiskOutOfSpace)
	if ri, _ := d.GetReplica(tpool, 1); ri.State != StateRBW || ri.GS != 1 {
		t.Fatalf("replica replaced despite a full volume: %+v", ri)
	}
	// A write past the reservation on a full volume fails and changes nothing.
	big := tdata(2, 1<<20)
	w := ws[5]
	writeT(t, w, 0, big[:512<<10])
	err = w.WritePacket(bg, 512<<10, big[512<<10:], ChecksumsPerChunk(big[512<<10:], 512))
	if err != nil {
		wantKind(t, err, KindDiskOutOfSpace)
	}
	big2 := tdata(3, 2<<20)
	err = w.WritePacket(bg, 1<<20, big2, ChecksumsPerChunk(big2, 512))
	wantKind(t, err, KindDiskOutOfSpace)
	// Storage type filter.
	_, err = d.CreateRbw(bg, tpool, Block{ID: 98, GS: 1}, CreateOptions{StorageType: StorageSSD})
	wantKind(t, err, KindUnavailable)
}

func TestMostAvailableAndMemFSFull(t *testing.T) {
	m := NewMemFS()
	cfg := tconfig("/a", "/b")
	cfg.VolumeChoice = MostAvailable
	m.Mkdir("/a", 0o755)
	m.Mkdir("/b", 0o755)
	m.SetCapacity("/a", 10<<20)
	m.SetCapacity("/b", 3<<20)
	cfg.BlockSize = 1 << 20
	d, err := NewMemStore(bg, cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.AddBlockPool(bg, tpool)
	for id := uint64(1); id <= 5; id++ {
		w, err := d.CreateRbw(bg, tpool, Block{ID: id, GS: 1}, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.Replica().VolumePath != "/a" {
			t.Fatalf("most-available picked %s", w.Replica().VolumePath)
		}
	}
	// The file system itself runs out: ENOSPC → DiskOutOfSpace.
	w, _ := d.CreateRbw(bg, tpool, Block{ID: 10, GS: 1, NumBytes: 1024}, CreateOptions{StorageID: d.VolumeInfo()[1].StorageID})
	big := tdata(4, 4<<20)
	err = w.WritePacket(bg, 0, big, ChecksumsPerChunk(big, 512))
	wantKind(t, err, KindDiskOutOfSpace)
	if ri := w.Replica(); ri.BytesOnDisk != 0 {
		t.Fatalf("failed write left %d bytes", ri.BytesOnDisk)
	}
}

func TestVolumeFailure(t *testing.T) {
	dirs := volDirs(t, 3)
	cfg := tconfig(dirs...)
	cfg.VolumeFailuresTolerated = 1
	d := openT(t, cfg)
	defer d.Close()
	sub := d.Subscribe()
	for id := uint64(1); id <= 6; id++ {
		finalizedT(t, d, id, 1, tdata(byte(id), 100))
	}
	victim := dirs[1]
	before, _ := d.Replicas(tpool)
	onVictim := 0
	for _, r := range before {
		if r.VolumePath == victim {
			onVictim++
		}
	}
	if err := os.RemoveAll(victim); err != nil {
		t.Fatal(err)
	}
	failed, err := d.CheckVolumes(bg)
	if err != nil || len(failed) != 1 || failed[0] != victim {
		t.Fatalf("check volumes: %v, %v", failed, err)
	}
	after, _ := d.Replicas(tpool)
	if len(after) != 6-onVictim {
		t.Fatalf("%d replicas left, want %d", len(after), 6-onVictim)
	}
	deleted := 0
	changes, _ := sub.Drain()
	for _, c := range changes {
		if c.Kind == ChangeDeleted {
			deleted++
		}
	}
	if deleted != onVictim {
		t.Fatalf("%d deletions published, want %d", deleted, onVictim)
	}
	vi := d.VolumeInfo()
	if !vi[1].Failed || vi[1].FailureReason == "" {
		t.Fatalf("volume info %+v", vi[1])
	}
	// Still serving.
	finalizedT(t, d, 50, 1, tdata(50, 10))
	// One more failure is too many.
	os.RemoveAll(dirs[0])
	_, err = d.CheckVolumes(bg)
	wantKind(t, err, KindUnavailable)
	_, err = d.CreateRbw(bg, tpool, Block{ID: 60, GS: 1}, CreateOptions{})
	wantKind(t, err, KindUnavailable)
}

func TestVolumeFailureOnIOError(t *testing.T) {
	m := NewMemFS()
	cfg := tconfig("/v0", "/v1")
	cfg.VolumeFailuresTolerated = 1
	m.Mkdir("/v0", 0o755)
	m.Mkdir("/v1", 0o755)
	d, err := NewMemStore(bg, cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.AddBlockPool(bg, tpool)
	w, err := d.CreateRbw(bg, tpool, Block{ID: 1, GS: 1}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Fail(w.Replica().VolumePath, nil)
	p := tdata(1, 512)
	if err := w.WritePacket(bg, 0, p, ChecksumsPerChunk(p, 512)); KindOf(err) != KindIO {
		t.Fatalf("write on failed disk: %v", err)
	}
	// The checker takes the volume out of service in the background.
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for {
		if vi := d.VolumeInfo(); vi[0].Failed || vi[1].Failed {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("volume not failed after an I/O error")
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := d.GetReplica(tpool, 1); KindOf(err) != KindNotFound {
		t.Fatalf("replica of failed volume still in the map")
	}
}
