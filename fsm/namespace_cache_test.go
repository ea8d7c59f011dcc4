package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

func opAddCache(path string, replication uint32) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_AddCacheDirective{AddCacheDirective: &pb.AddCacheDirectiveOp{Path: path, Replication: replication}}}
}

func opRemoveCache(id uint64) *pb.NamespaceOp {
	return &pb.NamespaceOp{Op: &pb.NamespaceOp_RemoveCacheDirective{RemoveCacheDirective: &pb.RemoveCacheDirectiveOp{Id: id}}}
}

func directiveIDs(s *State) []uint64 {
	var out []uint64
	for _, d := range s.CacheDirectives() {
		out = append(out, d.Id)
	}
	return out
}

// TestCacheDirectiveOps: accepted adds and removes journal one
// logbook.cache.* event each and hand out ids from the counter (never
// reused); every refusal has its kind and changes nothing.
func TestCacheDirectiveOps(t *testing.T) {
	d := newBase(t)
	r := d.ok(EventCacheAdded, opAddCache("/closed/f", 2))
	if dir := r.Directive; dir.GetId() != FirstDirectiveID || dir.Path != "/closed/f" || dir.Replication != 2 || dir.CreatedUnixNanos != d.now {
		t.Fatalf("added %v", dir)
	}
	// An open file may have a directive: its COMPLETE blocks are cached.
	d.ok(EventCacheAdded, opAddCache("/open/f", 3))

	for _, tc := range []struct {
		name string
		op   *pb.NamespaceOp
		want error
		kind Kind
	}{
		{"empty path", opAddCache("", 1), ErrInvalidPath, KindInvalidArgument},
		{"relative path", opAddCache("closed/f", 1), ErrInvalidPath, KindInvalidArgument},
		{"oversize path", opAddCache("/"+strings.Repeat("a/", MaxPathBytes/2), 1), ErrInvalidPath, KindInvalidArgument},
		{"root", opAddCache("/", 1), ErrIsDirectory, KindAlreadyExists},
		{"unknown path", opAddCache("/nope", 1), ErrFileNotFound, KindNotFound},
		{"directory", opAddCache("/closed", 1), ErrFileNotFound, KindNotFound},
		{"replication 0", opAddCache("/rec/f", 0), ErrInvalidCacheReplication, KindInvalidArgument},
		{"above the file's replication", opAddCache("/rec/f", 4), ErrInvalidCacheReplication, KindInvalidArgument},
		{"above the cap", opAddCache("/rec/f", MaxCacheReplication+1), ErrInvalidCacheReplication, KindInvalidArgument},
		{"duplicate path", opAddCache("/closed/f", 1), ErrDirectiveExists, KindAlreadyExists},
		{"remove unknown id", opRemoveCache(99), ErrDirectiveNotFound, KindNotFound},
		{"remove id 0", opRemoveCache(0), ErrDirectiveNotFound, KindNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { d.t = t; d.refuse(tc.op, tc.want, tc.kind) })
	}
	d.t = t

	if got := directiveIDs(d.s); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("directives %v", got)
	}
	if dir, ok := d.s.CacheDirectiveOfPath("/open/f"); !ok || dir.Id != 2 {
		t.Fatalf("directive of /open/f: %v %v", dir, ok)
	}
	r = d.ok(EventCacheRemoved, opRemoveCache(1))
	if r.Directive.GetId() != 1 || r.Directive.Path != "/closed/f" {
		t.Fatalf("removed %v", r.Directive)
	}
	d.refuse(opRemoveCache(1), ErrDirectiveNotFound, KindNotFound)
	if r := d.ok(EventCacheAdded, opAddCache("/closed/f", 1)); r.Directive.Id != 3 {
		t.Fatalf("re-added as %d: ids are never reused", r.Directive.Id)
	}
	// A directive names a path: it outlives the file.
	d.ok(EventDelete, opDelete("/closed", true))
	if _, ok := d.s.CacheDirectiveOfPath("/closed/f"); !ok || len(d.s.CacheDirectives()) != 2 {
		t.Fatalf("directives after the delete: %v", directiveIDs(d.s))
	}
}

