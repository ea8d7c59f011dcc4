package replica

import (
	"bytes"
	"errors"
	"testing"
)

// A crash scenario: set up a replica, run one operation that "crashes" at
// a failpoint (the Dataset is abandoned without cleanup), reopen the same
// directories, and check the replica is in exactly one allowed state, exists
// once, and every byte verifies.
type crashCase struct {
	name   string
	points []string
	setup  func(t *testing.T, d *Dataset)
	op     func(d *Dataset) error
	allow  []allowed
}

type allowed struct {
	state State
	gs    uint64
	len   int64
}

const cid = 4242

var cdata = tdata(42, 3000)

func crashCases() []crashCase {
	finalizeW := map[*Dataset]Writer{}
	return []crashCase{
		{
			name:   "finalize",
			points: []string{"finalize/after-sync", "finalize/after-meta-rename", "finalize/after-data-rename", "finalize/after-dir-sync"},
			setup:  func(t *testing.T, d *Dataset) { finalizeW[d] = rbwT(t, d, cid, 100, cdata[:1000]) },
			op: func(d *Dataset) error {
				_, err := finalizeW[d].Finalize(bg)
				return err
			},
			allow: []allowed{{StateRWR, 100, 1000}, {StateFinalized, 100, 1000}},
		},
		{
			name:   "finalize-block",
			points: []string{"finalize/after-meta-rename", "finalize/after-data-rename", "finalize/after-dir-sync"},
			setup: func(t *testing.T, d *Dataset) {
				rbwT(t, d, cid, 100, cdata[:1000]).Close()
			},
			op: func(d *Dataset) error {
				_, err := d.FinalizeBlock(bg, tpool, Block{ID: cid, GS: 100})
				return err
			},
			allow: []allowed{{StateRWR, 100, 1000}, {StateFinalized, 100, 1000}},
		},
		{
			name:   "append",
			points: []string{"append/after-meta-rename", "append/after-data-rename", "append/after-dir-sync"},
			setup:  func(t *testing.T, d *Dataset) { finalizedT(t, d, cid, 100, cdata[:1000]) },
			op: func(d *Dataset) error {
				_, err := d.Append(bg, tpool, Block{ID: cid, GS: 100}, 150, 1000)
				return err
			},
			allow: []allowed{{StateFinalized, 100, 1000}, {StateRWR, 150, 1000}},
		},
		{
			name: "recover-rbw",
			points: []string{"recover-rbw/truncate/after-temp-meta", "recover-rbw/truncate/after-data-truncate",
				"recover-rbw/truncate/after-meta-rename", "recover-rbw/after-gs-rename"},
			setup: func(t *testing.T, d *Dataset) {
				w := rbwT(t, d, cid, 100, cdata[:1100])
				writeT(t, w, 1024, cdata[1024:3000])
				w.Sync()
			},
			op: func(d *Dataset) error {
				_, err := d.RecoverRbw(bg, tpool, Block{ID: cid, GS: 100}, 150, 1100, 3000)
				return err
			},
			allow: []allowed{{StateRWR, 100, 3000}, {StateRWR, 100, 1100}, {StateRWR, 150, 1100}},
		},
		{
			name: "update-recovery-rbw",
			points: []string{"update-recovery/truncate/after-temp-meta", "update-recovery/truncate/after-data-truncate",
				"update-recovery/truncate/after-meta-rename", "update-recovery/after-meta-rename",
				"update-recovery/after-data-rename", "update-recovery/after-dir-sync"},
			setup: func(t *testing.T, d *Dataset) {
				rbwT(t, d, cid, 100, cdata[:2000]).Sync()
				if _, err := d.InitReplicaRecovery(bg, tpool, Block{ID: cid, GS: 100}, 200); err != nil {
					t.Fatal(err)
				}
			},
			op: func(d *Dataset) error {
				_, err := d.UpdateReplicaUnderRecovery(bg, tpool, Block{ID: cid, GS: 100, NumBytes: 2000}, 200, cid, 1000)
				return err
			},
			allow: []allowed{{StateRWR, 100, 2000}, {StateRWR, 100, 1000}, {StateFinalized, 200, 1000}},
		},
		{
			name: "update-recovery-finalized",
			points: []string{"update-recovery/truncate/after-temp-meta", "update-recovery/truncate/after-data-truncate",
				"update-recovery/truncate/after-meta-rename", "update-recovery/after-gs-rename"},
			setup: func(t *testing.T, d *Dataset) {
				finalizedT(t, d, cid, 100, cdata[:2000])
				if _, err := d.InitReplicaRecovery(bg, tpool, Block{ID: cid, GS: 100}, 200); err != nil {
					t.Fatal(err)
				}
			},
			op: func(d *Dataset) error {
				_, err := d.UpdateReplicaUnderRecovery(bg, tpool, Block{ID: cid, GS: 100, NumBytes: 2000}, 200, cid, 1300)
				return err
			},
			allow: []allowed{{StateFinalized, 100, 2000}, {StateFinalized, 100, 1300}, {StateFinalized, 200, 1300}},
		},
		{
			name:   "write-packet",
			points: []string{"write/before-data", "write/after-data"},
			setup:  func(t *testing.T, d *Dataset) { finalizeW[d] = rbwT(t, d, cid, 100, cdata[:1000]) },
			op: func(d *Dataset) error {
				p := cdata[512:3000]
				return finalizeW[d].WritePacket(bg, 512, p, ChecksumsPerChunk(p, 512))
			},
			allow: []allowed{{StateRWR, 100, 1000}},
		},
	}
}

func TestCrashSafety(t *testing.T) {
	for _, cc := range crashCases() {
		for _, point := range cc.points {
			t.Run(cc.name+"/"+point, func(t *testing.T) {
				dirs := volDirs(t, 2)
				d := openT(t, tconfig(dirs...))
				cc.setup(t, d)
				hit := false
				setHook(t, func(name string) error {
					if name == point && !hit {
						hit = true
						return errCrash
					}
					return nil
				})
				err := cc.op(d)
				failpointHook.Store(nil)
				if !hit || !errors.Is(err, errCrash) {
					t.Fatalf("failpoint %s not reached (hit %v, err %v)", point, hit, err)
				}
				d.abandon() // crash: no cleanup
				d2 := openT(t, tconfig(dirs...))
				defer d2.Close()
				ri, err := d2.GetReplica(tpool, cid)
				if err != nil {
					t.Fatalf("replica lost: %v", err)
				}
				ok := false
				for _, a := range cc.allow {
					ok = ok || ri.State == a.state && ri.GS == a.gs && ri.NumBytes == a.len
				}
				if !ok {
					t.Fatalf("after crash: %v GS %d len %d, allowed %+v", ri.State, ri.GS, ri.NumBytes, cc.allow)
				}
				if n := countBlockFiles(t, d2.fs, dirs, cid); n != 1 {
					t.Fatalf("%d block files after crash, want 1", n)
				}
				if got := readAllT(t, d2, cid); int64(len(got)) != ri.NumBytes || !bytes.Equal(got, cdata[:len(got)]) {
					t.Fatalf("bytes after crash: %d, want %d verified bytes of the original", len(got), ri.NumBytes)
				}
				// A second restart finds the same thing (repairs are durable).
				d2.Close()
				d3 := openT(t, tconfig(dirs...))
				defer d3.Close()
				if ri3, err := d3.GetReplica(tpool, cid); err != nil || ri3.State != ri.State || ri3.GS != ri.GS || ri3.NumBytes != ri.NumBytes {
					t.Fatalf("second restart: %+v, %v; first %+v", ri3, err, ri)
				}
			})
		}
	}
}
