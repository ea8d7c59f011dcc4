package fsm

import (
	"fmt"
	"strings"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
	lr "github.com/logbookhq/logbook/leaserecovery"
	"google.golang.org/protobuf/proto"
)

// NamespaceResult is the outcome of one NAMESPACE command.
type NamespaceResult struct {
	// Result is the op's result (nil when Err is set). Shared with the
	// state: read only.
	Result *pb.NamespaceResult
	// Seq is the seq of the op's audit event; 0 when refused or unchanged.
	Seq   uint64
	Index uint64
	// Duplicate is true when the op was a retry answered from the session
	// (Result is decoded from the original op's audit event).
	Duplicate bool
	Err       error
}

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// applyNamespace applies one namespace op. A refused op changes nothing:
// no state, no session, no event. The error return is for the caller to
// halt on (an audit event that cannot be encoded).
func (s *State) applyNamespace(index uint64, now int64, c *pb.NamespaceCommand) (NamespaceResult, error) {
	refuse := func(err error) (NamespaceResult, error) { return NamespaceResult{Index: index, Err: err}, nil }
	if c.ClientId != "" {
		// Look, do not touch: a refused or answered retry leaves the
		// session as it was.
		if sess, ok := s.sessions[c.ClientId]; ok {
			if c.RequestSeq <= sess.ackedSeq {
				return refuse(ErrSessionAcked)
			}
			if r, ok := sess.result(c.RequestSeq); ok {
				return s.namespaceRetry(index, c, r), nil
			}
			if sess.expired(c.RequestSeq) {
				return refuse(ErrSessionResultExpired)
			}
		} else if c.RequestSeq == 0 {
			return refuse(ErrSessionAcked)
		} else if c.SessionEstablished && s.sessionExpired(c.ClientId) {
			return refuse(ErrSessionExpired)
		}
	}
	res, typ, err := s.applyNamespaceOp(now, c.Op)
	if err != nil {
		return refuse(err)
	}
	if res.Unchanged {
		return NamespaceResult{Result: res, Index: index}, nil
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.NamespaceEvent{Op: c.Op, Result: res, UnixNanos: now})
	if err != nil {
		return NamespaceResult{}, fmt.Errorf("fsm: encode audit event at index %d: %w", index, err)
	}
	seq := s.nextSeq
	s.addEvent(typ, payload, c.ClientId, c.RequestSeq, index)
	if s.ns.auditFrom == 0 {
		s.ns.auditFrom = seq
	}
	if c.ClientId != "" {
		sess := s.session(c.ClientId, index)
		s.keep(sess, keptResult{requestSeq: c.RequestSeq, firstSeq: seq, count: 1}, c.AckedSeq, s.LogFormat())
	}
	return NamespaceResult{Result: res, Seq: seq, Index: index}, nil
}

// namespaceRetry answers a retried request from its audit event: the
// session keeps the event's seq, the event keeps the result.
func (s *State) namespaceRetry(index uint64, c *pb.NamespaceCommand, r keptResult) NamespaceResult {
	if r.firstSeq < s.firstSeq || r.firstSeq >= s.nextSeq {
		return NamespaceResult{Index: index, Err: fmt.Errorf("%w: its audit event %d was trimmed", ErrSessionResultExpired, r.firstSeq)}
	}
	e := s.events.at(r.firstSeq)
	if !ReservedEventType(e.Type) || e.ClientId != c.ClientId || e.RequestSeq != c.RequestSeq {
		return NamespaceResult{Index: index, Err: errorf(ErrInvalidNamespaceOp, "request seq %d of client %q was used by another kind of request", c.RequestSeq, c.ClientId)}
	}
	var ev pb.NamespaceEvent
	if err := proto.Unmarshal(e.Payload, &ev); err != nil {
		return NamespaceResult{Index: index, Err: fmt.Errorf("%w: audit event %d: %v", ErrSessionResultExpired, e.Seq, err)}
	}
	return NamespaceResult{Result: ev.Result, Seq: e.Seq, Index: index, Duplicate: true}
}

