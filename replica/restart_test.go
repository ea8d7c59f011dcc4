package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestLoadRestartMarker is design §R1.4 step 5: an rbw/ replica loads RBW
// (no writer, every validated byte acked) while an unexpired restart
// marker exists, RWR otherwise; the marker is deleted either way.
func TestLoadRestartMarker(t *testing.T) {
	future := func() string { return strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10) + "\n" }
	cases := []struct {
		name      string
		marker    func() string // "" writes no marker (after WriteRestartMarker for "written")
		written   bool          // use WriteRestartMarker with a future expiry
		tornTail  bool          // 700 unverified bytes after the 3000 written
		wantState State
	}{
		{name: "written by WriteRestartMarker", written: true, wantState: StateRBW},
		{name: "unexpired", marker: future, wantState: StateRBW},
		{name: "unexpired, torn tail dropped", marker: future, tornTail: true, wantState: StateRBW},
		{name: "expired", marker: func() string { return strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10) }, wantState: StateRWR},
		{name: "no marker", wantState: StateRWR},
		{name: "garbage", marker: func() string { return "soon\n" }, wantState: StateRWR},
		{name: "empty", marker: func() string { return " " }, wantState: StateRWR},
		{name: "oversize", marker: func() string { return string(bytes.Repeat([]byte("9"), 100)) }, wantState: StateRWR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dirs := volDirs(t, 1)
			cfg := tconfig(dirs...)
			d := openT(t, cfg)
			data := tdata(7, 3000)
			w := rbwT(t, d, 1, 10, data)
			pp := newPoolPaths(dirs[0], tpool)
			marker := filepath.Join(pp.rbw, restartName(1))
			if tc.written {
				if err := d.WriteRestartMarker(tpool, 1, time.Now().Add(time.Minute)); err != nil {
					t.Fatalf("write marker: %v", err)
				}
			}
			w.Close()
			d.Close()
			if tc.marker != nil {
				if err := os.WriteFile(marker, []byte(tc.marker()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.tornTail {
				f, _ := os.OpenFile(filepath.Join(pp.rbw, blockName(1)), os.O_WRONLY|os.O_APPEND, 0)
				f.Write(tdata(9, 700))
				f.Close()
			}
			d2 := openT(t, cfg)
			defer d2.Close()
			ri, err := d2.GetReplica(tpool, 1)
			if err != nil || ri.State != tc.wantState || ri.NumBytes != 3000 || ri.BytesAcked != 3000 || ri.BytesOnDisk != 3000 || ri.GS != 10 || ri.HasWriter {
				t.Fatalf("loaded %+v, %v; want %v with 3000 bytes, all acked, no writer", ri, err, tc.wantState)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatalf("marker survived the load: %v", err)
			}
			vi := d2.VolumeInfo()[0]
			wantReserved := int64(0)
			if tc.wantState == StateRBW {
				wantReserved = cfg.BlockSize - 3000
			}
			if vi.ReservedForReplicas != wantReserved {
				t.Fatalf("reserved for replicas %d, want %d", vi.ReservedForReplicas, wantReserved)
			}
			if got := readAllT(t, d2, 1); !bytes.Equal(got, data) {
				t.Fatalf("bytes differ after load")
			}
			if tc.wantState != StateRBW {
				_, err := d2.RecoverRbw(bg, tpool, Block{ID: 1, GS: 10}, 11, 3000, 3000)
				wantKind(t, err, KindNotFound)
				return
			}
			// The writer resumes: a streaming recovery with what it had acked
			// (at most what was validated) and sent, then the rest.
			w2, err := d2.RecoverRbw(bg, tpool, Block{ID: 1, GS: 10}, 11, 2048, 3700)
			if err != nil {
				t.Fatalf("recover rbw after the restart: %v", err)
			}
			more := tdata(8, 1000)
			writeT(t, w2, 2560, append(append([]byte(nil), data[2560:]...), more...))
			if err := w2.SetBytesAcked(4000); err != nil {
				t.Fatal(err)
			}
			fin, err := w2.Finalize(bg)
			if err != nil || fin.GS != 11 || fin.NumBytes != 4000 {
				t.Fatalf("finalize after resume: %+v, %v", fin, err)
			}
			if got := readAllT(t, d2, 1); !bytes.Equal(got, append(append([]byte(nil), data...), more...)) {
				t.Fatalf("resumed bytes differ")
			}
			if got := d2.VolumeInfo()[0].ReservedForReplicas; got != 0 {
				t.Fatalf("reservation left after finalize: %d", got)
			}
		})
	}
}

// TestRestartMarkerOrphansAndRefusals: a marker without a replica (or in
// finalized/) is deleted at load; WriteRestartMarker refuses what is not
// RBW and changes nothing.
func TestRestartMarkerOrphansAndRefusals(t *testing.T) {
	dirs := volDirs(t, 1)
	cfg := tconfig(dirs...)
	d := openT(t, cfg)
	finalizedT(t, d, 2, 10, tdata(1, 700))
	wantKind(t, d.WriteRestartMarker(tpool, 2, time.Now().Add(time.Minute)), KindNotFound)
	wantKind(t, d.WriteRestartMarker(tpool, 3, time.Now().Add(time.Minute)), KindNotFound)
	wantKind(t, d.WriteRestartMarker("BP-none", 2, time.Now().Add(time.Minute)), KindNotFound)
	d.Close()
	pp := newPoolPaths(dirs[0], tpool)
	if ents, _ := os.ReadDir(pp.rbw); len(ents) != 0 {
		t.Fatalf("a refused marker wrote %v", ents)
	}
	future := []byte(strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
	orphans := []string{filepath.Join(pp.rbw, restartName(5)), filepath.Join(pp.dir(inFinalized, 2), restartName(2))}
	for _, p := range orphans {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, future, 0o644)
	}
	d2 := openT(t, cfg)
	defer d2.Close()
	for _, p := range orphans {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survived the load", p)
		}
	}
	if _, err := d2.GetReplica(tpool, 5); KindOf(err) != KindNotFound {
		t.Fatalf("an orphan marker made a replica: %v", err)
	}
	if ri, _ := d2.GetReplica(tpool, 2); ri.State != StateFinalized {
		t.Fatalf("finalized replica with a stray marker: %+v", ri)
	}
}
