package blocks

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// What the namespace's write path asks of the soft state: where a block
// goes, which blocks the leader vouches for, and leases.

// FileView is a file, its blocks and the registered nodes, read under one
// view of the state machine. Its records are the state machine's: read
// them, never modify them.
type FileView struct {
	File   *fsmpb.FileRecord
	Blocks []*fsmpb.BlockRecord
	Nodes  map[string]*fsmpb.NodeRecord
}

// Last is the file's last block (nil without blocks).
func (v FileView) Last() *fsmpb.BlockRecord {
	if len(v.Blocks) == 0 {
		return nil
	}
	return v.Blocks[len(v.Blocks)-1]
}

// ViewFile reads path; fsm.ErrFileNotFound when it does not exist.
func (m *Manager) ViewFile(path string) (FileView, error) {
	v, ok := m.viewFile(path)
	if !ok {
		return v, notFound(path)
	}
	return v, nil
}

func (m *Manager) viewFile(path string) (FileView, bool) {
	var v FileView
	var ok bool
	m.fsm.View(func(st *fsm.State) {
		v.File, ok = st.File(path)
		if ok {
			v.Blocks, _ = st.BlocksOfFile(path)
		}
		v.Nodes = map[string]*fsmpb.NodeRecord{}
		for _, n := range st.Nodes() {
			v.Nodes[n.Id] = n
		}
	})
	return v, ok
}

func (m *Manager) viewFileOfBlock(id uint64) (FileView, bool) {
	var path string
	m.fsm.View(func(st *fsm.State) {
		if b, ok := st.Block(id); ok {
			path = b.Path
		}
	})
	if path == "" {
		return FileView{}, false
	}
	return m.viewFile(path)
}

func notFound(path string) error { return fmt.Errorf("%w: %s", fsm.ErrFileNotFound, path) }

// NewBlock chooses the targets of v's next block — its replication of
// distinct live nodes, most free space first, none of excluded; fewer
// when not enough are live, ErrNoLiveNodes when none is — and lists the
// blocks the leader vouches for as replicated (previous, the client's
// view of its last block, overrides the state machine's).
func (m *Manager) NewBlock(v FileView, excluded []string, previous *fsmpb.BlockRef) (targets []string, replicated []uint64, err error) {
	now := time.Now()
	f := m.locked()
	defer f.mu.Unlock()
	targets, err = m.chooseTargetsLocked(f, v.Nodes, int(v.File.Replication), excluded, now)
	return targets, f.replicatedLocked(v, previous, now, m.cfg.NodeStaleInterval), err
}

// Replicated lists the blocks of v the leader vouches for as replicated
// (last, when given, overrides the state machine's view of that block).
func (m *Manager) Replicated(v FileView, last *fsmpb.BlockRef) []uint64 {
	f := m.locked()
	defer f.mu.Unlock()
	return f.replicatedLocked(v, last, time.Now(), m.cfg.NodeStaleInterval)
}

// AppendTargets are the replicas of v's partial last block that an
// append writes to: the registered live nodes that reported it finalized
// at its GS and length, at most max (none keeps its expected ones).
func (m *Manager) AppendTargets(v FileView, max int) []string {
	last := v.Last()
	if last == nil {
		return nil
	}
	var targets []string
	now, stale := time.Now(), m.cfg.NodeStaleInterval
	f := m.locked()
	defer f.mu.Unlock()
	for _, id := range f.reporters(last.Id) {
		r := f.nodes[id].replicas[last.Id]
		if _, reg := v.Nodes[id]; reg && f.live(id, now, stale) && r.state == lr.ReplicaFinalized &&
			r.gs == last.Gs && r.numBytes == int64(last.NumBytes) && len(targets) < max {
			targets = append(targets, id)
		}
	}
	return targets
}

// AdditionalNode chooses a node to add to the pipeline of v's last block
// (design §R5.3 step 5) for its lease holder client: a live node in
// neither exclude. The block must be the file's last, under construction,
// and the file client's.
func (m *Manager) AdditionalNode(v FileView, client string, blockID uint64, exclude []string) (string, error) {
	last := v.Last()
	switch {
	case !v.File.UnderConstruction:
		return "", fmt.Errorf("%w: %s", fsm.ErrNotUnderConstruction, v.File.Path)
	case v.File.LeaseHolder != client:
		return "", fmt.Errorf("%w: %s is held by %s, not %s", fsm.ErrNotLeaseHolder, v.File.Path, v.File.LeaseHolder, client)
	case last == nil || last.Id != blockID:
		return "", fmt.Errorf("%w: block %d is not the last block of %s", fsm.ErrNotLastBlock, blockID, v.File.Path)
	case last.State != fsmpb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION:
		return "", fmt.Errorf("%w: block %d is %v", fsm.ErrBlockState, blockID, last.State)
	}
	f := m.locked()
	targets, err := m.chooseTargetsLocked(f, v.Nodes, 1, exclude, time.Now())
	f.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("%w: none outside the pipeline of block %d and the excluded", ErrNoAdditionalNode, blockID)
	}
	return targets[0], nil
}

