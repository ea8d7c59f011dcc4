package fsm

import (
	"time"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// Lease release, block recovery and node registration. The leader decides
// when (its lease monitor and recovery driver keep the timers, design §R9.6);
// the state machine re-checks every rule at apply time, so two proposals
// racing each other cannot both win (design §R9.4).

// opStartRecovery moves the file's last block to UNDER_RECOVERY with a
// fresh recovery id (a GS from next_gs) and reassigns the lease (design §R3.2
// c–d, §R3.3, §R9.1). leaserecovery.DecideRelease, re-run at apply time on
// the entry's proposed time, must still answer "start recovery": an attempt
// still before its deadline refuses with ErrRecoveryInProgress (a re-drive
// after it preempts the old id), a file that can simply be closed with
// ErrBlockState (ReleaseLease is the way). The tried-primaries list follows
// leaserecovery.ChoosePrimary: the primary is appended, or the list starts
// over with it when it was tried before (every live candidate was). An
// empty primary is allowed (no expected location is alive, §R3.3).
func (s *State) opStartRecovery(now int64, op *pb.StartRecoveryOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	holder := op.NewHolder
	if holder == "" {
		holder = RecoveryLeaseHolder
	} else if err := checkClient(holder); err != nil {
		return nil, err
	}
	if len(op.Reason) > MaxReasonBytes {
		return nil, errorf(ErrInvalidRecovery, "reason of %d bytes, at most %d", len(op.Reason), MaxReasonBytes)
	}
	if op.DeadlineUnixNanos <= now {
		return nil, errorf(ErrInvalidRecovery, "deadline %d is not after the proposed time %d", op.DeadlineUnixNanos, now)
	}
	f, ok := s.ns.files.get(op.Path)
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s", op.Path)
	}
	if !f.UnderConstruction {
		return nil, errorf(ErrNotUnderConstruction, "%s is closed", f.Path)
	}
	b, err := s.blockOfFile(f, op.BlockId)
	if err != nil {
		return nil, err
	}
	if last := s.lastBlock(f); last.Id != b.Id {
		return nil, errorf(ErrNotLastBlock, "block %d, the last block of %s is %d", b.Id, f.Path, last.Id)
	}
	st := staged{}
	if len(b.ExpectedLocations) == 0 && len(op.ReportedLocations) > 0 {
		if err := s.checkTargets(op.ReportedLocations, MaxReplication); err != nil {
			return nil, err
		}
		s.own(st, b.Id).ExpectedLocations = append([]string(nil), op.ReportedLocations...)
	}
	d, err := lr.DecideRelease(*s.ruleFile(f, st, nil), time.Unix(0, now))
	if err != nil {
		return nil, fromRules(err)
	}
	switch d.Action {
	case lr.ReleaseStartRecovery:
	case lr.ReleaseInProgress:
		return nil, errorf(ErrRecoveryInProgress, "block %d: %s", b.Id, d.Reason)
	default:
		return nil, errorf(ErrBlockState, "%s needs no recovery (%s): release its lease", f.Path, d.Reason)
	}
	cur := s.get(st, b.Id)
	if op.Primary != "" && !contains(cur.ExpectedLocations, op.Primary) {
		return nil, errorf(ErrInvalidRecovery, "primary %q is not an expected location of block %d", op.Primary, b.Id)
	}
	chosen := cur.Recovery.GetTriedPrimaries()
	switch {
	case op.Primary == "":
		chosen = append([]string(nil), chosen...)
	case contains(chosen, op.Primary):
		chosen = []string{op.Primary}
	default:
		chosen = append(append([]string(nil), chosen...), op.Primary)
	}
	id := s.ns.nextGS
	rb, err := lr.BeginRecovery(ruleBlock(cur, false), id, lr.PrimaryChoice{Node: lr.NodeID(op.Primary), Chosen: toNodeIDs(chosen)}, time.Unix(0, op.DeadlineUnixNanos))
	if err != nil {
		return nil, fromRules(err)
	}
	s.ns.allocGS()
	nb := s.own(st, b.Id)
	nb.State = fromRuleState(rb.State)
	nb.Recovery = &pb.BlockRecovery{
		RecoveryId: rb.Recovery.ID, Primary: string(rb.Recovery.Primary), Attempt: uint32(rb.Recovery.Attempt),
		DeadlineUnixNanos: op.DeadlineUnixNanos, TriedPrimaries: fromNodeIDs(rb.Recovery.Chosen),
		Reason: op.Reason, StartedUnixNanos: now,
	}
	if prev := cur.Recovery; prev != nil {
		nb.Recovery.StartedUnixNanos = prev.StartedUnixNanos
	}
	s.install(st)
	nf := f
	if f.LeaseHolder != holder {
		nf = cloneFile(f)
		nf.LeaseHolder = holder
		s.ns.putFile(nf)
	}
	return &pb.NamespaceResult{Block: nb, File: s.ns.fileStatus(nf)}, nil
}

