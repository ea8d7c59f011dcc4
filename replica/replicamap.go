package replica

import (
	"path/filepath"
	"sort"
)

// replica is the in-memory record of one replica (HDFS ReplicaInfo and its
// subclasses in one struct). Fields are guarded by Dataset.mu.
type replica struct {
	pool       string
	id         uint64
	gs         uint64
	state      State
	origState  State  // RUR: the wrapped replica's state
	recoveryID uint64 // RUR
	// numBytes: FINALIZED final length; RBW/TEMPORARY bytes received; RWR
	// validated length. bytesOnDisk: bytes in the data file with matching
	// checksums. bytesAcked: visible length of an in-pipeline replica.
	numBytes    int64
	bytesOnDisk int64
	bytesAcked  int64
	vol         *volume
	dir         dirKind
	hdr         MetaHeader
	reserved    int64   // space reserved on vol for the rest of the block
	writer      *writer // the one writer of an in-pipeline replica, or nil
	cached      *cacheEntry
}

func (r *replica) paths() poolPaths { return newPoolPaths(r.vol.path, r.pool) }
func (r *replica) dirPath() string  { return r.paths().dir(r.dir, r.id) }
func (r *replica) dataPath() string { return filepath.Join(r.dirPath(), blockName(r.id)) }
func (r *replica) metaPath() string { return filepath.Join(r.dirPath(), metaName(r.id, r.gs)) }

func (r *replica) visibleLength() int64 {
	st := r.state
	if st == StateRUR {
		st = r.origState
	}
	switch st {
	case StateTemporary:
		return -1
	case StateRBW:
		return r.bytesAcked
	}
	return r.numBytes
}

func (r *replica) info() ReplicaInfo {
	ri := ReplicaInfo{
		Pool:          r.pool,
		ID:            r.id,
		GS:            r.gs,
		State:         r.state,
		NumBytes:      r.numBytes,
		BytesOnDisk:   r.bytesOnDisk,
		BytesAcked:    r.bytesAcked,
		VisibleLength: r.visibleLength(),
		StorageID:     r.vol.storageID,
		StorageType:   r.vol.typ,
		VolumePath:    r.vol.path,
		HasWriter:     r.writer != nil,
		Cached:        r.cached != nil,
	}
	if r.state == StateRUR {
		ri.OriginalState, ri.RecoveryID = r.origState, r.recoveryID
	}
	return ri
}

// reported is the replica as a block report shows it (RUR as its original).
func (r *replica) reported() ReportedReplica {
	st := r.state
	if st == StateRUR {
		st = r.origState
	}
	return ReportedReplica{ID: r.id, GS: r.gs, NumBytes: r.numBytes, State: st}
}

// blockPool is one block pool's replica map (HDFS ReplicaMap, per bpid).
type blockPool struct {
	id       string
	replicas map[uint64]*replica
	trash    bool // deletions go to trash/ (rolling upgrade window)
}

func (p *blockPool) sortedIDs() []uint64 {
	ids := make([]uint64, 0, len(p.replicas))
	for id := range p.replicas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