// replicatedLocked lists the blocks of v that live nodes reported
// FINALIZED at their GS and length (ref, when given, overrides the
// client's view of its block): the leader vouches for their minimal
// replication.
func (f *fsSoft) replicatedLocked(v FileView, ref *fsmpb.BlockRef, now time.Time, stale time.Duration) []uint64 {
	var out []uint64
	for _, b := range v.Blocks {
		gs, n := b.Gs, int64(b.NumBytes)
		if ref != nil && ref.Id == b.Id {
			gs, n = ref.Gs, int64(ref.NumBytes)
		}
		if b.State == fsmpb.BlockState_BLOCK_STATE_COMPLETE {
			continue
		}
		if f.finalizedAt(b.Id, gs, n, now, stale) >= 1 {
			out = append(out, b.Id)
		}
	}
	return out
}

// chooseTargetsLocked picks count distinct live registered nodes, most
// free space first (then by id), avoiding excluded; fewer when not enough
// are live, at least one.
func (m *Manager) chooseTargetsLocked(f *fsSoft, nodes map[string]*fsmpb.NodeRecord, count int, excluded []string, now time.Time) ([]string, error) {
	stale := m.cfg.NodeStaleInterval
	var live []string
	for id := range nodes {
		if f.live(id, now, stale) && !slices.Contains(excluded, id) {
			live = append(live, id)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := f.nodes[live[i]].free, f.nodes[live[j]].free
		if a != b {
			return a > b
		}
		return live[i] < live[j]
	})
	if len(live) == 0 {
		return nil, ErrNoLiveNodes
	}
	return live[:min(max(count, 1), len(live))], nil
}

// Renew records a lease renewal of client (leader memory).
func (m *Manager) Renew(client string) {
	f := m.locked()
	f.renewals[client] = time.Now()
	f.mu.Unlock()
}

// TakeOver runs the soft-limit takeover of a create or append (design
// §R3.5): an open file of another writer whose lease passed the soft
// limit is released (or recovered) first. A file that does not exist, is
// closed or is client's own is left to the state machine.
func (m *Manager) TakeOver(op lr.WriteOp, path, client string) error {
	v, ok := m.viewFile(path)
	if !ok || !v.File.UnderConstruction || v.File.LeaseHolder == client {
		return nil // the FSM decides
	}
	acc, err := m.access(v, op, client)
	if err != nil || !acc.Release {
		return err
	}
	d, err := m.releaseFile(path, acc.NewHolder, "soft limit passed: "+op.String()+" by "+client)
	if err != nil {
		return err
	}
	_, err = lr.AnswerRelease(op, d)
	return err
}

// RecoverLease is a client's recoverLease of path (design §R3.5): it
// answers true once the file is closed, or starts (or re-drives) what
// closes it and answers false.
func (m *Manager) RecoverLease(path, client string) (closed bool, err error) {
	v, err := m.ViewFile(path)
	if err != nil {
		return false, err
	}
	acc, err := m.access(v, lr.OpRecoverLease, client)
	if err != nil {
		return false, err
	}
	if acc.Proceed {
		return true, nil
	}
	d, err := m.releaseFile(path, acc.NewHolder, "recover lease by "+client)
	if err != nil {
		return false, err
	}
	return lr.AnswerRelease(lr.OpRecoverLease, d)
}

// access is the lease rules' answer to client's op on v now.
func (m *Manager) access(v FileView, op lr.WriteOp, client string) (lr.Access, error) {
	now := time.Now()
	f := m.locked()
	rf := m.ruleFileLocked(f, v, now)
	renewed := f.renewed(v.File.LeaseHolder)
	f.mu.Unlock()
	return lr.CheckWriteAccess(rf, lr.AccessRequest{Op: op, Caller: client, Now: now, LeaseRenewed: renewed}, m.cfg.rules())
}

// Reported returns, for each of ids, the replicas the nodes reported to
// this leader (none on a follower, which holds no soft state), and
// whether the answer is the leader's.
func (m *Manager) Reported(ids []uint64) (map[uint64][]Reported, bool) {
	if !m.lead.IsLeader() {
		return nil, false
	}
	f := m.locked()
	defer f.mu.Unlock()
	out := make(map[uint64][]Reported, len(ids))
	for _, id := range ids {
		out[id] = f.reported(id)
	}
	return out, true
}
