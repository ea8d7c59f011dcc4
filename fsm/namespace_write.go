package fsm

import (
	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
)

// The write path: create, add block, complete, append, delete, abandon and
// client-driven pipeline recovery. Each op checks everything before it
// changes anything.

const (
	stateUC        = pb.BlockState_BLOCK_STATE_UNDER_CONSTRUCTION
	stateRecovery  = pb.BlockState_BLOCK_STATE_UNDER_RECOVERY
	stateCommitted = pb.BlockState_BLOCK_STATE_COMMITTED
	stateComplete  = pb.BlockState_BLOCK_STATE_COMPLETE
)

// opCreate creates (or, with overwrite, replaces a closed) file and grants
// the lease to the client.
func (s *State) opCreate(now int64, op *pb.CreateFileOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	if op.Replication < 1 || op.Replication > MaxReplication {
		return nil, errorf(ErrInvalidReplication, "replication %d", op.Replication)
	}
	if op.BlockSize == 0 || op.BlockSize > MaxBlockSize || op.BlockSize%BlockSizeUnit != 0 {
		return nil, errorf(ErrInvalidBlockSize, "block size %d", op.BlockSize)
	}
	if err := checkClient(op.ClientName); err != nil {
		return nil, err
	}
	for d := op.Path; d != "/"; {
		d, _ = parentDir(d)
		if _, ok := s.ns.files.get(d); ok {
			return nil, errorf(ErrParentNotDirectory, "%s is a file", d)
		}
	}
	if _, ok := s.ns.dirs[op.Path]; ok {
		return nil, errorf(ErrIsDirectory, "%s", op.Path)
	}
	res := &pb.NamespaceResult{}
	if old, ok := s.ns.files.get(op.Path); ok {
		switch {
		case !op.Overwrite:
			return nil, errorf(ErrFileExists, "%s", op.Path)
		case old.UnderConstruction:
			return nil, s.competingWriter(old, op.ClientName)
		}
		res.RemovedBlocks = s.removedBlocks(old)
		s.ns.removeFile(old)
	}
	f := &pb.FileRecord{
		Path: op.Path, Replication: op.Replication, BlockSize: op.BlockSize,
		UnderConstruction: true, LeaseHolder: op.ClientName,
		CtimeUnixNanos: now, MtimeUnixNanos: now,
	}
	s.ns.putFile(f)
	res.File = s.ns.fileStatus(f)
	return res, nil
}

// opAddBlock commits the previous block and allocates the next one (id
// from next_block_id, GS from next_gs) on the leader's targets.
func (s *State) opAddBlock(now int64, op *pb.AddBlockOp) (*pb.NamespaceResult, error) {
	f, err := s.openForWrite(op.Path, op.ClientName)
	if err != nil {
		return nil, err
	}
	if len(f.BlockIds) >= MaxBlocksPerFile {
		return nil, errorf(ErrTooManyBlocks, "%s has %d blocks", f.Path, len(f.BlockIds))
	}
	if err := s.checkTargets(op.Targets, f.Replication); err != nil {
		return nil, err
	}
	st := staged{}
	if err := s.commitLast(f, op.ClientName, op.Previous, st); err != nil {
		return nil, err
	}
	if err := s.markReplicated(f, op.ReplicatedBlocks, st); err != nil {
		return nil, err
	}
	// Only the new last block and the one before it may be incomplete.
	if n := len(f.BlockIds); n >= 2 {
		for _, id := range f.BlockIds[:n-1] {
			if b := s.get(st, id); b.State != stateComplete {
				return nil, errorf(ErrNotReplicatedYet, "block %d of %s is %s", id, f.Path, stateName(b.State))
			}
		}
	}
	s.install(st)
	b := &pb.BlockRecord{
		Id: s.ns.nextBlockID, Gs: s.ns.allocGS(), State: stateUC, Path: f.Path,
		ExpectedLocations: append([]string(nil), op.Targets...),
	}
	s.ns.nextBlockID++
	s.ns.putBlock(b)
	nf := cloneFile(f)
	nf.BlockIds = append(nf.BlockIds, b.Id)
	nf.MtimeUnixNanos = now
	s.ns.putFile(nf)
	return &pb.NamespaceResult{Block: b, File: s.ns.fileStatus(nf)}, nil
}

