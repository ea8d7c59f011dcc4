package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

func TestNamespaceWriteLifecycle(t *testing.T) {
	d := newBase(t)
	if r := d.ok(EventCreate, opCreate("/a/b/f", "w", false)); !r.File.UnderConstruction || r.File.LeaseHolder != "w" || r.File.CtimeUnixNanos != d.now {
		t.Fatalf("create: %v", r)
	}
	b1 := d.ok(EventAddBlock, opAdd("/a/b/f", "w", nil, nil, "n1", "n2", "n3")).Block
	if b1.Id != d.s.NextBlockID()-1 || b1.Gs != d.s.NextGS()-1 || b1.State != stateUC {
		t.Fatalf("first block %v", b1)
	}
	b2 := d.ok(EventAddBlock, opAdd("/a/b/f", "w", ref(b1, 4096), nil, "n2", "n3")).Block
	if got, _ := d.s.Block(b1.Id); got.State != stateCommitted || got.NumBytes != 4096 {
		t.Fatalf("previous block after add: %v", got)
	}
	// The third block needs the first COMPLETE: the leader vouches for it.
	d.refuse(opAdd("/a/b/f", "w", ref(b2, 4096), nil, "n1"), ErrNotReplicatedYet, KindUnavailable)
	b3 := d.ok(EventAddBlock, opAdd("/a/b/f", "w", ref(b2, 4096), []uint64{b1.Id}, "n1")).Block
	// Complete waits for every block.
	d.refuse(opComplete("/a/b/f", "w", ref(b3, 10), b2.Id), ErrNotReplicatedYet, KindUnavailable)
	r := d.ok(EventComplete, opComplete("/a/b/f", "w", ref(b3, 10), b2.Id, b3.Id))
	if !r.Closed || r.File.UnderConstruction || r.File.LeaseHolder != "" || r.File.Length != 4096*2+10 || r.File.BlockCount != 3 {
		t.Fatalf("complete: %v", r)
	}
	// A retried complete on the closed file succeeds unchanged (HDFS-3031).
	if r := d.unchanged(opComplete("/a/b/f", "w", ref(b3, 10))); !r.Closed {
		t.Fatalf("retried complete: %v", r)
	}
	blocks, _ := d.s.BlocksOfFile("/a/b/f")
	for _, b := range blocks {
		if b.State != stateComplete {
			t.Fatalf("block of a closed file: %v", b)
		}
	}
	// Append reopens the partial last block under a fresh GS.
	gs := d.s.NextGS()
	r = d.ok(EventAppend, opAppend("/a/b/f", "w2"))
	if r.Block.GetId() != b3.Id || r.Block.Gs != gs || r.Block.Gs <= b3.Gs || r.Block.State != stateUC || r.Block.NumBytes != 10 || r.File.LeaseHolder != "w2" {
		t.Fatalf("append: %v", r)
	}
	b3 = r.Block
	d.ok(EventComplete, opComplete("/a/b/f", "w2", ref(b3, 4096), b3.Id))
	// A full last block: append reopens nothing; the next AddBlock starts a block.
	if r := d.ok(EventAppend, opAppend("/a/b/f", "w3")); r.Block != nil {
		t.Fatalf("append after a full block: %v", r)
	}
	b4 := d.ok(EventAddBlock, opAdd("/a/b/f", "w3", ref(b3, 4096), nil, "n4")).Block
	d.ok(EventAbandonBlock, opAbandon("/a/b/f", "w3", b4.Id))
	d.ok(EventComplete, opComplete("/a/b/f", "w3", ref(b3, 4096)))

	// Listing: implicit directories, sorted, paged.
	d.ok(EventCreate, opCreate("/a/c", "w", false))
	d.ok(EventCreate, opCreate("/a/a/x", "w", false))
	names := func(es []ListEntry) (out []string) {
		for _, e := range es {
			if e.Dir {
				out = append(out, e.Path+"/")
			} else {
				out = append(out, e.Path)
			}
		}
		return out
	}
	es, err := d.s.List("/a", "", 0)
	if got := strings.Join(names(es), " "); err != nil || got != "/a/a/ /a/b/ /a/c" {
		t.Fatalf("ls /a: %q %v", got, err)
	}
	es, _ = d.s.List("/a", "a", 1)
	if got := strings.Join(names(es), " "); got != "/a/b/" {
		t.Fatalf("ls /a after a limit 1: %q", got)
	}
	es, _ = d.s.List("/", "", 0)
	if got := strings.Join(names(es), " "); got != "/a/ /closed/ /open/ /rec/" {
		t.Fatalf("ls /: %q", got)
	}
	if es, _ := d.s.List("/a/c", "", 0); len(es) != 1 || es[0].File.Path != "/a/c" {
		t.Fatalf("ls of a file: %v", es)
	}
	if _, err := d.s.List("/nope", "", 0); !errors.Is(err, ErrFileNotFound) {
		t.Fatalf("ls of nothing: %v", err)
	}

	// Delete of a directory needs recursive; it returns every block with
	// its locations, and empties the directories.
	d.refuse(opDelete("/a", false), ErrDirectoryNotEmpty, KindFailedPrecondition)
	r = d.ok(EventDelete, opDelete("/a", true))
	if r.RemovedFiles != 3 || len(r.RemovedBlocks) != 3 || r.RemovedBlocks[0].Id != b1.Id || len(r.RemovedBlocks[0].Locations) != 3 {
		t.Fatalf("delete: %v", r)
	}
	if _, ok := d.s.Block(b1.Id); ok {
		t.Fatal("block of a deleted file still there")
	}
	if _, err := d.s.List("/a", "", 0); !errors.Is(err, ErrFileNotFound) {
		t.Fatalf("deleted directory still listed: %v", err)
	}
	// Overwrite replaces a closed file and returns its blocks.
	r = d.ok(EventCreate, opCreate("/closed/f", "w", true))
	if len(r.RemovedBlocks) != 2 || r.File.BlockCount != 0 {
		t.Fatalf("overwrite: %v", r)
	}
}

