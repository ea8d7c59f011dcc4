package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// randomNamespaceLogs builds a deterministic pseudo-random history of
// namespace ops — mostly plausible (crafted from the state so far), some
// wrong on purpose — mixed with appends (some with reserved types), trims,
// retried session requests and time jumps past recovery deadlines.
func randomNamespaceLogs(t testing.TB, seed int64, n int) []*raft.Log {
	r := rand.New(rand.NewSource(seed))
	g := newNS(t)
	paths := []string{"/d1/f1", "/d1/f2", "/d2/f3", "/f4", "/d1", "/d2/e/f5"}
	clients := []string{"c1", "c2", "c3"}
	pick := func(xs []string) string { return xs[r.Intn(len(xs))] }
	nodes := func() []string {
		var out []string
		for _, n := range g.s.Nodes() {
			out = append(out, n.Id)
		}
		return out
	}
	someNodes := func(k int) []string {
		all := nodes()
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		if k > len(all) {
			k = len(all)
		}
		if r.Intn(15) == 0 {
			return append(all[:k:k], "ghost")
		}
		return all[:k]
	}
	lastOf := func(p string) (*pb.FileRecord, *pb.BlockRecord) {
		f, ok := g.s.File(p)
		if !ok {
			return nil, nil
		}
		return f, g.s.lastBlock(f)
	}
	holder := func(f *pb.FileRecord) string {
		if f != nil && f.LeaseHolder != "" && r.Intn(6) != 0 {
			return f.LeaseHolder
		}
		return pick(clients)
	}
	lastRef := func(b *pb.BlockRecord) *pb.BlockRef {
		if b == nil {
			return nil
		}
		ref := &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes}
		if b.State == stateUC && r.Intn(3) != 0 {
			ref.NumBytes += uint64(r.Intn(4097 - int(b.NumBytes)))
		}
		if r.Intn(12) == 0 {
			ref.Gs--
		}
		return ref
	}
	replicated := func(f *pb.FileRecord) []uint64 {
		var out []uint64
		if f == nil {
			return nil
		}
		for _, id := range f.BlockIds {
			if r.Intn(4) != 0 {
				out = append(out, id)
			}
		}
		return out
	}
	var logs []*raft.Log
	var sessSeq uint64
	var lastSess *pb.NamespaceCommand
	for i := 0; i < n; i++ {
		g.now += int64(1+r.Intn(60)) * 1e9
		if r.Intn(10) == 0 {
			g.now += 100e9
		}
		p := pick(paths)
		f, last := lastOf(p)
		var nop *pb.NamespaceOp
		switch k := r.Intn(22); {
		case k == 0 || len(g.s.Nodes()) < 3:
			id := fmt.Sprintf("n%d", 1+r.Intn(5))
			nop = opRegister(id, fmt.Sprintf("%s:%d", id, r.Intn(2)), id+":g", fmt.Sprintf("i-%s-%d", id, r.Intn(2)))
		case k <= 3:
			nop = opCreate(p, pick(clients), r.Intn(3) == 0)
		case k <= 7:
			nop = opAdd(p, holder(f), lastRef(last), replicated(f), someNodes(1+r.Intn(3))...)
		case k <= 9:
			nop = opComplete(p, holder(f), lastRef(last), replicated(f)...)
		case k == 10:
			nop = opAppend(p, pick(clients), someNodes(r.Intn(2)*(1+r.Intn(3)))...)
		case k == 11 && r.Intn(3) == 0:
			nop = opDelete(p, r.Intn(2) == 0)
		case k == 12 && last != nil:
			nop = opAbandon(p, holder(f), last.Id)
		case k == 13 && last != nil:
			nop = opPipelineGS(p, holder(f), last.Id)
		case k == 14 && last != nil:
			newGS := last.Gs + 1 + uint64(r.Intn(int(g.s.NextGS()-last.Gs)))
			nop = opPipeline(p, holder(f), last.Id, last.Gs, newGS, last.NumBytes+uint64(r.Intn(100)), someNodes(1+r.Intn(3))...)
		case k <= 16 && last != nil:
			primary := ""
			if len(last.ExpectedLocations) > 0 {
				primary = last.ExpectedLocations[r.Intn(len(last.ExpectedLocations))]
			}
			nop = opRecover(p, last.Id, primary, g.now+int64(1+r.Intn(120))*1e9)
		case k <= 18:
			ur := g.s.BlocksUnderRecovery()
			if len(ur) == 0 {
				nop = opRelease(p, holder(f), replicated(f)...)
				break
			}
			b := ur[r.Intn(len(ur))]
			rid := b.Recovery.RecoveryId
			if r.Intn(5) == 0 {
				rid = b.Gs + 1 + uint64(r.Intn(int(rid-b.Gs)))
			}
			del := r.Intn(8) == 0
			var targets []string
			length := uint64(r.Intn(4097))
			if del {
				length = 0
			} else {
				targets = b.ExpectedLocations[:1+r.Intn(len(b.ExpectedLocations))]
			}
			nop = opCommitSync(b.Id, b.Gs, rid, length, r.Intn(6) != 0, del, targets...)
			if bf, ok := g.s.File(b.Path); ok {
				nop.GetCommitBlockSync().ReplicatedBlocks = replicated(bf)
			}
		case k == 19:
			nop = opRelease(p, holder(f), replicated(f)...)
		case k == 20:
			g.idx++
			ty := "app"
			if r.Intn(3) == 0 {
				ty = EventCreate
			}
			logs = append(logs, appendEntry(t, g.idx, op("", 0, 0, ty)))
			g.apply(logs[len(logs)-1])
			continue
		default:
			if r.Intn(4) == 0 {
				g.idx++
				logs = append(logs, cmdEntry(t, g.idx, pb.CommandType_COMMAND_TYPE_TRIM, &pb.TrimCommand{CoveredIndex: g.idx}))
				g.apply(logs[len(logs)-1])
				continue
			}
			nop = opCreate(p, pick(clients), true)
		}
		if nop == nil {
			nop = &pb.NamespaceOp{}
		}
		c := &pb.NamespaceCommand{Op: nop}
		switch {
		case lastSess != nil && r.Intn(8) == 0:
			c = lastSess // a retry
		case r.Intn(3) == 0:
			sessSeq++
			c.ClientId, c.RequestSeq = "sdk", sessSeq
			if sessSeq > 5 {
				c.AckedSeq = sessSeq - 5
			}
			lastSess = c
		}
		g.idx++
		logs = append(logs, nsEntry(t, g.idx, g.now, c))
		g.apply(logs[len(logs)-1])
	}
	return logs
}

