package replica

import (
	"sort"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// GetReplica returns a snapshot of replica id (any state).
func (d *Dataset) GetReplica(bpid string, id uint64) (ReplicaInfo, error) {
	var out ReplicaInfo
	err := d.view("get-replica", bpid, id, func(p *blockPool, r *replica) error {
		if r == nil {
			return errNoReplica()
		}
		out = r.info()
		return nil
	})
	return out, err
}

// GetStoredBlock returns {id, GS, bytes on disk} of replica id (HDFS
// getStoredBlock).
func (d *Dataset) GetStoredBlock(bpid string, id uint64) (Block, error) {
	var out Block
	err := d.view("get-stored-block", bpid, id, func(p *blockPool, r *replica) error {
		if r == nil {
			return errNoReplica()
		}
		out = Block{ID: r.id, GS: r.gs, NumBytes: r.bytesOnDisk}
		return nil
	})
	return out, err
}

// GetReplicaVisibleLength returns what a reader may read of replica b.ID;
// its GS must be ≥ b.GS (KindStaleGS). TEMPORARY → KindInvalidState.
func (d *Dataset) GetReplicaVisibleLength(bpid string, b Block) (int64, error) {
	var out int64
	err := d.view("get-replica-visible-length", bpid, b.ID, func(p *blockPool, r *replica) error {
		if err := readable(r, b); err != nil {
			return err
		}
		out = r.visibleLength()
		return nil
	})
	return out, err
}

// Contains reports whether a replica with b's id and GS exists.
func (d *Dataset) Contains(bpid string, b Block) bool {
	ok := false
	d.view("contains", bpid, b.ID, func(p *blockPool, r *replica) error {
		ok = r != nil && r.gs == b.GS
		return nil
	})
	return ok
}

// Replicas lists every replica of a pool, by id.
func (d *Dataset) Replicas(bpid string) ([]ReplicaInfo, error) {
	var out []ReplicaInfo
	err := d.view("replicas", bpid, 0, func(p *blockPool, _ *replica) error {
		out = make([]ReplicaInfo, 0, len(p.replicas))
		for _, r := range p.replicas {
			out = append(out, r.info())
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}