func TestNamespacePipelineRecovery(t *testing.T) {
	d := newBase(t)
	b := d.open
	r := d.ok(EventUpdateBlockForPipeline, opPipelineGS("/open/f", "c1", b.Id))
	g1 := r.NewGs
	if g1 <= b.Gs || g1 != d.s.NextGS()-1 {
		t.Fatalf("pipeline GS %d (block GS %d)", g1, b.Gs)
	}
	if got, _ := d.s.Block(b.Id); got.Gs != b.Gs {
		t.Fatal("update block for pipeline changed the block's GS")
	}
	g2 := d.ok(EventUpdateBlockForPipeline, opPipelineGS("/open/f", "c1", b.Id)).NewGs
	nb := d.ok(EventUpdatePipeline, opPipeline("/open/f", "c1", b.Id, b.Gs, g2, 512, "n1", "n4")).Block
	if nb.Gs != g2 || nb.NumBytes != 512 || strings.Join(nb.ExpectedLocations, ",") != "n1,n4" {
		t.Fatalf("updated block %v", nb)
	}
	// The older pipeline's update is stale now, and so is a repeat.
	d.refuse(opPipeline("/open/f", "c1", b.Id, b.Gs, g1, 512, "n1", "n2"), ErrStaleGS, KindFailedPrecondition)
	d.refuse(opPipeline("/open/f", "c1", b.Id, g1, g2, 512, "n1", "n2"), ErrStaleGS, KindFailedPrecondition)
	// The GS must have been allocated.
	d.refuse(opPipeline("/open/f", "c1", b.Id, g2, d.s.NextGS(), 512, "n1"), ErrInvalidGS, KindInvalidArgument)
	// The length never shrinks.
	g3 := d.ok(EventUpdateBlockForPipeline, opPipelineGS("/open/f", "c1", b.Id)).NewGs
	d.refuse(opPipeline("/open/f", "c1", b.Id, g2, g3, 100, "n1"), ErrBlockLength, KindOutOfRange)
	// Commit with the pipeline's GS.
	d.refuse(opComplete("/open/f", "c1", &pb.BlockRef{Id: b.Id, Gs: b.Gs, NumBytes: 512}, b.Id), ErrStaleGS, KindFailedPrecondition)
	d.ok(EventComplete, opComplete("/open/f", "c1", &pb.BlockRef{Id: b.Id, Gs: g2, NumBytes: 600}, b.Id))
}