// opComplete commits the last block and closes the file, but only when
// every block is then COMPLETE (leaserecovery.CanClose; design §R5.4 with
// dfs.namenode.file.close.num-committed-allowed = 0): a block is COMPLETE
// once the leader vouches, in replicated_blocks, that it saw it minimally
// replicated. Otherwise it refuses with ErrNotReplicatedYet and changes
// nothing (the client retries, as HDFS's complete() returning false). A
// retry on a file already closed with the same last block succeeds
// unchanged (HDFS-3031).
func (s *State) opComplete(now int64, op *pb.CompleteFileOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	if err := checkClient(op.ClientName); err != nil {
		return nil, err
	}
	f, ok := s.ns.files.get(op.Path)
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s", op.Path)
	}
	if !f.UnderConstruction {
		if len(f.BlockIds) == 0 && op.Last.GetId() == 0 {
			return &pb.NamespaceResult{File: s.ns.fileStatus(f), Closed: true, Unchanged: true}, nil
		}
		c := lr.BlockCommit{Caller: op.ClientName, BlockID: op.Last.GetId(), GS: op.Last.GetGs(), NumBytes: int64(op.Last.GetNumBytes())}
		if out, err := lr.CheckCommitBlock(s.ruleFile(f, nil, nil), c); err != nil {
			return nil, fromRules(err)
		} else if out.Noop {
			return &pb.NamespaceResult{File: s.ns.fileStatus(f), Closed: true, Unchanged: true}, nil
		}
		return nil, errorf(ErrNotUnderConstruction, "%s is closed", f.Path)
	}
	if _, err := s.openForWrite(op.Path, op.ClientName); err != nil {
		return nil, err
	}
	st := staged{}
	if err := s.commitLast(f, op.ClientName, op.Last, st); err != nil {
		return nil, err
	}
	if err := s.markReplicated(f, op.ReplicatedBlocks, st); err != nil {
		return nil, err
	}
	if !lr.CanClose(*s.ruleFile(f, st, nil)) {
		for _, id := range f.BlockIds {
			if b := s.get(st, id); b.State != stateComplete {
				return nil, errorf(ErrNotReplicatedYet, "block %d of %s is %s", id, f.Path, stateName(b.State))
			}
		}
	}
	s.install(st)
	nf := s.closeFile(f, now)
	return &pb.NamespaceResult{File: s.ns.fileStatus(nf), Closed: true}, nil
}

// closeFile stores f closed, its lease released.
func (s *State) closeFile(f *pb.FileRecord, now int64) *pb.FileRecord {
	nf := cloneFile(f)
	nf.UnderConstruction, nf.LeaseHolder, nf.MtimeUnixNanos = false, "", now
	s.ns.putFile(nf)
	return nf
}

// opAppend reopens a closed file for the client. A partial last block goes
// back to UNDER_CONSTRUCTION with a fresh GS (on the leader's targets, or
// its expected locations); after a full one the next AddBlock starts a new
// block.
func (s *State) opAppend(op *pb.AppendFileOp) (*pb.NamespaceResult, error) {
	if err := validFilePath(op.Path); err != nil {
		return nil, err
	}
	if err := checkClient(op.ClientName); err != nil {
		return nil, err
	}
	f, ok := s.ns.files.get(op.Path)
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s", op.Path)
	}
	if f.UnderConstruction {
		return nil, s.competingWriter(f, op.ClientName)
	}
	if len(op.Targets) > 0 {
		if err := s.checkTargets(op.Targets, f.Replication); err != nil {
			return nil, err
		}
	}
	for _, id := range f.BlockIds {
		if b := s.ns.blocks.at(id); b.State != stateComplete {
			return nil, errorf(ErrBlockState, "block %d of closed file %s is %s", id, f.Path, stateName(b.State))
		}
	}
	res := &pb.NamespaceResult{}
	if last := s.lastBlock(f); last != nil && last.NumBytes < f.BlockSize {
		b := cloneBlock(last)
		b.Gs, b.State = s.ns.allocGS(), stateUC
		if len(op.Targets) > 0 {
			b.ExpectedLocations = append([]string(nil), op.Targets...)
		}
		s.ns.putBlock(b)
		res.Block = b
	}
	nf := cloneFile(f)
	nf.UnderConstruction, nf.LeaseHolder = true, op.ClientName
	s.ns.putFile(nf)
	res.File = s.ns.fileStatus(nf)
	return res, nil
}

// opDelete removes a file, or with recursive every file under a directory,
// and their blocks (returned for invalidation). An open file may be
// deleted; its lease goes with it.
func (s *State) opDelete(op *pb.DeleteFileOp) (*pb.NamespaceResult, error) {
	if err := ValidPath(op.Path); err != nil {
		return nil, err
	}
	files := s.ns.filesUnder(op.Path)
	_, isFile := s.ns.files.get(op.Path)
	switch {
	case len(files) == 0 && op.Path == "/":
		return &pb.NamespaceResult{Unchanged: true}, nil
	case len(files) == 0:
		return nil, errorf(ErrFileNotFound, "%s", op.Path)
	case !isFile && !op.Recursive:
		return nil, errorf(ErrDirectoryNotEmpty, "%s", op.Path)
	}
	n := 0
	for _, f := range files {
		n += len(f.BlockIds)
	}
	if n > MaxDeleteBlocks {
		return nil, errorf(ErrDeleteTooLarge, "%s holds %d blocks, at most %d per delete", op.Path, n, MaxDeleteBlocks)
	}
	res := &pb.NamespaceResult{RemovedFiles: uint64(len(files))}
	for _, f := range files {
		res.RemovedBlocks = append(res.RemovedBlocks, s.removedBlocks(f)...)
		s.ns.removeFile(f)
	}
	return res, nil
}