func (d *ns) apply(l *raft.Log) any {
	d.t.Helper()
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := d.s.Apply(l.Index, cmd)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp
}

// TestNamespaceRandomInvariants replays random histories checking, after
// every entry: a refused op changed nothing and wrote no event; an accepted
// one wrote exactly one audit event (none when unchanged); GS only grows per
// block and stays below the counter (invariant 3); the snapshot restores to
// the same state.
func TestNamespaceRandomInvariants(t *testing.T) {
	accepted := map[string]int{}
	refused := 0
	for seed := int64(1); seed <= 8; seed++ {
		logs := randomNamespaceLogs(t, seed, 700)
		d := newNS(t)
		gs := map[uint64]uint64{}
		for i, l := range logs {
			before, next := d.s.digest(false), d.s.NextSeq()
			resp := d.apply(l)
			if r, ok := resp.(NamespaceResult); ok {
				switch {
				case r.Err != nil || r.Duplicate || r.Result.Unchanged:
					if r.Err != nil {
						refused++
						if KindOf(r.Err) == KindUnknown && r.Err != ErrSessionAcked && r.Err != ErrSessionResultExpired {
							t.Fatalf("seed %d entry %d: error without a kind: %v", seed, i, r.Err)
						}
					}
					if d.s.digest(false) != before || d.s.NextSeq() != next {
						t.Fatalf("seed %d entry %d: %v changed the state", seed, i, r.Err)
					}
				default:
					evs := d.s.Read(next, 2)
					if d.s.NextSeq() != next+1 || len(evs) != 1 || !ReservedEventType(evs[0].Type) || evs[0].Seq != r.Seq {
						t.Fatalf("seed %d entry %d: accepted op wrote %v", seed, i, evs)
					}
					accepted[evs[0].Type]++
				}
			}
			d.s.ns.blocks.each(func(id uint64, b *pb.BlockRecord) bool {
				if b.Gs < gs[id] || b.Gs >= d.s.NextGS() || b.Recovery.GetRecoveryId() >= d.s.NextGS() {
					t.Fatalf("seed %d entry %d: block %d GS %d after %d (next %d)", seed, i, id, b.Gs, gs[id], d.s.NextGS())
				}
				gs[id] = b.Gs
				return true
			})
			if i%100 == 99 || i == len(logs)-1 {
				f := &FSM{state: d.s}
				g := New(nil)
				if err := g.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
					t.Fatalf("seed %d entry %d: %v", seed, i, err)
				}
				g.View(func(s *State) {
					if s.Hash() != d.s.Hash() {
						t.Fatalf("seed %d entry %d: restored state differs", seed, i)
					}
				})
			}
		}
	}
	t.Logf("accepted %v, refused %d", accepted, refused)
	for _, typ := range []string{EventCreate, EventAddBlock, EventComplete, EventAppend, EventDelete, EventAbandonBlock,
		EventUpdateBlockForPipeline, EventUpdatePipeline, EventRecoveryStarted, EventRecoveryCommitted, EventLeaseReleased, EventNodeRegistered} {
		if accepted[typ] == 0 {
			t.Errorf("the random histories never accepted %s", typ)
		}
	}
}