// TestCacheDirectiveLimit: past MaxCacheDirectives an add is
// ResourceExhausted and changes nothing.
func TestCacheDirectiveLimit(t *testing.T) {
	d := newNS(t)
	for i := 0; i < MaxCacheDirectives; i++ {
		p := fmt.Sprintf("/c/f%05d", i)
		if r := d.do(opCreate(p, "c1", false)); r.Err != nil {
			t.Fatal(r.Err)
		}
		if r := d.do(opAddCache(p, 1)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := d.do(opCreate("/c/last", "c1", false)); r.Err != nil {
		t.Fatal(r.Err)
	}
	d.refuse(opAddCache("/c/last", 1), ErrTooManyDirectives, KindResourceExhausted)
	d.ok(EventCacheRemoved, opRemoveCache(7))
	d.ok(EventCacheAdded, opAddCache("/c/last", 1))
}

// TestCacheDirectivesNeedFormat4: a cache-directive op in an entry of log
// format 3 (written before every voter could read it) is refused with
// ErrCacheFormat: no directive, no event, no session; the member does not
// halt. The same op in a format 4 entry is accepted.
func TestCacheDirectivesNeedFormat4(t *testing.T) {
	d := newBase(t)
	c := &pb.NamespaceCommand{ClientId: "admin", RequestSeq: 1, Op: opAddCache("/closed/f", 1)}
	data, err := EncodeCommandVersion(NamespaceFormat, pb.CommandType_COMMAND_TYPE_NAMESPACE, c, d.now)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := DecodeCommand(data)
	before, next, sessions := d.s.digest(false), d.s.NextSeq(), d.s.SessionCount()
	d.idx++
	resp, err := d.s.Apply(d.idx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(NamespaceResult)
	if !errors.Is(r.Err, ErrCacheFormat) || KindOf(r.Err) != KindFailedPrecondition {
		t.Fatalf("format 3 cache op: %v", r.Err)
	}
	if d.s.digest(false) != before || d.s.NextSeq() != next || d.s.SessionCount() != sessions || len(d.s.CacheDirectives()) != 0 {
		t.Fatal("a refused format 3 cache op changed the state")
	}
	if r := d.cmd(c); r.Err != nil || r.Result.Directive.GetId() != FirstDirectiveID {
		t.Fatalf("format 4: %+v", r)
	}
}

// cacheLogs is a format-3 history (the base state), a SET_FORMAT to 4
// and cache-directive ops after it; boundary is the index of the
// SET_FORMAT entry.
func cacheLogs(t *testing.T) (logs []*raft.Log, boundary int) {
	g := newNS(t)
	var out []*raft.Log
	rec := func(op *pb.NamespaceOp) {
		out = append(out, nsEntry(t, g.idx+1, g.now+1e6, &pb.NamespaceCommand{Op: op}))
		g.do(op)
	}
	for i := 1; i <= 3; i++ {
		rec(opRegister(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d:7400", i), fmt.Sprintf("10.0.0.%d:7200", i), fmt.Sprintf("inst-%d", i)))
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		rec(opCreate(p, "c1", false))
	}
	g.idx++
	out = append(out, cmdEntry(t, g.idx, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: CacheFormat}))
	boundary = len(out)
	for _, op := range []*pb.NamespaceOp{opAddCache("/a", 2), opAddCache("/b", 3), opAddCache("/b", 1), opRemoveCache(1), opAddCache("/c", 1), opRemoveCache(9)} {
		rec(op)
	}
	return out, boundary
}

// TestCacheDirectivesReplicated: members that apply the same mixed-format
// log hold the same directives and digest; a snapshot on either side of
// the format boundary, restored and replayed, is the same state; the
// snapshot carries the directives and the counter.
func TestCacheDirectivesReplicated(t *testing.T) {
	logs, boundary := cacheLogs(t)
	a, b := New(nil), New(nil)
	a.ApplyBatch(logs)
	for _, l := range logs {
		b.Apply(l)
	}
	var ha, hb [32]byte
	var ids []uint64
	var nextID uint64
	var format uint32
	a.View(func(s *State) {
		ha, ids, nextID, format = s.Hash(), directiveIDs(s), s.NextDirectiveID(), s.LogFormat()
	})
	b.View(func(s *State) { hb = s.Hash() })
	if ha != hb || a.Halted() != nil || fmt.Sprint(ids) != "[2 3]" || nextID != 4 || format != CacheFormat {
		t.Fatalf("members differ (%v) or wrong directives %v next %d format %d halted %v", ha != hb, ids, nextID, format, a.Halted())
	}
	for _, cut := range []int{boundary - 1, boundary, boundary + 2, len(logs)} {
		c := New(nil)
		c.ApplyBatch(logs[:cut])
		r := New(nil)
		if err := r.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, c))}); err != nil {
			t.Fatal(err)
		}
		r.ApplyBatch(logs[cut:])
		var hr [32]byte
		r.View(func(s *State) {
			hr = s.Hash()
			if d, ok := s.CacheDirectiveOfPath("/b"); !ok || d.Id != 2 || d.Replication != 3 {
				t.Fatalf("cut %d: directive of /b %v", cut, d)
			}
		})
		if hr != ha || r.Halted() != nil {
			t.Fatalf("cut %d: snapshot+replay differs from straight apply", cut)
		}
	}
}

// TestCacheDirectivesDigest: a state that never had a directive hashes as
// before the feature (checked against the format-3 fixture); any add
// changes the digest for good, even once removed (the counter moved).
func TestCacheDirectivesDigest(t *testing.T) {
	d := newBase(t)
	h0 := d.s.Hash()
	d.ok(EventCacheAdded, opAddCache("/closed/f", 1))
	h1 := d.s.Hash()
	d.ok(EventCacheRemoved, opRemoveCache(1))
	h2 := d.s.Hash()
	if h0 == h1 || h1 == h2 || h0 == h2 {
		t.Fatal("directive changes do not show in the digest")
	}
}

// TestRestoreFormat3Fixture reads a snapshot written by format 3 (the
// build before cache directives): it restores to the state that produced
// it, with no directives, is rewritten as the current format and accepts
// directives after.
func TestRestoreFormat3Fixture(t *testing.T) {
	old := restoreFixture(t, 3, format3FixtureLogs(t), func(s *State) {
		if s.AppliedIndex() != 621 || s.LogFormat() != 3 || s.FileCount() == 0 || len(s.CacheDirectives()) != 0 || s.NextDirectiveID() != FirstDirectiveID {
			t.Fatalf("fixture restored wrong: applied %d format %d, %d files", s.AppliedIndex(), s.LogFormat(), s.FileCount())
		}
	})
	// After a SET_FORMAT to 4 the restored member takes directives.
	var path string
	old.View(func(s *State) { path = s.UnderConstruction()[0].Path })
	old.Apply(cmdEntry(t, 622, pb.CommandType_COMMAND_TYPE_SET_FORMAT, &pb.SetFormatCommand{Version: CacheFormat}))
	resp := old.Apply(nsEntry(t, 623, 1, &pb.NamespaceCommand{Op: opAddCache(path, 1)}))
	if r, ok := resp.(NamespaceResult); !ok || r.Err != nil || r.Result.Directive.GetId() != FirstDirectiveID {
		t.Fatalf("directive after the upgrade: %#v", resp)
	}
}
