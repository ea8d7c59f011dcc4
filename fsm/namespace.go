package fsm

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/protobuf/proto"
)

// Namespace rules that are part of the replicated behaviour (doc.go,
// "Namespace"): every member must use the same values.
const (
	// FirstBlockID and FirstGS start the counters (HDFS-like: block ids
	// above 2^30, generation stamps above 1000).
	FirstBlockID = 1 << 30
	FirstGS      = 1000
	// MaxReplication bounds a file's replication factor.
	MaxReplication = 16
	// BlockSizeUnit is the checksum chunk: block sizes are multiples of it.
	BlockSizeUnit = 512
	// MaxBlockSize bounds a file's block size.
	MaxBlockSize = 1 << 30
	// MaxBlocksPerFile bounds a file's block list (HDFS
	// dfs.namenode.fs-limits.max-blocks-per-file).
	MaxBlocksPerFile = 10000
	// MaxDeleteBlocks bounds the blocks one delete removes, and so the size
	// of its audit event.
	MaxDeleteBlocks = 10000
	// MaxPathBytes and MaxComponentBytes bound a path.
	MaxPathBytes      = 4096
	MaxComponentBytes = 255
	// MaxNameBytes bounds client names, node ids, storage ids, instance
	// ids and addresses; MaxReasonBytes a recovery reason.
	MaxNameBytes   = 128
	MaxAddrBytes   = 255
	MaxReasonBytes = 1024
	// MaxStoragesPerNode bounds a node's storage ids.
	MaxStoragesPerNode = 64
	// ReservedEventPrefix starts the type of every audit event; client
	// appends may not use it once the namespace began, and client names may
	// never use it.
	ReservedEventPrefix = "logbook."
	// RecoveryLeaseHolder holds the lease of a file whose recovery the
	// leader started on its own (HDFS's "HDFS_NameNode" holder); no client
	// may use the name.
	RecoveryLeaseHolder = lr.InternalHolder
)

// Audit event types: one per accepted namespace op.
const (
	EventCreate                 = "logbook.fs.create"
	EventAddBlock               = "logbook.fs.add_block"
	EventComplete               = "logbook.fs.complete"
	EventAppend                 = "logbook.fs.append"
	EventDelete                 = "logbook.fs.delete"
	EventAbandonBlock           = "logbook.fs.abandon_block"
	EventUpdateBlockForPipeline = "logbook.fs.update_block_for_pipeline"
	EventUpdatePipeline         = "logbook.fs.update_pipeline"
	EventRecoveryStarted        = "logbook.recovery.started"
	EventRecoveryCommitted      = "logbook.recovery.committed"
	EventLeaseReleased          = "logbook.lease.released"
	EventNodeRegistered         = "logbook.node.registered"
	EventCacheAdded             = "logbook.cache.added"
	EventCacheRemoved           = "logbook.cache.removed"
)

