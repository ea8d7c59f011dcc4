package coordserver

import (
	"slices"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/fsm/fsmpb"
)

// The client API's messages are its own: they mirror the replicated
// records of fsm/fsmpb today, and these functions convert between the two
// at the edge, field by field, so that a field added to the log format
// reaches clients only when the API says so. Each returns a new message
// (the state's records are shared with concurrent readers and a message
// caches its size while it is marshalled, so a state-owned record is never
// sent as it is); payload bytes and strings, immutable once applied, are
// shared.

// apiEvent is the API's copy of a journal event.
func apiEvent(e *fsmpb.StoredEvent) *pb.StoredEvent {
	return &pb.StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientId: e.ClientId, RequestSeq: e.RequestSeq, Index: e.Index}
}

// apiEvents converts a page of events with one allocation for the
// messages.
func apiEvents(evs []*fsmpb.StoredEvent) []*pb.StoredEvent {
	msgs := make([]pb.StoredEvent, len(evs))
	out := make([]*pb.StoredEvent, len(evs))
	for i, e := range evs {
		m := &msgs[i]
		m.Seq, m.Type, m.Payload, m.ClientId, m.RequestSeq, m.Index = e.Seq, e.Type, e.Payload, e.ClientId, e.RequestSeq, e.Index
		out[i] = m
	}
	return out
}

// formatEvents is an import's events as the IMPORT command carries them.
func formatEvents(evs []*pb.StoredEvent) []*fsmpb.StoredEvent {
	out := make([]*fsmpb.StoredEvent, len(evs))
	for i, e := range evs {
		out[i] = &fsmpb.StoredEvent{Seq: e.Seq, Type: e.Type, Payload: e.Payload, ClientId: e.ClientId, RequestSeq: e.RequestSeq, Index: e.Index}
	}
	return out
}

func apiJournalConfig(c *fsmpb.JournalConfig) *pb.JournalConfig {
	if c == nil {
		return nil
	}
	return &pb.JournalConfig{
		EventsPerSegment: c.EventsPerSegment, SegmentBytes: c.SegmentBytes, SessionIdleTimeoutSeconds: c.SessionIdleTimeoutSeconds,
		MaxSegments: c.MaxSegments, MaxEvents: c.MaxEvents, Held: c.Held,
	}
}

// formatBlockRef is a client's block reference as a namespace op carries
// it.
func formatBlockRef(r *pb.BlockRef) *fsmpb.BlockRef {
	if r == nil {
		return nil
	}
	return &fsmpb.BlockRef{Id: r.Id, Gs: r.Gs, NumBytes: r.NumBytes}
}

func apiBlockState(s fsmpb.BlockState) pb.BlockState { return pb.BlockState(s) }

func apiBlockRecovery(r *fsmpb.BlockRecovery) *pb.BlockRecovery {
	if r == nil {
		return nil
	}
	return &pb.BlockRecovery{
		RecoveryId: r.RecoveryId, Primary: r.Primary, Attempt: r.Attempt, DeadlineUnixNanos: r.DeadlineUnixNanos,
		TriedPrimaries: slices.Clone(r.TriedPrimaries), Reason: r.Reason, StartedUnixNanos: r.StartedUnixNanos,
	}
}

func apiBlockRecord(b *fsmpb.BlockRecord) *pb.BlockRecord {
	if b == nil {
		return nil
	}
	return &pb.BlockRecord{
		Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, State: apiBlockState(b.State), Path: b.Path,
		ExpectedLocations: slices.Clone(b.ExpectedLocations), Recovery: apiBlockRecovery(b.Recovery),
	}
}

func apiFileStatus(f *fsmpb.FileStatus) *pb.FileStatus {
	if f == nil {
		return nil
	}
	return &pb.FileStatus{
		Path: f.Path, Replication: f.Replication, BlockSize: f.BlockSize, UnderConstruction: f.UnderConstruction,
		LeaseHolder: f.LeaseHolder, Length: f.Length, BlockCount: f.BlockCount,
		CtimeUnixNanos: f.CtimeUnixNanos, MtimeUnixNanos: f.MtimeUnixNanos,
	}
}

func apiNodeRecord(n *fsmpb.NodeRecord) *pb.NodeRecord {
	if n == nil {
		return nil
	}
	return &pb.NodeRecord{
		Id: n.Id, GrpcAddr: n.GrpcAddr, HttpAddr: n.HttpAddr, GossipAddr: n.GossipAddr, StorageIds: slices.Clone(n.StorageIds),
		InstanceId: n.InstanceId, RegisteredUnixNanos: n.RegisteredUnixNanos, UpdatedUnixNanos: n.UpdatedUnixNanos,
	}
}

func apiCacheDirective(d *fsmpb.CacheDirective) *pb.CacheDirective {
	if d == nil {
		return nil
	}
	return &pb.CacheDirective{Id: d.Id, Path: d.Path, Replication: d.Replication, CreatedUnixNanos: d.CreatedUnixNanos}
}

func apiNamespaceResult(r *fsmpb.NamespaceResult) *pb.NamespaceResult {
	if r == nil {
		return nil
	}
	out := &pb.NamespaceResult{
		File: apiFileStatus(r.File), Block: apiBlockRecord(r.Block), NewGs: r.NewGs, Closed: r.Closed,
		Node: apiNodeRecord(r.Node), StaleLocations: slices.Clone(r.StaleLocations), RemovedFiles: r.RemovedFiles,
		Unchanged: r.Unchanged, Directive: apiCacheDirective(r.Directive),
	}
	for _, b := range r.RemovedBlocks {
		out.RemovedBlocks = append(out.RemovedBlocks, &pb.RemovedBlock{Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, Locations: slices.Clone(b.Locations)})
	}
	return out
}