func TestNamespaceLeaseRecovery(t *testing.T) {
	d := newBase(t)
	b := d.open
	deadline := d.now + 90e9
	r := d.ok(EventRecoveryStarted, opRecover("/open/f", b.Id, "n2", deadline))
	rec := r.Block.Recovery
	if r.Block.State != stateRecovery || rec.RecoveryId <= b.Gs || rec.RecoveryId != d.s.NextGS()-1 || rec.Attempt != 1 || rec.Primary != "n2" ||
		rec.DeadlineUnixNanos != deadline || r.File.LeaseHolder != RecoveryLeaseHolder {
		t.Fatalf("start recovery: %v", r)
	}
	if ur := d.s.BlocksUnderRecovery(); len(ur) != 2 || ur[0].Id != b.Id || len(d.s.RecoveriesOfPrimary("n2")) != 1 {
		t.Fatalf("blocks under recovery %v", ur)
	}
	if h := d.s.FilesOfHolder(RecoveryLeaseHolder); len(h) != 2 || h[0].Path != "/open/f" || h[0].Last.Id != b.Id || len(d.s.FilesOfHolder("c1")) != 0 {
		t.Fatalf("files of the recovery holder: %v", h)
	}
	// The writer is fenced.
	d.refuse(opAdd("/open/f", "c1", ref(b, 10), nil, "n1"), ErrNotLeaseHolder, KindFailedPrecondition)
	d.refuse(opPipelineGS("/open/f", "c1", b.Id), ErrNotLeaseHolder, KindFailedPrecondition)
	d.refuse(opComplete("/open/f", "c1", ref(b, 10)), ErrNotLeaseHolder, KindFailedPrecondition)
	d.refuse(opAppend("/open/f", "c3"), ErrRecoveryInProgress, KindUnavailable)
	// A re-drive before the deadline is refused; after it, a new id preempts.
	d.refuse(opRecover("/open/f", b.Id, "n3", deadline+90e9), ErrRecoveryInProgress, KindUnavailable)
	d.now = deadline
	r = d.ok(EventRecoveryStarted, opRecover("/open/f", b.Id, "n3", d.now+90e9))
	rec2 := r.Block.Recovery
	if rec2.RecoveryId <= rec.RecoveryId || rec2.Attempt != 2 || strings.Join(rec2.TriedPrimaries, ",") != "n2,n3" || rec2.StartedUnixNanos != rec.StartedUnixNanos {
		t.Fatalf("re-drive: %v", rec2)
	}
	// The preempted attempt's commit changes nothing (invariant 5).
	err := d.refuse(opCommitSync(b.Id, b.Gs, rec.RecoveryId, 300, true, false, "n2", "n3"), ErrStaleRecovery, KindAborted)
	if !errors.Is(err, lr.ErrAborted) || lr.ReasonOf(err) != lr.ReasonRecoveryIDMismatch {
		t.Fatalf("stale commit error %v", err)
	}
	// The current one closes the file: COMPLETE at the recovery id.
	r = d.ok(EventRecoveryCommitted, opCommitSync(b.Id, b.Gs, rec2.RecoveryId, 300, true, false, "n3", "n1", "ghost"))
	if !r.Closed || r.Block.State != stateComplete || r.Block.Gs != rec2.RecoveryId || r.Block.NumBytes != 300 || r.Block.Recovery != nil ||
		strings.Join(r.Block.ExpectedLocations, ",") != "n3,n1" || strings.Join(r.StaleLocations, ",") != "n2" || r.File.LeaseHolder != "" {
		t.Fatalf("commit: %v", r)
	}
	// A retry (the primary resends after a failover) is answered unchanged;
	// the old id is still refused.
	if r := d.unchanged(opCommitSync(b.Id, b.Gs, rec2.RecoveryId, 300, true, false, "n3", "n1")); !r.Closed {
		t.Fatalf("retried commit: %v", r)
	}
	d.refuse(opCommitSync(b.Id, b.Gs, rec.RecoveryId, 300, true, false, "n2"), ErrNotUnderConstruction, KindFailedPrecondition)
	if len(d.s.BlocksUnderRecovery()) != 1 {
		t.Fatal("recovery still listed")
	}
	// A recovery of a block with no data deletes it.
	r = d.ok(EventRecoveryCommitted, opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 0, true, true))
	if !r.Closed || len(r.RemovedBlocks) != 1 || r.File.BlockCount != 0 {
		t.Fatalf("delete commit: %v", r)
	}
	d.unchanged(opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 0, true, true))
}

func TestNamespaceReleaseLease(t *testing.T) {
	d := newBase(t)
	// An open file without blocks closes at once.
	d.ok(EventCreate, opCreate("/empty", "c9", false))
	d.refuse(opRelease("/empty", "c8"), ErrNotLeaseHolder, KindFailedPrecondition)
	if r := d.ok(EventLeaseReleased, opRelease("/empty", "c9")); !r.Closed || r.File.UnderConstruction {
		t.Fatalf("release: %v", r)
	}
	d.unchanged(opRelease("/empty", "c9"))
	// An UNDER_CONSTRUCTION last block with locations needs a recovery.
	d.refuse(opRelease("/open/f", "c1"), ErrRecoveryNeeded, KindFailedPrecondition)
	d.refuse(opRelease("/rec/f", RecoveryLeaseHolder), ErrRecoveryInProgress, KindUnavailable)
	// A COMMITTED last block closes once the leader vouches for it.
	b2 := d.ok(EventAddBlock, opAdd("/open/f", "c1", ref(d.open, 50), nil, "n4")).Block
	d.ok(EventAbandonBlock, opAbandon("/open/f", "c1", b2.Id))
	d.refuse(opRelease("/open/f", "c1"), ErrNotReplicatedYet, KindUnavailable)
	d.refuse(opRecover("/open/f", d.open.Id, "n1", d.now+1e9), ErrNotReplicatedYet, KindUnavailable)
	if r := d.ok(EventLeaseReleased, opRelease("/open/f", "c1", d.open.Id)); !r.Closed {
		t.Fatalf("release of a committed file: %v", r)
	}
	if b, _ := d.s.Block(d.open.Id); b.State != stateComplete {
		t.Fatalf("committed block after release: %v", b)
	}
	// A last block never written (recovered to no known node, length 0) is
	// dropped by the release.
	d.now = d.rec.Recovery.DeadlineUnixNanos
	d.ok(EventRecoveryCommitted, opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 0, false, false, "ghost"))
	r := d.ok(EventLeaseReleased, opRelease("/rec/f", RecoveryLeaseHolder))
	if !r.Closed || len(r.RemovedBlocks) != 1 || r.RemovedBlocks[0].Id != d.rec.Id || r.File.BlockCount != 0 {
		t.Fatalf("release of an empty last block: %v", r)
	}
}

