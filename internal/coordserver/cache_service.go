package coordserver

import (
	"context"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
)

// cacheReady: fsReady, and the replicated log format carries the
// cache-directive ops (a voter on an older build would halt on them).
func (s *Server) cacheReady(ctx context.Context) error {
	if err := s.fsReady(ctx); err != nil {
		return err
	}
	return s.needFormat(fsm.CacheFormat, "cache directives need")
}

// AddCacheDirective journals a directive (logbook.cache.added); the cache
// monitor then caches the file's COMPLETE blocks.
func (n *namespaceService) AddCacheDirective(ctx context.Context, req *pb.AddCacheDirectiveRequest) (*pb.CacheDirectiveResponse, error) {
	s := n.s
	if err := s.checkFSPath("add cache directive", req.Path); err != nil {
		return nil, err
	}
	if err := s.checkSession(req.Session); err != nil {
		return nil, err
	}
	if err := s.cacheReady(ctx); err != nil {
		return nil, err
	}
	return s.directiveOp(req.Session, &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_AddCacheDirective{
		AddCacheDirective: &fsmpb.AddCacheDirectiveOp{Path: req.Path, Replication: req.Replication}}})
}

// RemoveCacheDirective journals the removal (logbook.cache.removed); the
// cache monitor then uncaches what only it covered.
func (n *namespaceService) RemoveCacheDirective(ctx context.Context, req *pb.RemoveCacheDirectiveRequest) (*pb.CacheDirectiveResponse, error) {
	s := n.s
	if err := s.checkSession(req.Session); err != nil {
		return nil, err
	}
	if err := s.cacheReady(ctx); err != nil {
		return nil, err
	}
	return s.directiveOp(req.Session, &fsmpb.NamespaceOp{Op: &fsmpb.NamespaceOp_RemoveCacheDirective{
		RemoveCacheDirective: &fsmpb.RemoveCacheDirectiveOp{Id: req.Id}}})
}

func (s *Server) directiveOp(sess *pb.FsSession, op *fsmpb.NamespaceOp) (*pb.CacheDirectiveResponse, error) {
	r, err := s.proposeNS(sess, op)
	if err != nil {
		return nil, err
	}
	return &pb.CacheDirectiveResponse{Directive: apiCacheDirective(r.Result.GetDirective()), Seq: r.Seq}, nil
}

// ListCacheDirectives lists every directive (replicated) with the leader's
// view of how much of it is cached (soft state, from cache reports).
func (n *namespaceService) ListCacheDirectives(ctx context.Context, _ *pb.ListCacheDirectivesRequest) (*pb.ListCacheDirectivesResponse, error) {
	s := n.s
	if err := s.fsReady(ctx); err != nil {
		return nil, err
	}
	resp := &pb.ListCacheDirectivesResponse{}
	for _, d := range s.blocks.CacheDirectives() {
		resp.Directives = append(resp.Directives, &pb.CacheDirectiveStatus{Directive: apiCacheDirective(d.Directive),
			BlocksNeeded: d.BlocksNeeded, BlocksCached: d.BlocksCached, BytesNeeded: d.BytesNeeded, BytesCached: d.BytesCached})
	}
	return resp, nil
}