// ReservedEventType reports whether typ uses the audit event prefix.
func ReservedEventType(typ string) bool { return strings.HasPrefix(typ, ReservedEventPrefix) }

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]*$`)

// namespace is the replicated namespace and its derived indexes.
//
// Records stored in the tables are never modified: a change stores a new
// record (copy on write), so readers and a snapshot being persisted keep a
// consistent view of the records they hold. Files and blocks are in
// cowTables, which a capture clones in O(1); nodes and directives (a few
// hundred, a few thousand) in maps, which a capture copies.
type namespace struct {
	files       cowTable[string, *pb.FileRecord]
	blocks      cowTable[uint64, *pb.BlockRecord]
	nodes       map[string]*pb.NodeRecord
	nextBlockID uint64
	nextGS      uint64
	// auditFrom is the seq of the first audit event, 0 before the first
	// accepted namespace op.
	auditFrom uint64
	// Cache directives by id, and the next id (from 1).
	directives      map[uint64]*pb.CacheDirective
	nextDirectiveID uint64

	// Derived (rebuilt on restore, not hashed): directory → child names,
	// holder → open paths, blocks under recovery, path → directive id.
	dirs            map[string]map[string]struct{}
	leases          map[string]map[string]struct{}
	recovering      map[uint64]struct{}
	directiveOfPath map[string]uint64

	// removals is the FSM's feed of removed block ids (removals.go; nil
	// in a State outside an FSM).
	removals *blockRemovals
}

func newNamespace() namespace {
	return namespace{
		files:       newCOWTable[string, *pb.FileRecord](),
		blocks:      newCOWTable[uint64, *pb.BlockRecord](),
		nodes:       make(map[string]*pb.NodeRecord),
		nextBlockID: FirstBlockID,
		nextGS:      FirstGS,
		dirs:        map[string]map[string]struct{}{"/": {}},
		leases:      make(map[string]map[string]struct{}),
		recovering:  make(map[uint64]struct{}),

		directives:      make(map[uint64]*pb.CacheDirective),
		nextDirectiveID: FirstDirectiveID,
		directiveOfPath: make(map[string]uint64),
	}
}

// ValidPath reports why p cannot name a file or directory, or nil: it must
// be absolute and clean (no empty, "." or ".." components, no trailing
// slash except for "/"), at most MaxPathBytes with components of at most
// MaxComponentBytes, and free of NUL bytes.
func ValidPath(p string) error {
	switch {
	case p == "":
		return errorf(ErrInvalidPath, "empty path")
	case len(p) > MaxPathBytes:
		return errorf(ErrInvalidPath, "path of %d bytes, at most %d", len(p), MaxPathBytes)
	case p[0] != '/':
		return errorf(ErrInvalidPath, "%q is not absolute", p)
	case strings.IndexByte(p, 0) >= 0:
		return errorf(ErrInvalidPath, "%q contains a NUL byte", p)
	case p == "/":
		return nil
	case strings.HasSuffix(p, "/"):
		return errorf(ErrInvalidPath, "%q ends with a slash", p)
	}
	for _, c := range strings.Split(p[1:], "/") {
		switch {
		case c == "":
			return errorf(ErrInvalidPath, "%q has an empty component", p)
		case c == "." || c == "..":
			return errorf(ErrInvalidPath, "%q has a %q component", p, c)
		case len(c) > MaxComponentBytes:
			return errorf(ErrInvalidPath, "%q has a component of %d bytes, at most %d", p, len(c), MaxComponentBytes)
		}
	}
	return nil
}

// parentDir splits a valid non-root path into its directory and name.
func parentDir(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

func childPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// linkFile adds a new path to the directory index.
func (ns *namespace) linkFile(p string) {
	for p != "/" {
		dir, name := parentDir(p)
		children, ok := ns.dirs[dir]
		if !ok {
			children = make(map[string]struct{})
			ns.dirs[dir] = children
		}
		children[name] = struct{}{}
		if ok {
			return
		}
		p = dir
	}
}

// unlinkFile removes a path from the directory index, and every directory
// left empty (except "/").
func (ns *namespace) unlinkFile(p string) {
	for p != "/" {
		dir, name := parentDir(p)
		children := ns.dirs[dir]
		delete(children, name)
		if len(children) > 0 || dir == "/" {
			return
		}
		delete(ns.dirs, dir)
		p = dir
	}
}

// setLease moves the lease index entry of path from old to holder.
func (ns *namespace) setLease(path, old, holder string) {
	if old == holder {
		return
	}
	if old != "" {
		if m := ns.leases[old]; m != nil {
			delete(m, path)
			if len(m) == 0 {
				delete(ns.leases, old)
			}
		}
	}
	if holder != "" {
		m := ns.leases[holder]
		if m == nil {
			m = make(map[string]struct{})
			ns.leases[holder] = m
		}
		m[path] = struct{}{}
	}
}

// putFile stores f (a new record) under its path, keeping the indexes.
func (ns *namespace) putFile(f *pb.FileRecord) {
	old, ok := ns.files.get(f.Path)
	if !ok {
		ns.linkFile(f.Path)
		ns.setLease(f.Path, "", f.LeaseHolder)
	} else {
		ns.setLease(f.Path, old.LeaseHolder, f.LeaseHolder)
	}
	ns.files.put(f.Path, f)
}

// removeFile drops a file and its blocks.
func (ns *namespace) removeFile(f *pb.FileRecord) {
	for _, id := range f.BlockIds {
		ns.removeBlock(id)
	}
	ns.setLease(f.Path, f.LeaseHolder, "")
	ns.files.del(f.Path)
	ns.unlinkFile(f.Path)
}

func (ns *namespace) putBlock(b *pb.BlockRecord) {
	ns.blocks.put(b.Id, b)
	if b.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
		ns.recovering[b.Id] = struct{}{}
	} else {
		delete(ns.recovering, b.Id)
	}
}

func (ns *namespace) removeBlock(id uint64) {
	if ns.removals != nil {
		ns.removals.add(id)
	}
	ns.blocks.del(id)
	delete(ns.recovering, id)
}

// allocGS hands out the next generation stamp.
func (ns *namespace) allocGS() uint64 {
	g := ns.nextGS
	ns.nextGS++
	return g
}

func cloneFile(f *pb.FileRecord) *pb.FileRecord    { return proto.Clone(f).(*pb.FileRecord) }
func cloneBlock(b *pb.BlockRecord) *pb.BlockRecord { return proto.Clone(b).(*pb.BlockRecord) }

// fileStatus summarises a file (its length is the sum of its blocks').
func (ns *namespace) fileStatus(f *pb.FileRecord) *pb.FileStatus {
	st := &pb.FileStatus{
		Path: f.Path, Replication: f.Replication, BlockSize: f.BlockSize,
		UnderConstruction: f.UnderConstruction, LeaseHolder: f.LeaseHolder,
		BlockCount: uint32(len(f.BlockIds)), CtimeUnixNanos: f.CtimeUnixNanos, MtimeUnixNanos: f.MtimeUnixNanos,
	}
	for _, id := range f.BlockIds {
		if b := ns.blocks.at(id); b != nil {
			st.Length += b.NumBytes
		}
	}
	return st
}

// filesUnder returns every file at or below p, sorted by path.
func (ns *namespace) filesUnder(p string) []*pb.FileRecord {
	if f, ok := ns.files.get(p); ok {
		return []*pb.FileRecord{f}
	}
	var out []*pb.FileRecord
	var walk func(dir string)
	walk = func(dir string) {
		for _, name := range sortedKeys(ns.dirs[dir]) {
			c := childPath(dir, name)
			if f, ok := ns.files.get(c); ok {
				out = append(out, f)
			} else {
				walk(c)
			}
		}
	}
	if _, ok := ns.dirs[p]; ok {
		walk(p)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Queries. Every record returned is shared with the state and must not be
// modified; it is never modified by the state either (a change stores a
// new record), so a caller may keep it after the FSM's read lock is
// released.

// File returns the file at path.
func (s *State) File(path string) (*pb.FileRecord, bool) {
	f, ok := s.ns.files.get(path)
	return f, ok
}

// FileStatus returns the attributes of the file at path.
func (s *State) FileStatus(path string) (*pb.FileStatus, bool) {
	f, ok := s.ns.files.get(path)
	if !ok {
		return nil, false
	}
	return s.ns.fileStatus(f), true
}

// DirStatus reports whether path is a directory (the root, or a
// directory some file is under) and how many entries it holds directly.
func (s *State) DirStatus(path string) (entries int, ok bool) {
	if children, ok := s.ns.dirs[path]; ok {
		return len(children), true
	}
	return 0, path == "/"
}

// ListEntry is one entry of a directory listing: a file, or an implicit
// directory (File nil).
type ListEntry struct {
	Path string
	Dir  bool
	File *pb.FileStatus
}

// List returns the entries directly under the directory dir, sorted by
// name, starting after the entry named after (a name, not a path; "" from
// the start), at most limit of them (limit <= 0: all). A file path lists
// that file alone. A path that is neither gives ErrFileNotFound; a bad path
// ErrInvalidPath.
func (s *State) List(dir, after string, limit int) ([]ListEntry, error) {
	if err := ValidPath(dir); err != nil {
		return nil, err
	}
	if f, ok := s.ns.files.get(dir); ok {
		_, name := parentDir(dir)
		if after != "" && name <= after {
			return nil, nil
		}
		return []ListEntry{{Path: dir, File: s.ns.fileStatus(f)}}, nil
	}
	children, ok := s.ns.dirs[dir]
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s", dir)
	}
	names := sortedKeys(children)
	i := sort.SearchStrings(names, after)
	if i < len(names) && names[i] == after {
		i++
	}
	var out []ListEntry
	for _, name := range names[i:] {
		if limit > 0 && len(out) >= limit {
			break
		}
		p := childPath(dir, name)
		if f, ok := s.ns.files.get(p); ok {
			out = append(out, ListEntry{Path: p, File: s.ns.fileStatus(f)})
		} else {
			out = append(out, ListEntry{Path: p, Dir: true})
		}
	}
	return out, nil
}

// FileCount is the number of files.
func (s *State) FileCount() int { return s.ns.files.len() }

// Block returns the block with id.
func (s *State) Block(id uint64) (*pb.BlockRecord, bool) {
	return s.ns.blocks.get(id)
}

// BlockCount is the number of blocks.
func (s *State) BlockCount() int { return s.ns.blocks.len() }

// BlocksOfFile returns the blocks of the file at path, in order.
func (s *State) BlocksOfFile(path string) ([]*pb.BlockRecord, bool) {
	f, ok := s.ns.files.get(path)
	if !ok {
		return nil, false
	}
	out := make([]*pb.BlockRecord, 0, len(f.BlockIds))
	for _, id := range f.BlockIds {
		out = append(out, s.ns.blocks.at(id))
	}
	return out, true
}

// Nodes returns the registered storage nodes sorted by id.
func (s *State) Nodes() []*pb.NodeRecord {
	out := make([]*pb.NodeRecord, 0, len(s.ns.nodes))
	for _, id := range sortedKeys(s.ns.nodes) {
		out = append(out, s.ns.nodes[id])
	}
	return out
}

// Node returns a registered storage node.
func (s *State) Node(id string) (*pb.NodeRecord, bool) {
	n, ok := s.ns.nodes[id]
	return n, ok
}

// OpenFile is a file under construction and its lease holder (for the
// leader's lease monitor, which keeps renewal times itself).
type OpenFile struct {
	Path   string
	Holder string
	// Last is the file's last block, nil for a file without blocks.
	Last *pb.BlockRecord
}

// UnderConstruction returns every open file sorted by holder, then path.
func (s *State) UnderConstruction() []OpenFile {
	var out []OpenFile
	for _, h := range sortedKeys(s.ns.leases) {
		for _, p := range sortedKeys(s.ns.leases[h]) {
			out = append(out, s.openFile(p))
		}
	}
	return out
}

// LeaseHolders returns every holder with open files, sorted.
func (s *State) LeaseHolders() []string { return sortedKeys(s.ns.leases) }

// FilesOfHolder returns the open files of one lease holder, sorted by path.
func (s *State) FilesOfHolder(holder string) []OpenFile {
	var out []OpenFile
	for _, p := range sortedKeys(s.ns.leases[holder]) {
		out = append(out, s.openFile(p))
	}
	return out
}

func (s *State) openFile(p string) OpenFile {
	f := s.ns.files.at(p)
	o := OpenFile{Path: p, Holder: f.LeaseHolder}
	if n := len(f.BlockIds); n > 0 {
		o.Last = s.ns.blocks.at(f.BlockIds[n-1])
	}
	return o
}

// BlocksUnderRecovery returns every block UNDER_RECOVERY sorted by id: a
// new leader resumes them (re-sends the same recovery id to the primary).
func (s *State) BlocksUnderRecovery() []*pb.BlockRecord {
	ids := make([]uint64, 0, len(s.ns.recovering))
	for id := range s.ns.recovering {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]*pb.BlockRecord, len(ids))
	for i, id := range ids {
		out[i] = s.ns.blocks.at(id)
	}
	return out
}

// RecoveryLoad counts the blocks under recovery by primary.
func (s *State) RecoveryLoad() map[string]int {
	out := map[string]int{}
	for id := range s.ns.recovering {
		out[s.ns.blocks.at(id).GetRecovery().GetPrimary()]++
	}
	return out
}

// RecoveriesOfPrimary returns the blocks under recovery whose primary is
// node, sorted by id: the recovery work to send it (design §R9.11, commands
// derived from FSM state).
func (s *State) RecoveriesOfPrimary(node string) []*pb.BlockRecord {
	var out []*pb.BlockRecord
	for _, b := range s.BlocksUnderRecovery() {
		if b.Recovery.GetPrimary() == node {
			out = append(out, b)
		}
	}
	return out
}

// NextBlockID and NextGS are the next values the counters hand out.
func (s *State) NextBlockID() uint64 { return s.ns.nextBlockID }

// NextGS is the generation stamp the next allocation gets.
func (s *State) NextGS() uint64 { return s.ns.nextGS }

// AuditFromSeq is the seq of the first audit event (0 before the first
// accepted namespace op). Every event at or after it whose type starts with
// ReservedEventPrefix was written by the state machine.
func (s *State) AuditFromSeq() uint64 { return s.ns.auditFrom }

// rebuild derives the indexes from restored records and checks that they
// fit together: every block belongs to exactly the file that lists it, no
// path is both a file and a directory, open files have a lease holder and
// closed ones complete blocks, and the counters lie above every id and GS
// handed out (design §R9.10: a restore never reuses a recovery id).
func (ns *namespace) rebuild() error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSnapshotCorrupt}, args...)...)
	}
	if ns.auditFrom == 0 && (ns.files.len()+ns.blocks.len()+len(ns.nodes) > 0 || ns.nextBlockID != FirstBlockID || ns.nextGS != FirstGS) {
		return corrupt("namespace records without an audit trail")
	}
	owner := make(map[uint64]string, ns.blocks.len())
	files := ns.files.sorted()
	for _, f := range files {
		p := f.Path
		if err := validFilePath(p); err != nil {
			return corrupt("file %q: %v", p, err)
		}
		if f.UnderConstruction != (f.LeaseHolder != "") {
			return corrupt("file %q: under construction %v with lease holder %q", p, f.UnderConstruction, f.LeaseHolder)
		}
		for i, id := range f.BlockIds {
			b, ok := ns.blocks.get(id)
			if !ok || b.Path != p {
				return corrupt("file %q lists block %d it does not own", p, id)
			}
			if o, dup := owner[id]; dup {
				return corrupt("block %d listed by %q and %q", id, o, p)
			}
			owner[id] = p
			if (b.State != stateComplete && !f.UnderConstruction) || (b.State == stateRecovery && i != len(f.BlockIds)-1) {
				return corrupt("block %d of %q is %s", id, p, stateName(b.State))
			}
		}
		ns.linkFile(p)
		ns.setLease(p, "", f.LeaseHolder)
	}
	for _, f := range files {
		if _, ok := ns.dirs[f.Path]; ok {
			return corrupt("%q is both a file and a directory", f.Path)
		}
	}
	var bad error
	ns.blocks.each(func(id uint64, b *pb.BlockRecord) bool {
		_, owned := owner[id]
		switch {
		case !owned:
			bad = corrupt("block %d belongs to no file", id)
		case id >= ns.nextBlockID || b.Gs >= ns.nextGS || b.Recovery.GetRecoveryId() >= ns.nextGS:
			bad = corrupt("block %d (GS %d) at or above the counters %d, %d", id, b.Gs, ns.nextBlockID, ns.nextGS)
		case (b.State == stateRecovery) != (b.Recovery != nil):
			bad = corrupt("block %d is %s with recovery %v", id, stateName(b.State), b.Recovery)
		case b.State == stateRecovery:
			ns.recovering[id] = struct{}{}
		}
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	for id, n := range ns.nodes {
		if n.Id != id || id == "" {
			return corrupt("node record %q", id)
		}
	}
	return ns.rebuildDirectives(corrupt)
}