// opCommitBlockSync is commitBlockSynchronization (design §R4.2, §R9.4, §R9.5):
// leaserecovery.CheckCommit re-does every check at apply time. A recovery
// id that is not the block's current one changes nothing (invariant 5). A
// retry of a commit already applied, or a delete_block commit for a block
// already gone, succeeds unchanged. On close_file the block is COMPLETE
// whatever its replica count and the file closes; a COMMITTED block before
// it must be COMPLETE first (the leader vouches in replicated_blocks).
// Targets that are not registered nodes are left out of the block's
// locations (§R4.2 step 6).
func (s *State) opCommitBlockSync(now int64, op *pb.CommitBlockSyncOp) (*pb.NamespaceResult, error) {
	if len(op.Targets) > MaxReplication {
		return nil, errorf(ErrInvalidTargets, "%d targets, at most %d", len(op.Targets), MaxReplication)
	}
	b, ok := s.ns.blocks.get(op.BlockId)
	var f *pb.FileRecord
	var rf *lr.File
	st := staged{}
	if ok {
		f = s.ns.files.at(b.Path)
		if err := s.markReplicated(f, op.ReplicatedBlocks, st); err != nil {
			return nil, err
		}
		rf = s.ruleFile(f, st, nil)
	}
	out, err := lr.CheckCommit(rf, lr.CommitRequest{
		BlockID: op.BlockId, OldGS: op.OldGs, NewGS: op.NewGs, NewLength: int64(op.NewLength),
		RecoveryID: op.RecoveryId, CloseFile: op.CloseFile, DeleteBlock: op.DeleteBlock,
		Targets: toNodeIDs(op.Targets),
	})
	if err != nil {
		return nil, fromRules(err)
	}
	if out.Noop {
		res := &pb.NamespaceResult{Unchanged: true}
		if ok {
			res.Block, res.File, res.Closed = b, s.ns.fileStatus(f), !f.UnderConstruction
		}
		return res, nil
	}
	if !out.RemoveBlock && op.NewLength > f.BlockSize {
		return nil, errorf(ErrBlockLength, "block %d: length %d over the block size %d", b.Id, op.NewLength, f.BlockSize)
	}
	res := &pb.NamespaceResult{StaleLocations: fromNodeIDs(out.Dropped)}
	nf := cloneFile(f)
	if out.RemoveBlock {
		res.RemovedBlocks = []*pb.RemovedBlock{removedBlock(b)}
		nf.BlockIds = nf.BlockIds[:len(nf.BlockIds)-1]
		nf.MtimeUnixNanos = now
		s.ns.removeBlock(b.Id)
	} else {
		var locs []string
		for _, t := range fromNodeIDs(out.Block.Expected) {
			if _, known := s.ns.nodes[t]; known {
				locs = append(locs, t)
			}
		}
		nb := s.own(st, b.Id)
		nb.Gs, nb.NumBytes, nb.State = out.Block.GS, uint64(out.Block.NumBytes), fromRuleState(out.Block.State)
		nb.ExpectedLocations, nb.Recovery = locs, nil
		res.Block = nb
	}
	if out.CloseFile {
		nf.UnderConstruction, nf.LeaseHolder, nf.MtimeUnixNanos = false, "", now
		res.Closed = true
	}
	s.install(st)
	s.ns.putFile(nf)
	res.File = s.ns.fileStatus(nf)
	return res, nil
}

