package client

import (
	"context"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
)

// CacheDirective asks the coordinators to keep the COMPLETE blocks of the
// file at Path cached in the locked memory of Replication storage nodes
// holding a good replica (HDFS centralized cache management). Directives
// are replicated; which nodes cache what is the leader's choice, from the
// nodes' cache reports, bounded by each node's --max-locked-memory.
type CacheDirective struct {
	ID          uint64
	Path        string
	Replication uint32
	Created     time.Time
	// The leader's view (ListCacheDirectives only): COMPLETE blocks of the
	// file, those cached on Replication nodes (not dead), Replication × their
	// bytes, and the bytes of their cached replicas.
	BlocksNeeded, BlocksCached uint64
	BytesNeeded, BytesCached   uint64
}

func toCacheDirective(d *pb.CacheDirective) CacheDirective {
	return CacheDirective{ID: d.GetId(), Path: d.GetPath(), Replication: d.GetReplication(), Created: time.Unix(0, d.GetCreatedUnixNanos())}
}

// AddCacheDirective adds a directive for the file at path (one per path:
// AlreadyExists otherwise) with replication 1..the file's replication. It
// needs log format 4 (every coordinator upgraded; FailedPrecondition
// before).
func (f *FS) AddCacheDirective(ctx context.Context, path string, replication uint32) (CacheDirective, error) {
	resp, err := inSession(ctx, f, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.CacheDirectiveResponse, error) {
		return ns.AddCacheDirective(ctx, &pb.AddCacheDirectiveRequest{Session: sess, Path: path, Replication: replication})
	})
	if err != nil {
		return CacheDirective{}, err
	}
	return toCacheDirective(resp.GetDirective()), nil
}

// RemoveCacheDirective removes directive id; what only it covered is
// uncached.
func (f *FS) RemoveCacheDirective(ctx context.Context, id uint64) error {
	_, err := inSession(ctx, f, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.CacheDirectiveResponse, error) {
		return ns.RemoveCacheDirective(ctx, &pb.RemoveCacheDirectiveRequest{Session: sess, Id: id})
	})
	return err
}

// ListCacheDirectives returns every directive, by id, with the leader's
// view of how much of it is cached.
func (f *FS) ListCacheDirectives(ctx context.Context) ([]CacheDirective, error) {
	var resp *pb.ListCacheDirectivesResponse
	err := f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
		var err error
		resp, err = ns.ListCacheDirectives(ctx, &pb.ListCacheDirectivesRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]CacheDirective, 0, len(resp.GetDirectives()))
	for _, s := range resp.GetDirectives() {
		d := toCacheDirective(s.GetDirective())
		d.BlocksNeeded, d.BlocksCached, d.BytesNeeded, d.BytesCached = s.GetBlocksNeeded(), s.GetBlocksCached(), s.GetBytesNeeded(), s.GetBytesCached()
		out = append(out, d)
	}
	return out, nil
}