func TestNamespaceRegisterNode(t *testing.T) {
	d := newBase(t)
	n1, _ := d.s.Node("n1")
	// A restart at the same addresses, or the same instance elsewhere.
	d.ok(EventNodeRegistered, opRegister("n1", "10.0.0.1:7400", "10.0.0.1:7200", "other-instance"))
	r := d.ok(EventNodeRegistered, opRegister("n1", "10.9.9.9:7400", "10.9.9.9:7200", "other-instance"))
	if r.Node.RegisteredUnixNanos != n1.RegisteredUnixNanos || r.Node.UpdatedUnixNanos != d.now || r.Node.GrpcAddr != "10.9.9.9:7400" {
		t.Fatalf("re-registration: %v", r.Node)
	}
	// Another instance from another address may not take the id.
	err := d.refuse(opRegister("n1", "10.0.0.8:7400", "10.0.0.8:7200", "intruder"), ErrNodeIDHeld, KindFailedPrecondition)
	if !strings.Contains(err.Error(), "node id held by another node") {
		t.Fatal(err)
	}
	d.refuse(opRegister("n1", "10.0.0.8:7400", "10.0.0.8:7200", ""), ErrNodeIDHeld, KindFailedPrecondition)
	if ns := d.s.Nodes(); len(ns) != 4 || ns[0].Id != "n1" || ns[3].Id != "n4" {
		t.Fatalf("nodes %v", ns)
	}
}