// TestNamespaceDeterminismAndSnapshot: the same history on two FSMs (one
// entry at a time, and in batches) gives the same hash; a snapshot taken
// mid-history, restored and replayed gives the same state as a straight
// apply.
func TestNamespaceDeterminismAndSnapshot(t *testing.T) {
	for seed := int64(10); seed < 14; seed++ {
		logs := randomNamespaceLogs(t, seed, 600)
		a, b := New(nil), New(nil)
		for _, l := range logs {
			a.Apply(l)
		}
		for i := 0; i < len(logs); i += 17 {
			b.ApplyBatch(logs[i:min(i+17, len(logs))])
		}
		var ha, hb [32]byte
		a.View(func(s *State) { ha = s.Hash() })
		b.View(func(s *State) { hb = s.Hash() })
		if ha != hb || a.Halted() != nil {
			t.Fatalf("seed %d: hashes differ (halted %v)", seed, a.Halted())
		}
		for _, cut := range []int{1, 150, 300, 599} {
			c := New(nil)
			c.ApplyBatch(logs[:cut])
			data := snapshotBytes(t, c)
			c.ApplyBatch(logs[cut:]) // applies after Snapshot() must not leak in
			r := New(nil)
			if err := r.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}
			r.ApplyBatch(logs[cut:])
			var hr [32]byte
			r.View(func(s *State) { hr = s.Hash() })
			if hr != ha {
				t.Fatalf("seed %d cut %d: snapshot+replay differs from straight apply", seed, cut)
			}
		}
	}
}

// TestRestoreFormat2Fixture reads a snapshot written by format 2 (the
// build before the namespace): it must restore to the state that produced
// it, with an empty namespace, and be rewritten as the current format.
func TestRestoreFormat2Fixture(t *testing.T) {
	old := restoreFixture(t, 2, format2FixtureLogs(t), func(s *State) {
		if s.AppliedIndex() != 320 || s.NextSeq() != 561 || s.FirstSeq() != 547 || s.SessionCount() != 4 || len(s.Members()) != 3 ||
			len(s.Segments()) != 3 || len(s.Consumers()) != 3 || s.FileCount() != 0 || s.NextGS() != FirstGS || s.NextBlockID() != FirstBlockID {
			t.Fatalf("fixture restored wrong: applied %d next %d first %d", s.AppliedIndex(), s.NextSeq(), s.FirstSeq())
		}
	})
	// The restored member goes on with namespace entries like any other.
	logs := randomNamespaceLogs(t, 5, 100)
	for _, l := range logs {
		c := *l
		c.Index += 320
		old.Apply(&c)
	}
	if old.Halted() != nil {
		t.Fatal(old.Halted())
	}
}

// TestSnapshotNamespaceCorruptionRefused: namespace records that do not fit
// together are refused at restore.
func TestSnapshotNamespaceCorruptionRefused(t *testing.T) {
	d := newBase(t)
	d.ok(EventCacheAdded, opAddCache("/closed/f", 2))
	good := captureSnapshot(d.s)
	good.sortRecords() // the records as written, for the cases to edit
	for _, tc := range []struct {
		name string
		mut  func(sn *snapshot)
	}{
		{"counter below a block", func(sn *snapshot) { sn.header.NextGs = FirstGS }},
		{"orphan block", func(sn *snapshot) {
			sn.blocks = append(sn.blocks, &pb.BlockRecord{Id: FirstBlockID + 99, Gs: FirstGS, Path: "/nope", State: stateComplete})
			sn.header.BlockCount++
		}},
		{"file lists a missing block", func(sn *snapshot) {
			sn.files = append(sn.files, &pb.FileRecord{Path: "/x", BlockIds: []uint64{7}})
			sn.header.FileCount++
		}},
		{"open without holder", func(sn *snapshot) {
			sn.files = append(sn.files, &pb.FileRecord{Path: "/x", UnderConstruction: true})
			sn.header.FileCount++
		}},
		{"file and directory", func(sn *snapshot) {
			sn.files = append(sn.files, &pb.FileRecord{Path: "/closed"})
			sn.header.FileCount++
		}},
		{"directive id at the counter", func(sn *snapshot) { sn.header.NextDirectiveId = 1 }},
		{"directive counter zero", func(sn *snapshot) { sn.header.NextDirectiveId = 0 }},
		{"directive with a bad path", func(sn *snapshot) { sn.directives = []*pb.CacheDirective{{Id: 1, Path: "rel", Replication: 1}} }},
		{"directive replication 0", func(sn *snapshot) { sn.directives = []*pb.CacheDirective{{Id: 1, Path: "/closed/f"}} }},
		{"two directives for one path", func(sn *snapshot) {
			sn.directives = append(sn.directives, &pb.CacheDirective{Id: 0, Path: "/closed/f", Replication: 1})
			sn.header.DirectiveCount++
		}},
		{"directive count short", func(sn *snapshot) { sn.header.DirectiveCount = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sn := *good
			sn.header = clone(good.header)
			sn.files = append([]*pb.FileRecord(nil), good.files...)
			sn.blocks = append([]*pb.BlockRecord(nil), good.blocks...)
			sn.directives = append([]*pb.CacheDirective(nil), good.directives...)
			tc.mut(&sn)
			var buf bytes.Buffer
			if err := sn.write(&buf); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadSnapshot(&buf); !errors.Is(err, ErrSnapshotCorrupt) {
				t.Fatalf("restore: %v", err)
			}
		})
	}
}

func clone(h *pb.SnapshotHeader) *pb.SnapshotHeader { return proto.Clone(h).(*pb.SnapshotHeader) }
