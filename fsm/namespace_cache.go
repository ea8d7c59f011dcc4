package fsm

import (
	"sort"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

// Cache directives (HDFS centralized cache management, CacheManager): the
// replicated half. A directive asks for the COMPLETE blocks of the file at
// a path to be cached on `replication` nodes; which nodes, and what they
// cached, is the leader's soft state (coordserver's cache monitor), fed by
// the nodes' cache reports, as HDFS's CacheReplicationMonitor is.
const (
	// FirstDirectiveID is the first directive id handed out.
	FirstDirectiveID = 1
	// MaxCacheDirectives bounds the directive table (and so a listing, a
	// snapshot's directive records and the monitor's work).
	MaxCacheDirectives = 10000
	// MaxCacheReplication bounds a directive's replication whatever the
	// file's.
	MaxCacheReplication = MaxReplication
)

// isCacheOp reports whether op is a cache-directive op (log format 4).
func isCacheOp(op *pb.NamespaceOp) bool {
	switch op.GetOp().(type) {
	case *pb.NamespaceOp_AddCacheDirective, *pb.NamespaceOp_RemoveCacheDirective:
		return true
	}
	return false
}

// opAddCacheDirective adds a directive for the file at op.Path with a new
// id from the directive counter. One directive per path (AlreadyExists);
// replication 1..the file's replication; at most MaxCacheDirectives.
func (s *State) opAddCacheDirective(now int64, op *pb.AddCacheDirectiveOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	if op.Replication == 0 || op.Replication > MaxCacheReplication {
		return nil, errorf(ErrInvalidCacheReplication, "replication %d, want 1..%d", op.Replication, MaxCacheReplication)
	}
	f, ok := s.ns.files.get(op.Path)
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s (a cache directive names a file)", op.Path)
	}
	if op.Replication > f.Replication {
		return nil, errorf(ErrInvalidCacheReplication, "replication %d above the replication %d of %s", op.Replication, f.Replication, op.Path)
	}
	if id, dup := s.ns.directiveOfPath[op.Path]; dup {
		return nil, errorf(ErrDirectiveExists, "%s has directive %d (remove it first)", op.Path, id)
	}
	if len(s.ns.directives) >= MaxCacheDirectives {
		return nil, errorf(ErrTooManyDirectives, "%d directives, at most %d", len(s.ns.directives), MaxCacheDirectives)
	}
	d := &pb.CacheDirective{Id: s.ns.nextDirectiveID, Path: op.Path, Replication: op.Replication, CreatedUnixNanos: now}
	s.ns.nextDirectiveID++
	s.ns.putDirective(d)
	return &pb.NamespaceResult{Directive: d}, nil
}

// opRemoveCacheDirective removes directive op.Id; the monitor then
// uncaches what only it covered.
func (s *State) opRemoveCacheDirective(op *pb.RemoveCacheDirectiveOp) (*pb.NamespaceResult, error) {
	d, ok := s.ns.directives[op.Id]
	if !ok {
		return nil, errorf(ErrDirectiveNotFound, "directive %d", op.Id)
	}
	delete(s.ns.directives, d.Id)
	delete(s.ns.directiveOfPath, d.Path)
	return &pb.NamespaceResult{Directive: d}, nil
}

func (ns *namespace) putDirective(d *pb.CacheDirective) {
	ns.directives[d.Id] = d
	ns.directiveOfPath[d.Path] = d.Id
}

// CacheDirectives returns every directive sorted by id (records shared
// with the state: read only).
func (s *State) CacheDirectives() []*pb.CacheDirective {
	out := make([]*pb.CacheDirective, 0, len(s.ns.directives))
	for _, d := range s.ns.directives {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// CacheDirectiveOfPath returns the directive naming path.
func (s *State) CacheDirectiveOfPath(path string) (*pb.CacheDirective, bool) {
	id, ok := s.ns.directiveOfPath[path]
	if !ok {
		return nil, false
	}
	return s.ns.directives[id], true
}

// NextDirectiveID is the id the next directive gets.
func (s *State) NextDirectiveID() uint64 { return s.ns.nextDirectiveID }

// rebuildDirectives indexes restored directives by path and checks them:
// ids below the counter, valid paths, one per path, replication in range,
// at most MaxCacheDirectives, none before the first audit event.
func (ns *namespace) rebuildDirectives(corrupt func(string, ...any) error) error {
	if ns.nextDirectiveID < FirstDirectiveID {
		return corrupt("next directive id %d", ns.nextDirectiveID)
	}
	if len(ns.directives) > MaxCacheDirectives || (ns.auditFrom == 0 && ns.nextDirectiveID != FirstDirectiveID) {
		return corrupt("%d cache directives, next id %d, audit from %d", len(ns.directives), ns.nextDirectiveID, ns.auditFrom)
	}
	for id, d := range ns.directives {
		if err := validFilePath(d.Path); err != nil {
			return corrupt("directive %d: %v", id, err)
		}
		if d.Id != id || id < FirstDirectiveID || id >= ns.nextDirectiveID || d.Replication == 0 || d.Replication > MaxCacheReplication {
			return corrupt("directive %d (%s, replication %d) with next id %d", id, d.Path, d.Replication, ns.nextDirectiveID)
		}
		if other, dup := ns.directiveOfPath[d.Path]; dup {
			return corrupt("directives %d and %d name %s", other, id, d.Path)
		}
		ns.directiveOfPath[d.Path] = id
	}
	return nil
}