// applyNamespaceOp dispatches one op; it returns the result and the audit
// event type, or an error and changes nothing.
func (s *State) applyNamespaceOp(now int64, op *pb.NamespaceOp) (res *pb.NamespaceResult, typ string, err error) {
	missing := errorf(ErrInvalidNamespaceOp, "empty op")
	switch x := op.GetOp().(type) {
	case *pb.NamespaceOp_CreateFile:
		if x.CreateFile == nil {
			return nil, "", missing
		}
		res, err = s.opCreate(now, x.CreateFile)
		typ = EventCreate
	case *pb.NamespaceOp_AddBlock:
		if x.AddBlock == nil {
			return nil, "", missing
		}
		res, err = s.opAddBlock(now, x.AddBlock)
		typ = EventAddBlock
	case *pb.NamespaceOp_CompleteFile:
		if x.CompleteFile == nil {
			return nil, "", missing
		}
		res, err = s.opComplete(now, x.CompleteFile)
		typ = EventComplete
	case *pb.NamespaceOp_AppendFile:
		if x.AppendFile == nil {
			return nil, "", missing
		}
		res, err = s.opAppend(x.AppendFile)
		typ = EventAppend
	case *pb.NamespaceOp_DeleteFile:
		if x.DeleteFile == nil {
			return nil, "", missing
		}
		res, err = s.opDelete(x.DeleteFile)
		typ = EventDelete
	case *pb.NamespaceOp_AbandonBlock:
		if x.AbandonBlock == nil {
			return nil, "", missing
		}
		res, err = s.opAbandon(now, x.AbandonBlock)
		typ = EventAbandonBlock
	case *pb.NamespaceOp_UpdateBlockForPipeline:
		if x.UpdateBlockForPipeline == nil {
			return nil, "", missing
		}
		res, err = s.opUpdateBlockForPipeline(x.UpdateBlockForPipeline)
		typ = EventUpdateBlockForPipeline
	case *pb.NamespaceOp_UpdatePipeline:
		if x.UpdatePipeline == nil {
			return nil, "", missing
		}
		res, err = s.opUpdatePipeline(x.UpdatePipeline)
		typ = EventUpdatePipeline
	case *pb.NamespaceOp_StartRecovery:
		if x.StartRecovery == nil {
			return nil, "", missing
		}
		res, err = s.opStartRecovery(now, x.StartRecovery)
		typ = EventRecoveryStarted
	case *pb.NamespaceOp_CommitBlockSync:
		if x.CommitBlockSync == nil {
			return nil, "", missing
		}
		res, err = s.opCommitBlockSync(now, x.CommitBlockSync)
		typ = EventRecoveryCommitted
	case *pb.NamespaceOp_ReleaseLease:
		if x.ReleaseLease == nil {
			return nil, "", missing
		}
		res, err = s.opReleaseLease(now, x.ReleaseLease)
		typ = EventLeaseReleased
	case *pb.NamespaceOp_RegisterNode:
		if x.RegisterNode == nil {
			return nil, "", missing
		}
		res, err = s.opRegisterNode(now, x.RegisterNode)
		typ = EventNodeRegistered
	case *pb.NamespaceOp_AddCacheDirective:
		if x.AddCacheDirective == nil {
			return nil, "", missing
		}
		res, err = s.opAddCacheDirective(now, x.AddCacheDirective)
		typ = EventCacheAdded
	case *pb.NamespaceOp_RemoveCacheDirective:
		if x.RemoveCacheDirective == nil {
			return nil, "", missing
		}
		res, err = s.opRemoveCacheDirective(x.RemoveCacheDirective)
		typ = EventCacheRemoved
	default:
		return nil, "", missing
	}
	if err != nil {
		return nil, "", err
	}
	return res, typ, nil
}

// Small shared checks.

// validFilePath: a path that can name a file ("/" cannot).
func validFilePath(p string) error {
	if err := ValidPath(p); err != nil {
		return err
	}
	if p == "/" {
		return errorf(ErrIsDirectory, "/")
	}
	return nil
}

// checkName bounds a client name, holder or id: 1..MaxNameBytes, no NUL.
func checkName(what, n string, sentinel error) error {
	switch {
	case n == "":
		return errorf(sentinel, "empty %s", what)
	case len(n) > MaxNameBytes:
		return errorf(sentinel, "%s of %d bytes, at most %d", what, len(n), MaxNameBytes)
	case strings.IndexByte(n, 0) >= 0:
		return errorf(sentinel, "%s contains a NUL byte", what)
	}
	return nil
}

// checkClient: client names may not use the reserved prefix (the
// coordinator's own lease holder lives there).
func checkClient(n string) error {
	if err := checkName("client name", n, ErrInvalidClientName); err != nil {
		return err
	}
	if ReservedEventType(n) || n == RecoveryLeaseHolder {
		return errorf(ErrInvalidClientName, "%q is reserved for the coordinator", n)
	}
	return nil
}

// checkTargets: 1..max distinct registered nodes.
func (s *State) checkTargets(targets []string, max uint32) error {
	if len(targets) == 0 || len(targets) > int(max) {
		return errorf(ErrInvalidTargets, "%d targets, want 1..%d", len(targets), max)
	}
	for i, t := range targets {
		for _, u := range targets[:i] {
			if t == u {
				return errorf(ErrInvalidTargets, "node %q listed twice", t)
			}
		}
		if _, ok := s.ns.nodes[t]; !ok {
			return errorf(ErrNodeNotFound, "target %q", t)
		}
	}
	return nil
}