// TestNamespaceRefusals: every refusal with its error and kind; each
// changes nothing (ns.refuse checks the digest and the journal).
func TestNamespaceRefusals(t *testing.T) {
	long := "/" + strings.Repeat("x", 256)
	deep := strings.Repeat("/abcdefgh", 512)
	type tc struct {
		name string
		op   func(d *baseState) *pb.NamespaceOp
		want error
		kind Kind
	}
	cases := []tc{
		{"no op", func(*baseState) *pb.NamespaceOp { return &pb.NamespaceOp{} }, ErrInvalidNamespaceOp, KindInvalidArgument},
		{"relative path", func(*baseState) *pb.NamespaceOp { return opCreate("a/b", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"dot", func(*baseState) *pb.NamespaceOp { return opCreate("/a/./b", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"dotdot", func(*baseState) *pb.NamespaceOp { return opCreate("/a/../b", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"empty component", func(*baseState) *pb.NamespaceOp { return opCreate("/a//b", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"trailing slash", func(*baseState) *pb.NamespaceOp { return opCreate("/a/", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"nul", func(*baseState) *pb.NamespaceOp { return opCreate("/a\x00b", "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"long component", func(*baseState) *pb.NamespaceOp { return opCreate(long, "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"long path", func(*baseState) *pb.NamespaceOp { return opCreate(deep, "w", false) }, ErrInvalidPath, KindInvalidArgument},
		{"create root", func(*baseState) *pb.NamespaceOp { return opCreate("/", "w", false) }, ErrIsDirectory, KindAlreadyExists},
		{"replication 0", func(*baseState) *pb.NamespaceOp {
			op := opCreate("/n", "w", false)
			op.GetCreateFile().Replication = 0
			return op
		}, ErrInvalidReplication, KindInvalidArgument},
		{"replication 17", func(*baseState) *pb.NamespaceOp {
			op := opCreate("/n", "w", false)
			op.GetCreateFile().Replication = 17
			return op
		}, ErrInvalidReplication, KindInvalidArgument},
		{"block size 1000", func(*baseState) *pb.NamespaceOp {
			op := opCreate("/n", "w", false)
			op.GetCreateFile().BlockSize = 1000
			return op
		}, ErrInvalidBlockSize, KindInvalidArgument},
		{"block size 2 GiB", func(*baseState) *pb.NamespaceOp {
			op := opCreate("/n", "w", false)
			op.GetCreateFile().BlockSize = 2 << 30
			return op
		}, ErrInvalidBlockSize, KindInvalidArgument},
		{"no client", func(*baseState) *pb.NamespaceOp { return opCreate("/n", "", false) }, ErrInvalidClientName, KindInvalidArgument},
		{"reserved client", func(*baseState) *pb.NamespaceOp { return opCreate("/n", RecoveryLeaseHolder, false) }, ErrInvalidClientName, KindInvalidArgument},
		{"reserved client prefix", func(*baseState) *pb.NamespaceOp { return opCreate("/n", "logbook.x", false) }, ErrInvalidClientName, KindInvalidArgument},
		{"exists", func(*baseState) *pb.NamespaceOp { return opCreate("/closed/f", "w", false) }, ErrFileExists, KindAlreadyExists},
		{"is a directory", func(*baseState) *pb.NamespaceOp { return opCreate("/closed", "w", true) }, ErrIsDirectory, KindAlreadyExists},
		{"parent is a file", func(*baseState) *pb.NamespaceOp { return opCreate("/closed/f/g", "w", false) }, ErrParentNotDirectory, KindFailedPrecondition},
		{"overwrite open", func(*baseState) *pb.NamespaceOp { return opCreate("/open/f", "w", true) }, ErrFileBeingWritten, KindFailedPrecondition},
		{"overwrite own", func(*baseState) *pb.NamespaceOp { return opCreate("/open/f", "c1", true) }, ErrAlreadyLeaseHolder, KindFailedPrecondition},
		{"overwrite recovering", func(*baseState) *pb.NamespaceOp { return opCreate("/rec/f", "w", true) }, ErrRecoveryInProgress, KindUnavailable},

		{"add: no file", func(*baseState) *pb.NamespaceOp { return opAdd("/nope", "c1", nil, nil, "n1") }, ErrFileNotFound, KindNotFound},
		{"add: closed", func(*baseState) *pb.NamespaceOp { return opAdd("/closed/f", "c1", nil, nil, "n1") }, ErrNotUnderConstruction, KindFailedPrecondition},
		{"add: not holder", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c2", ref(d.open, 1), nil, "n1") }, ErrNotLeaseHolder, KindFailedPrecondition},
		{"add: no targets", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", ref(d.open, 1), nil) }, ErrInvalidTargets, KindInvalidArgument},
		{"add: too many targets", func(d *baseState) *pb.NamespaceOp {
			return opAdd("/open/f", "c1", ref(d.open, 1), nil, "n1", "n2", "n3", "n4")
		}, ErrInvalidTargets, KindInvalidArgument},
		{"add: duplicate target", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", ref(d.open, 1), nil, "n1", "n1") }, ErrInvalidTargets, KindInvalidArgument},
		{"add: unregistered target", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", ref(d.open, 1), nil, "n9") }, ErrNodeNotFound, KindNotFound},
		{"add: no previous", func(*baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", nil, nil, "n1") }, ErrNotLastBlock, KindFailedPrecondition},
		{"add: wrong previous", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", ref(d.closed1, 1), nil, "n1") }, ErrBlockNotFound, KindNotFound},
		{"add: previous GS", func(d *baseState) *pb.NamespaceOp {
			return opAdd("/open/f", "c1", &pb.BlockRef{Id: d.open.Id, Gs: d.open.Gs - 1, NumBytes: 1}, nil, "n1")
		}, ErrStaleGS, KindFailedPrecondition},
		{"add: previous over block size", func(d *baseState) *pb.NamespaceOp { return opAdd("/open/f", "c1", ref(d.open, 4097), nil, "n1") }, ErrBlockLength, KindOutOfRange},
		{"add: as the recovery holder", func(d *baseState) *pb.NamespaceOp {
			return opAdd("/rec/f", RecoveryLeaseHolder, ref(d.rec, 1), nil, "n1")
		}, ErrInvalidClientName, KindInvalidArgument},

		{"complete: no file", func(*baseState) *pb.NamespaceOp { return opComplete("/nope", "c1", nil) }, ErrFileNotFound, KindNotFound},
		{"complete: closed, other block", func(d *baseState) *pb.NamespaceOp { return opComplete("/closed/f", "c1", ref(d.closed1, 4096)) }, ErrNotUnderConstruction, KindFailedPrecondition},
		{"complete: not holder", func(d *baseState) *pb.NamespaceOp { return opComplete("/open/f", "c2", ref(d.open, 1), d.open.Id) }, ErrNotLeaseHolder, KindFailedPrecondition},
		{"complete: not replicated", func(d *baseState) *pb.NamespaceOp { return opComplete("/open/f", "c1", ref(d.open, 1)) }, ErrNotReplicatedYet, KindUnavailable},
		{"complete: under recovery", func(d *baseState) *pb.NamespaceOp { return opComplete("/rec/f", "c2", ref(d.rec, 1)) }, ErrNotLeaseHolder, KindFailedPrecondition},

		{"append: no file", func(*baseState) *pb.NamespaceOp { return opAppend("/nope", "w") }, ErrFileNotFound, KindNotFound},
		{"append: open", func(*baseState) *pb.NamespaceOp { return opAppend("/open/f", "w") }, ErrFileBeingWritten, KindFailedPrecondition},
		{"append: own", func(*baseState) *pb.NamespaceOp { return opAppend("/open/f", "c1") }, ErrAlreadyLeaseHolder, KindFailedPrecondition},
		{"append: bad targets", func(*baseState) *pb.NamespaceOp { return opAppend("/closed/f", "w", "n9") }, ErrNodeNotFound, KindNotFound},

		{"delete: no file", func(*baseState) *pb.NamespaceOp { return opDelete("/nope", true) }, ErrFileNotFound, KindNotFound},
		{"delete: directory", func(*baseState) *pb.NamespaceOp { return opDelete("/closed", false) }, ErrDirectoryNotEmpty, KindFailedPrecondition},
		{"delete: bad path", func(*baseState) *pb.NamespaceOp { return opDelete("closed", true) }, ErrInvalidPath, KindInvalidArgument},

		{"abandon: not last", func(d *baseState) *pb.NamespaceOp { return opAbandon("/open/f", "c1", d.closed1.Id) }, ErrBlockNotFound, KindNotFound},
		{"abandon: not holder", func(d *baseState) *pb.NamespaceOp { return opAbandon("/open/f", "c2", d.open.Id) }, ErrNotLeaseHolder, KindFailedPrecondition},
		{"abandon: closed", func(d *baseState) *pb.NamespaceOp { return opAbandon("/closed/f", "c1", d.closed2.Id) }, ErrNotUnderConstruction, KindFailedPrecondition},

		{"pipeline gs: not holder", func(d *baseState) *pb.NamespaceOp { return opPipelineGS("/open/f", "c2", d.open.Id) }, ErrNotLeaseHolder, KindFailedPrecondition},
		{"pipeline gs: wrong block", func(d *baseState) *pb.NamespaceOp { return opPipelineGS("/open/f", "c1", d.closed1.Id) }, ErrBlockNotFound, KindNotFound},
		{"pipeline gs: closed", func(d *baseState) *pb.NamespaceOp { return opPipelineGS("/closed/f", "c1", d.closed2.Id) }, ErrNotUnderConstruction, KindFailedPrecondition},
		{"pipeline: not newer", func(d *baseState) *pb.NamespaceOp {
			return opPipeline("/open/f", "c1", d.open.Id, d.open.Gs, d.open.Gs, 1, "n1")
		}, ErrInvalidRecovery, KindInvalidArgument},
		{"pipeline: unregistered", func(d *baseState) *pb.NamespaceOp {
			return opPipeline("/open/f", "c1", d.open.Id, d.open.Gs, d.open.Gs+1, 1, "n9")
		}, ErrNodeNotFound, KindNotFound},
		{"pipeline: no nodes", func(d *baseState) *pb.NamespaceOp {
			return opPipeline("/open/f", "c1", d.open.Id, d.open.Gs, d.open.Gs+1, 1)
		}, ErrInvalidTargets, KindInvalidArgument},

		{"recover: closed", func(d *baseState) *pb.NamespaceOp { return opRecover("/closed/f", d.closed2.Id, "n2", d.now+1e12) }, ErrNotUnderConstruction, KindFailedPrecondition},
		{"recover: not last", func(d *baseState) *pb.NamespaceOp { return opRecover("/open/f", d.closed1.Id, "n1", d.now+1e12) }, ErrBlockNotFound, KindNotFound},
		{"recover: primary not expected", func(d *baseState) *pb.NamespaceOp { return opRecover("/open/f", d.open.Id, "n4", d.now+1e12) }, ErrInvalidRecovery, KindInvalidArgument},
		{"recover: past deadline", func(d *baseState) *pb.NamespaceOp { return opRecover("/open/f", d.open.Id, "n1", d.now) }, ErrInvalidRecovery, KindInvalidArgument},
		{"recover: in progress", func(d *baseState) *pb.NamespaceOp { return opRecover("/rec/f", d.rec.Id, "n2", d.now+1e12) }, ErrRecoveryInProgress, KindUnavailable},
		{"recover: bad holder", func(d *baseState) *pb.NamespaceOp {
			op := opRecover("/open/f", d.open.Id, "n1", d.now+1e12)
			op.GetStartRecovery().NewHolder = "logbook.me"
			return op
		}, ErrInvalidClientName, KindInvalidArgument},

		{"commit: id not above the GS", func(d *baseState) *pb.NamespaceOp {
			return opCommitSync(d.rec.Id, d.rec.Gs, d.recID-1, 1, true, false, "n1")
		}, ErrInvalidRecovery, KindInvalidArgument},
		{"commit: other id", func(d *baseState) *pb.NamespaceOp {
			return opCommitSync(d.rec.Id, d.rec.Gs, d.recID+7, 1, true, false, "n1")
		}, ErrStaleRecovery, KindAborted},
		{"commit: not under recovery", func(d *baseState) *pb.NamespaceOp {
			return opCommitSync(d.open.Id, d.open.Gs, d.open.Gs+1, 1, true, false, "n1")
		}, ErrBlockState, KindFailedPrecondition},
		{"commit: no block", func(*baseState) *pb.NamespaceOp { return opCommitSync(1, 1000, 1001, 1, true, false, "n1") }, ErrBlockNotFound, KindNotFound},
		{"commit: no targets", func(d *baseState) *pb.NamespaceOp { return opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 1, true, false) }, ErrInvalidTargets, KindInvalidArgument},
		{"commit: old GS", func(d *baseState) *pb.NamespaceOp {
			return opCommitSync(d.rec.Id, d.rec.Gs-1, d.recID, 1, true, false, "n1")
		}, ErrStaleGS, KindInvalidArgument},
		{"commit: over block size", func(d *baseState) *pb.NamespaceOp {
			return opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 5000, true, false, "n1")
		}, ErrBlockLength, KindOutOfRange},
		{"commit: gs not the id", func(d *baseState) *pb.NamespaceOp {
			op := opCommitSync(d.rec.Id, d.rec.Gs, d.recID, 1, true, false, "n1")
			op.GetCommitBlockSync().NewGs++
			return op
		}, ErrInvalidRecovery, KindInvalidArgument},

		{"release: closed file other holder", func(*baseState) *pb.NamespaceOp { return opRelease("/nope", "c1") }, ErrFileNotFound, KindNotFound},
		{"release: no holder", func(*baseState) *pb.NamespaceOp { return opRelease("/open/f", "") }, ErrInvalidClientName, KindInvalidArgument},

		{"register: no node", func(*baseState) *pb.NamespaceOp {
			return &pb.NamespaceOp{Op: &pb.NamespaceOp_RegisterNode{RegisterNode: &pb.RegisterNodeOp{}}}
		}, ErrInvalidNode, KindInvalidArgument},
		{"register: bad id", func(*baseState) *pb.NamespaceOp { return opRegister("-x", "a:1", "a:2", "") }, ErrInvalidNode, KindInvalidArgument},
		{"register: no grpc", func(*baseState) *pb.NamespaceOp { return opRegister("n9", "", "a:2", "") }, ErrInvalidNode, KindInvalidArgument},
		{"register: held", func(*baseState) *pb.NamespaceOp { return opRegister("n2", "b:1", "b:2", "inst-x") }, ErrNodeIDHeld, KindFailedPrecondition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newBase(t)
			d.refuse(c.op(d), c.want, c.kind)
		})
	}
}

func TestNamespaceSessions(t *testing.T) {
	d := newBase(t)
	c := &pb.NamespaceCommand{ClientId: "sdk-1", RequestSeq: 1, Op: opCreate("/s/f", "w", false)}
	r1 := d.cmd(c)
	if r1.Err != nil || r1.Duplicate {
		t.Fatal(r1.Err)
	}
	next, digest := d.s.NextSeq(), d.s.digest(false)
	r2 := d.cmd(c)
	if !r2.Duplicate || r2.Seq != r1.Seq || r2.Err != nil || d.s.NextSeq() != next || d.s.digest(false) != digest {
		t.Fatalf("retry: %+v", r2)
	}
	if r2.Result.File.Path != "/s/f" || r2.Result.File.CtimeUnixNanos != r1.Result.File.CtimeUnixNanos {
		t.Fatalf("retry result %v", r2.Result)
	}
	// A refused request does not enter the session: a retry is re-evaluated.
	bad := &pb.NamespaceCommand{ClientId: "sdk-1", RequestSeq: 2, Op: opCreate("/s/f", "w", false)}
	if r := d.cmd(bad); !errors.Is(r.Err, ErrFileExists) {
		t.Fatal(r.Err)
	}
	if d.s.digest(false) != digest {
		t.Fatal("a refused request changed the session")
	}
	// Acked requests are refused; the retry of an acked one too.
	d.cmd(&pb.NamespaceCommand{ClientId: "sdk-1", RequestSeq: 3, AckedSeq: 1, Op: opCreate("/s/g", "w", false)})
	if r := d.cmd(c); !errors.Is(r.Err, ErrSessionAcked) {
		t.Fatalf("acked retry: %v", r.Err)
	}
	// A kept result whose audit event was dropped by a reset has expired.
	d.idx++
	cmd, _ := DecodeCommand(cmdEntry(t, d.idx, pb.CommandType_COMMAND_TYPE_RESET, &pb.ResetCommand{}).Data)
	d.s.Apply(d.idx, cmd)
	if r := d.cmd(&pb.NamespaceCommand{ClientId: "sdk-1", RequestSeq: 3, Op: opCreate("/s/g", "w", false)}); !errors.Is(r.Err, ErrSessionResultExpired) {
		t.Fatalf("retry after reset: %v", r.Err)
	}
	// An append's seq answered as a namespace retry is refused.
	d.idx++
	cmd, _ = DecodeCommand(appendEntry(t, d.idx, op("sdk-1", 4, 0, "e")).Data)
	d.s.Apply(d.idx, cmd)
	if r := d.cmd(&pb.NamespaceCommand{ClientId: "sdk-1", RequestSeq: 4, Op: opCreate("/s/h", "w", false)}); !errors.Is(r.Err, ErrInvalidNamespaceOp) {
		t.Fatalf("seq of an append: %v", r.Err)
	}
}

// TestReservedEventPrefix: once the namespace began, client appends may
// not forge audit events; before it they apply as earlier builds did.
func TestReservedEventPrefix(t *testing.T) {
	d := newNS(t)
	d.idx++
	cmd, _ := DecodeCommand(appendEntry(t, d.idx, op("", 0, 0, "logbook.fs.create")).Data)
	if res, _ := d.s.Apply(d.idx, cmd); res.([]Result)[0].Err != nil {
		t.Fatalf("before the namespace: %v", res)
	}
	d.ok(EventNodeRegistered, opRegister("n1", "a:1", "a:2", ""))
	if d.s.AuditFromSeq() != 2 {
		t.Fatalf("audit from %d", d.s.AuditFromSeq())
	}
	d.idx++
	cmd, _ = DecodeCommand(appendEntry(t, d.idx, op("", 0, 0, "ok"), op("", 0, 0, "logbook.recovery.started")).Data)
	res, _ := d.s.Apply(d.idx, cmd)
	rs := res.([]Result)
	if rs[0].Err != nil || !errors.Is(rs[1].Err, ErrReservedEventType) || !errors.Is(rs[1].Err, ErrInvalidEvent) {
		t.Fatalf("after the namespace: %+v", rs)
	}
}

func TestRuleEnumsMatch(t *testing.T) {
	for _, p := range []struct {
		a pb.BlockState
		b lr.BlockState
	}{{stateUC, lr.BlockUnderConstruction}, {stateRecovery, lr.BlockUnderRecovery}, {stateCommitted, lr.BlockCommitted}, {stateComplete, lr.BlockComplete}} {
		if toRuleState(p.a) != p.b || fromRuleState(p.b) != p.a {
			t.Fatalf("%v and %v differ", p.a, p.b)
		}
	}
}

// TestNamespaceNeedsFormat3: a namespace op in an entry of an older log
// format (proposed before every voter could read namespace commands) is
// refused and changes nothing.
func TestNamespaceNeedsFormat3(t *testing.T) {
	f := New(nil)
	op := &pb.NamespaceCommand{Op: &pb.NamespaceOp{Op: &pb.NamespaceOp_CreateFile{CreateFile: &pb.CreateFileOp{Path: "/a", Replication: 3, BlockSize: 1 << 20, ClientName: "c"}}}}
	for _, v := range []uint32{1, 2} {
		data, err := EncodeCommandVersion(v, pb.CommandType_COMMAND_TYPE_NAMESPACE, op, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp := f.Apply(&raft.Log{Index: uint64(v), Type: raft.LogCommand, Data: data})
		r, ok := resp.(NamespaceResult)
		if !ok || !errors.Is(r.Err, ErrNamespaceFormat) || KindOf(r.Err) != KindFailedPrecondition {
			t.Fatalf("format %d: %#v", v, resp)
		}
	}
	var files int
	var next uint64
	f.View(func(s *State) { files, next = s.FileCount(), s.NextSeq() })
	if f.Halted() != nil || files != 0 || next != 1 {
		t.Fatalf("halted %v, %d files, next seq %d (no audit event expected)", f.Halted(), files, next)
	}
}