// opReleaseLease applies a release that needs no block recovery, by
// leaserecovery.DecideRelease re-run at apply time (design §R3.2): every block
// COMPLETE, or COMMITTED last blocks the leader vouched for in
// replicated_blocks (they become COMPLETE), close the file; a last block
// never written (no locations, length 0) is removed first. A last block
// that needs a recovery refuses with ErrRecoveryNeeded (StartRecovery is the
// way), one whose attempt is running with ErrRecoveryInProgress. holder must
// be the current lease holder: a decision taken on a lease that changed
// since is refused. A closed file answers unchanged.
func (s *State) opReleaseLease(now int64, op *pb.ReleaseLeaseOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	if err := checkName("lease holder", op.Holder, ErrInvalidClientName); err != nil {
		return nil, err
	}
	if len(op.ReplicatedBlocks) > MaxBlocksPerFile {
		return nil, errorf(ErrInvalidNamespaceOp, "%d replicated blocks listed", len(op.ReplicatedBlocks))
	}
	f, ok := s.ns.files.get(op.Path)
	switch {
	case !ok:
		return nil, errorf(ErrFileNotFound, "%s", op.Path)
	case !f.UnderConstruction:
		return &pb.NamespaceResult{File: s.ns.fileStatus(f), Closed: true, Unchanged: true}, nil
	case f.LeaseHolder != op.Holder:
		return nil, errorf(ErrNotLeaseHolder, "%s is held by %q, not %q", f.Path, f.LeaseHolder, op.Holder)
	}
	live := make(map[uint64]bool, len(op.ReplicatedBlocks))
	for _, id := range op.ReplicatedBlocks {
		live[id] = true
	}
	d, err := lr.DecideRelease(*s.ruleFile(f, nil, live), time.Unix(0, now))
	if err != nil {
		return nil, fromRules(err)
	}
	res := &pb.NamespaceResult{Closed: true}
	nf := f
	switch d.Action {
	case lr.ReleaseClose:
	case lr.ReleaseRemoveLastBlock:
		last := s.lastBlock(f)
		res.RemovedBlocks = []*pb.RemovedBlock{removedBlock(last)}
		nf = cloneFile(f)
		nf.BlockIds = nf.BlockIds[:len(nf.BlockIds)-1]
	case lr.ReleaseInProgress:
		return nil, errorf(ErrRecoveryInProgress, "%s: %s", f.Path, d.Reason)
	case lr.ReleaseStartRecovery:
		return nil, errorf(ErrRecoveryNeeded, "%s: %s", f.Path, d.Reason)
	default:
		return nil, errorf(ErrBlockState, "%s: %s", f.Path, d.Reason)
	}
	// A closed file holds COMPLETE blocks only: the COMMITTED ones were
	// vouched for (DecideRelease closes only then).
	st := staged{}
	for _, id := range nf.BlockIds {
		switch b := s.ns.blocks.at(id); {
		case b.State == stateComplete:
		case b.State == stateCommitted && live[id]:
			s.own(st, id).State = stateComplete
		default:
			return nil, errorf(ErrNotReplicatedYet, "block %d of %s is %s", id, f.Path, stateName(b.State))
		}
	}
	if d.Action == lr.ReleaseRemoveLastBlock {
		s.ns.removeBlock(f.BlockIds[len(f.BlockIds)-1])
	}
	s.install(st)
	nf = s.closeFile(nf, now)
	res.File = s.ns.fileStatus(nf)
	return res, nil
}

// opRegisterNode records a storage node. A registered id may be claimed
// again by the same instance (instance_id, from any address) or from the
// same gRPC and gossip addresses (a restart that kept its address); any
// other claim is refused with ErrNodeIDHeld. Another id at an address
// already registered is not refused: the older record simply stops being
// live (liveness is leader soft state).
func (s *State) opRegisterNode(now int64, op *pb.RegisterNodeOp) (*pb.NamespaceResult, error) {
	n := op.Node
	if n == nil {
		return nil, errorf(ErrInvalidNode, "no node")
	}
	if err := checkName("node id", n.Id, ErrInvalidNode); err != nil {
		return nil, err
	}
	if !nodeIDPattern.MatchString(n.Id) {
		return nil, errorf(ErrInvalidNode, "node id %q: want [A-Za-z0-9][A-Za-z0-9._:@-]*", n.Id)
	}
	if n.GrpcAddr == "" {
		return nil, errorf(ErrInvalidNode, "node %s: no gRPC address", n.Id)
	}
	for _, a := range []string{n.GrpcAddr, n.HttpAddr, n.GossipAddr} {
		if len(a) > MaxAddrBytes {
			return nil, errorf(ErrInvalidNode, "node %s: address of %d bytes", n.Id, len(a))
		}
	}
	if len(n.InstanceId) > MaxNameBytes {
		return nil, errorf(ErrInvalidNode, "node %s: instance id of %d bytes", n.Id, len(n.InstanceId))
	}
	if len(n.StorageIds) > MaxStoragesPerNode {
		return nil, errorf(ErrInvalidNode, "node %s: %d storages, at most %d", n.Id, len(n.StorageIds), MaxStoragesPerNode)
	}
	for i, sid := range n.StorageIds {
		if err := checkName("storage id", sid, ErrInvalidNode); err != nil {
			return nil, err
		}
		if contains(n.StorageIds[:i], sid) {
			return nil, errorf(ErrInvalidNode, "node %s: storage %q listed twice", n.Id, sid)
		}
	}
	rec := &pb.NodeRecord{
		Id: n.Id, GrpcAddr: n.GrpcAddr, HttpAddr: n.HttpAddr, GossipAddr: n.GossipAddr,
		StorageIds: append([]string(nil), n.StorageIds...), InstanceId: n.InstanceId,
		RegisteredUnixNanos: now, UpdatedUnixNanos: now,
	}
	if old, ok := s.ns.nodes[n.Id]; ok {
		sameInstance := n.InstanceId != "" && n.InstanceId == old.InstanceId
		sameAddr := n.GrpcAddr == old.GrpcAddr && n.GossipAddr == old.GossipAddr
		if !sameInstance && !sameAddr {
			return nil, errorf(ErrNodeIDHeld, "node id %q held by another node (instance %q at %s, gossip %s)", n.Id, old.InstanceId, old.GrpcAddr, old.GossipAddr)
		}
		rec.RegisteredUnixNanos = old.RegisteredUnixNanos
	}
	s.ns.nodes[n.Id] = rec
	return &pb.NamespaceResult{Node: rec}, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