// openForWrite finds a file the client holds the lease on.
func (s *State) openForWrite(path, client string) (*pb.FileRecord, error) {
	if err := validFilePath(path); err != nil {
		return nil, err
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	f, ok := s.ns.files.get(path)
	switch {
	case !ok:
		return nil, errorf(ErrFileNotFound, "%s", path)
	case !f.UnderConstruction:
		return nil, errorf(ErrNotUnderConstruction, "%s is closed", path)
	case f.LeaseHolder != client:
		return nil, errorf(ErrNotLeaseHolder, "%s is held by %q, not %q", path, f.LeaseHolder, client)
	}
	return f, nil
}

// competingWriter is the refusal for a create or append of a file another
// writer has open (design §R3.5, the part decidable from replicated state:
// soft-limit expiry is leader-local, so the leader releases or recovers the
// lease first and retries).
func (s *State) competingWriter(f *pb.FileRecord, client string) error {
	if f.LeaseHolder == client {
		return errorf(ErrAlreadyLeaseHolder, "%s is already open by %q", f.Path, client)
	}
	if last := s.lastBlock(f); last != nil && last.State == pb.BlockState_BLOCK_STATE_UNDER_RECOVERY {
		return errorf(ErrRecoveryInProgress, "%s: block %d, recovery id %d", f.Path, last.Id, last.Recovery.GetRecoveryId())
	}
	return errorf(ErrFileBeingWritten, "file %s is being written by %s", f.Path, f.LeaseHolder)
}

func (s *State) lastBlock(f *pb.FileRecord) *pb.BlockRecord {
	if n := len(f.BlockIds); n > 0 {
		return s.ns.blocks.at(f.BlockIds[n-1])
	}
	return nil
}

// blockOfFile finds a block of f by id.
func (s *State) blockOfFile(f *pb.FileRecord, id uint64) (*pb.BlockRecord, error) {
	b, ok := s.ns.blocks.get(id)
	if !ok || b.Path != f.Path {
		return nil, errorf(ErrBlockNotFound, "block %d of %s", id, f.Path)
	}
	return b, nil
}

func removedBlock(b *pb.BlockRecord) *pb.RemovedBlock {
	return &pb.RemovedBlock{Id: b.Id, Gs: b.Gs, NumBytes: b.NumBytes, Locations: append([]string(nil), b.ExpectedLocations...)}
}

func (s *State) removedBlocks(f *pb.FileRecord) []*pb.RemovedBlock {
	out := make([]*pb.RemovedBlock, 0, len(f.BlockIds))
	for _, id := range f.BlockIds {
		out = append(out, removedBlock(s.ns.blocks.at(id)))
	}
	return out
}

// staged holds blocks an op changes: fresh records, installed only once
// every check passed.
type staged map[uint64]*pb.BlockRecord

func (s *State) get(st staged, id uint64) *pb.BlockRecord {
	if b, ok := st[id]; ok {
		return b
	}
	return s.ns.blocks.at(id)
}

// own returns a staged (writable) copy of block id.
func (s *State) own(st staged, id uint64) *pb.BlockRecord {
	if b, ok := st[id]; ok {
		return b
	}
	b := cloneBlock(s.ns.blocks.at(id))
	st[id] = b
	return b
}

func (s *State) install(st staged) {
	for _, b := range st {
		s.ns.putBlock(b)
	}
}

// markReplicated stages COMPLETE for every COMMITTED block of f the leader
// vouched for as minimally replicated (leaserecovery.CanComplete); other
// ids are ignored (the leader's view may be a little stale).
func (s *State) markReplicated(f *pb.FileRecord, ids []uint64, st staged) error {
	if len(ids) > MaxBlocksPerFile {
		return errorf(ErrInvalidNamespaceOp, "%d replicated blocks listed", len(ids))
	}
	for _, id := range ids {
		if b := s.get(st, id); b != nil && b.Path == f.Path && lr.CanComplete(ruleBlock(b, true), 1, 1) {
			s.own(st, id).State = pb.BlockState_BLOCK_STATE_COMPLETE
		}
	}
	return nil
}

// commitLast stages the client's commit of the file's last block by
// leaserecovery.CheckCommitBlock (design §R5.1/§R5.4, §R9.4): the GS must be the
// block's, the length at least the one recorded (and at most the block
// size); a block already committed must match exactly (a retry, changing
// nothing); a block under recovery is fenced. A file without blocks takes
// no block.
func (s *State) commitLast(f *pb.FileRecord, client string, ref *pb.BlockRef, st staged) error {
	last := s.lastBlock(f)
	switch {
	case last == nil && ref.GetId() != 0:
		return errorf(ErrNotLastBlock, "block %d: %s has no blocks", ref.GetId(), f.Path)
	case last == nil:
		return nil
	case ref == nil:
		return errorf(ErrNotLastBlock, "no block given, the last block of %s is %d", f.Path, last.Id)
	}
	out, err := lr.CheckCommitBlock(s.ruleFile(f, st, nil), lr.BlockCommit{Caller: client, BlockID: ref.Id, GS: ref.Gs, NumBytes: int64(ref.NumBytes)})
	if err != nil {
		return fromRules(err)
	}
	if out.Noop {
		return nil
	}
	if ref.NumBytes > f.BlockSize {
		return errorf(ErrBlockLength, "commit block %d with length %d over the block size %d", last.Id, ref.NumBytes, f.BlockSize)
	}
	b := s.own(st, last.Id)
	b.NumBytes, b.State = uint64(out.Block.NumBytes), fromRuleState(out.Block.State)
	return nil
}