// opAbandon drops the holder's last block while it is still
// UNDER_CONSTRUCTION (pipeline setup failed, design §R5.2).
func (s *State) opAbandon(now int64, op *pb.AbandonBlockOp) (*pb.NamespaceResult, error) {
	f, err := s.openForWrite(op.Path, op.ClientName)
	if err != nil {
		return nil, err
	}
	b, err := s.blockOfFile(f, op.BlockId)
	if err != nil {
		return nil, err
	}
	if last := s.lastBlock(f); last.Id != b.Id {
		return nil, errorf(ErrNotLastBlock, "block %d, the last block of %s is %d", b.Id, f.Path, last.Id)
	}
	if b.State != stateUC {
		return nil, errorf(ErrBlockState, "block %d is %s", b.Id, stateName(b.State))
	}
	s.ns.removeBlock(b.Id)
	nf := cloneFile(f)
	nf.BlockIds = nf.BlockIds[:len(nf.BlockIds)-1]
	nf.MtimeUnixNanos = now
	s.ns.putFile(nf)
	return &pb.NamespaceResult{File: s.ns.fileStatus(nf), RemovedBlocks: []*pb.RemovedBlock{removedBlock(b)}}, nil
}

// pipelineFile finds the file of a pipeline request; the block rules are
// leaserecovery's.
func (s *State) pipelineFile(path, client string) (*pb.FileRecord, error) {
	if err := validFilePath(path); err != nil {
		return nil, err
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	f, ok := s.ns.files.get(path)
	if !ok {
		return nil, errorf(ErrFileNotFound, "%s", path)
	}
	return f, nil
}

// opUpdateBlockForPipeline allocates a GS for a new pipeline (design §R5.3
// step 6, leaserecovery.CheckUpdateBlockForPipeline: the holder's last
// block, still UNDER_CONSTRUCTION — a recovery fences the writer). The block
// keeps its GS until UpdatePipeline.
func (s *State) opUpdateBlockForPipeline(op *pb.UpdateBlockForPipelineOp) (*pb.NamespaceResult, error) {
	f, err := s.pipelineFile(op.Path, op.ClientName)
	if err != nil {
		return nil, err
	}
	if err := lr.CheckUpdateBlockForPipeline(s.ruleFile(f, nil, nil), op.BlockId, op.ClientName); err != nil {
		return nil, fromRules(err)
	}
	return &pb.NamespaceResult{Block: s.ns.blocks.at(op.BlockId), NewGs: s.ns.allocGS()}, nil
}

// opUpdatePipeline records a recovered pipeline (design §R5.3 step 8, §R9.4,
// leaserecovery.CheckUpdatePipeline): old_gs must be the block's GS (else
// the update is stale), new_gs newer than it and already allocated, the
// length not below the recorded one; here also at most the block size, on
// 1..replication registered nodes.
func (s *State) opUpdatePipeline(op *pb.UpdatePipelineOp) (*pb.NamespaceResult, error) {
	f, err := s.pipelineFile(op.Path, op.ClientName)
	if err != nil {
		return nil, err
	}
	u := lr.PipelineUpdate{
		Caller: op.ClientName, BlockID: op.BlockId, OldGS: op.OldGs, NewGS: op.NewGs,
		NewLength: int64(op.NewLength), Nodes: toNodeIDs(op.NewNodes),
	}
	rb, err := lr.CheckUpdatePipeline(s.ruleFile(f, nil, nil), u, s.ns.nextGS-1)
	if err != nil {
		return nil, fromRules(err)
	}
	if op.NewLength > f.BlockSize {
		return nil, errorf(ErrBlockLength, "block %d: length %d over the block size %d", op.BlockId, op.NewLength, f.BlockSize)
	}
	if err := s.checkTargets(op.NewNodes, f.Replication); err != nil {
		return nil, err
	}
	nb := cloneBlock(s.ns.blocks.at(op.BlockId))
	nb.Gs, nb.NumBytes, nb.ExpectedLocations = rb.GS, uint64(rb.NumBytes), fromNodeIDs(rb.Expected)
	s.ns.putBlock(nb)
	return &pb.NamespaceResult{Block: nb}, nil
}

func stateName(st pb.BlockState) string {
	switch st {
	case stateUC:
		return "UNDER_CONSTRUCTION"
	case stateRecovery:
		return "UNDER_RECOVERY"
	case stateCommitted:
		return "COMMITTED"
	case stateComplete:
		return "COMPLETE"
	}
	return st.String()
}
