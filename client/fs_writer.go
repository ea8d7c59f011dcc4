package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc/codes"
)

const (
	// maxPipelineRecoveries bounds the recoveries of one pipeline failure
	// (design §R5.3 step 2).
	maxPipelineRecoveries = 5
	// maxBlockSetups bounds the AddBlock attempts of one block (§R5.2).
	maxBlockSetups = 4
	// maxNodeReplacements bounds the nodes tried as a replacement in one
	// recovery (§R5.3 step 5).
	maxNodeReplacements = 3
	// replaceNodeTimeout bounds asking the leader for a replacement node.
	replaceNodeTimeout = 10 * time.Second
	// restartRetryFirst and restartRetryMax space the pipeline setups
	// tried while a restarting node is awaited (design §R5.3 step 3: at most
	// every 4 s).
	restartRetryFirst = 500 * time.Millisecond
	restartRetryMax   = 4 * time.Second
)

// FileWriter writes one file. Write, Sync and Close are for one goroutine
// at a time. Writes made through Write are bounded by the context given to
// Create or Append; WriteContext takes its own.
type FileWriter struct {
	fs          *FS
	path        string
	blockSize   int64
	replication int
	ctx         context.Context
	// synced (hflushed) or appended: the DEFAULT replace-node policy then
	// always replaces a lost node.
	synced, appended bool

	// beforeEndOfBlock, set by tests only, runs once every byte of a
	// block is acked, before the packet that ends it (a fault there is a
	// close recovery), as HDFS's DataNodeFaultInjector does.
	beforeEndOfBlock func(w *FileWriter)

	blk  *writeBlock  // the block being written, nil between blocks
	last *pb.BlockRef // the file's last block as this writer knows it
	err  error        // sticky: the writer failed for good
	done bool

	stopRenew context.CancelFunc
	renewDone chan struct{}
}

// writeBlock is the block being written and its pipeline.
type writeBlock struct {
	id, gs uint64
	nodes  []*pb.NodeLocation
	pipe   *blockio.Pipeline
	// data holds the block's bytes [base, written): base is at or below the
	// acked length rounded down to a chunk, so unacked packets can be resent.
	data    []byte
	base    int64
	written int64
	// sent is the end of the furthest packet sent; lastSent: the packet
	// ending the block is on its way (sent once every byte was acked, so a
	// failure after it is a close recovery).
	sent     int64
	lastSent bool
	// appendGS is the GS the nodes' replicas had before an append whose
	// pipeline never opened (0 otherwise): recovery then uses the append
	// recovery stage from that GS.
	appendGS uint64
	// closed: a close recovery finalized every replica; nothing to flush.
	closed bool
	// failed lists the nodes dropped from this block's pipeline.
	failed []string
	// token is the block access token of the last file op on the block
	// (nil without ACLs).
	token []byte
}

func (b *writeBlock) ref() *pb.BlockRef {
	return &pb.BlockRef{Id: b.id, Gs: b.gs, NumBytes: uint64(b.written)}
}

// Create creates path and returns its writer, holding the file's lease.
func (f *FS) Create(ctx context.Context, path string, opts CreateOptions) (*FileWriter, error) {
	if opts.Replication == 0 {
		opts.Replication = DefaultReplication
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = DefaultBlockSize
	}
	resp, err := f.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
		return ns.Create(ctx, &pb.CreateRequest{
			Session: sess, Path: path, Replication: opts.Replication, BlockSize: opts.BlockSize,
			ClientName: f.clientName(), Overwrite: opts.Overwrite,
		})
	})
	if err != nil {
		return nil, err
	}
	return f.newWriter(ctx, path, resp.GetResult().GetFile()), nil
}

func (f *FS) newWriter(ctx context.Context, path string, st *pb.FileStatus) *FileWriter {
	w := &FileWriter{fs: f, path: path, blockSize: int64(st.GetBlockSize()), replication: int(st.GetReplication()), ctx: ctx}
	if w.blockSize <= 0 {
		w.blockSize = DefaultBlockSize
	}
	w.startRenewal(ctx)
	return w
}

// Append reopens a closed file for writing at its end. A partial last
// block is continued in place (its last partial chunk is read back first,
// as every packet starts at a chunk boundary).
func (f *FS) Append(ctx context.Context, path string) (*FileWriter, error) {
	before, err := f.statFile(ctx, path)
	if err != nil {
		return nil, err
	}
	resp, err := f.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
		return ns.Append(ctx, &pb.AppendFileRequest{Session: sess, Path: path, ClientName: f.clientName()})
	})
	if err != nil {
		return nil, err
	}
	w := f.newWriter(ctx, path, resp.GetResult().GetFile())
	w.appended = true
	if k := len(before.Blocks); k > 0 {
		b := before.Blocks[k-1]
		w.last = &pb.BlockRef{Id: b.ID, Gs: b.GS, NumBytes: b.Length}
	}
	nb := resp.GetResult().GetBlock()
	if nb == nil || len(before.Blocks) == 0 || int64(nb.GetNumBytes()) >= w.blockSize {
		return w, nil // the next write starts a new block
	}
	old := before.Blocks[len(before.Blocks)-1]
	if err := w.reopen(ctx, old, nb, resp.GetLocations(), resp.GetBlockToken()); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// reopen sets up an append pipeline on the partial last block.
func (w *FileWriter) reopen(ctx context.Context, old BlockInfo, nb *pb.BlockRecord, locs []*pb.NodeLocation, token []byte) error {
	length := int64(old.Length)
	if len(locs) == 0 {
		return fmt.Errorf("logbook: append %s: block %d has no locations", w.path, old.ID)
	}
	tailFrom := length / blockio.ChunkSize * blockio.ChunkSize
	tail, err := w.fs.readFrom(ctx, locs, old.ID, old.GS, token, tailFrom, length-tailFrom)
	if err != nil {
		return fmt.Errorf("logbook: append %s: read the last chunk: %w", w.path, err)
	}
	setup := &pb.WriteSetup{
		Pool: w.fs.pool, BlockId: old.ID, Gs: old.GS, NewGs: nb.GetGs(), Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND,
		MinBytesRcvd: length, MaxBytesRcvd: length, ClientName: w.fs.clientName(), Targets: addrs(locs[1:]), BlockToken: token,
	}
	w.blk = &writeBlock{id: old.ID, gs: nb.GetGs(), nodes: locs, data: tail, base: tailFrom, written: length, sent: length, token: token}
	w.last = w.blk.ref()
	pipe, err := w.fs.openPipeline(ctx, locs[0], setup)
	if err != nil {
		// Append recovery (design §R5.3): the replicas may still be at the
		// old GS, or some already at the append's.
		w.blk.appendGS = old.GS
		return w.recoverPipeline(ctx, err)
	}
	w.blk.pipe = pipe
	return nil
}

func addrs(locs []*pb.NodeLocation) []string {
	out := make([]string, len(locs))
	for i, l := range locs {
		out[i] = l.GetGrpcAddr()
	}
	return out
}

func (f *FS) openPipeline(ctx context.Context, first *pb.NodeLocation, setup *pb.WriteSetup) (*blockio.Pipeline, error) {
	cc, err := f.c.conn(first.GetGrpcAddr())
	if err != nil {
		return nil, err
	}
	return blockio.Open(ctx, cc, setup, blockio.Options{Address: first.GetGrpcAddr()})
}

// startRenewal renews the lease in the background until Close or Abort,
// at once when this FS does not know the leader's lease limits yet, then
// well within them (FS.renewLease).
func (w *FileWriter) startRenewal(ctx context.Context) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stopRenew, w.renewDone = cancel, make(chan struct{})
	go func() {
		defer close(w.renewDone)
		t := time.NewTimer(time.Duration(w.fs.renewPeriod.Load()))
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			if w.fs.c.isClosed() {
				return // the client is gone: so is the lease
			}
			t.Reset(w.fs.renewLease(rctx))
		}
	}()
}

// renewLease renews the client's leases and returns when to renew next:
// half the soft limit or a quarter of the hard one, whichever is shorter,
// within [100 ms, renewEvery].
func (f *FS) renewLease(ctx context.Context) time.Duration {
	period := f.renewEvery
	if p := time.Duration(f.renewPeriod.Load()); p > 0 {
		period = p
	}
	actx, cancel := context.WithTimeout(ctx, period)
	defer cancel()
	_ = f.namespace(actx, func(ctx context.Context, ns pb.NamespaceClient) error {
		r, err := ns.RenewLease(ctx, &pb.RenewLeaseRequest{ClientName: f.clientName()})
		if err == nil && r.GetSoftLimitMs() > 0 && r.GetHardLimitMs() > 0 {
			p := min(time.Duration(r.GetSoftLimitMs())*time.Millisecond/2, time.Duration(r.GetHardLimitMs())*time.Millisecond/4)
			period = min(max(p, 100*time.Millisecond), f.renewEvery)
			f.renewPeriod.Store(int64(period))
		}
		return err
	})
	return period
}

func (w *FileWriter) stopRenewal() {
	w.stopRenew()
	<-w.renewDone
}

// Write buffers p into packets and streams them down the pipeline of the
// current block, starting a new block whenever one is full.
func (w *FileWriter) Write(p []byte) (int, error) { return w.WriteContext(w.ctx, p) }

// WriteContext is Write under ctx.
func (w *FileWriter) WriteContext(ctx context.Context, p []byte) (int, error) {
	if err := w.usable(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if w.blk == nil {
			if err := w.fail(w.nextBlock(ctx)); err != nil {
				return n, err
			}
		}
		b := w.blk
		k := int(min(int64(len(p)), w.blockSize-b.written))
		b.data = append(b.data, p[:k]...)
		b.written += int64(k)
		p, n = p[k:], n+k
		for b.written-chunkFloor(b.sent) >= blockio.MaxPacketData {
			if err := w.fail(w.sendNext(ctx, false, false)); err != nil {
				return n, err
			}
		}
		if b.written == w.blockSize {
			if err := w.fail(w.finishBlock(ctx)); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (w *FileWriter) usable() error {
	switch {
	case w.err != nil:
		return w.err
	case w.done:
		return fmt.Errorf("%w: writer of %s is closed", ErrFailedPrecondition, w.path)
	}
	return nil
}

// fail makes err sticky.
func (w *FileWriter) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

func chunkFloor(n int64) int64 { return n / blockio.ChunkSize * blockio.ChunkSize }

// nextBlock allocates the next block and opens its pipeline; a setup
// failure abandons the block and asks again without the failed node.
func (w *FileWriter) nextBlock(ctx context.Context) error {
	var excluded []string
	var lastErr error
	for attempt := 0; attempt < maxBlockSetups; attempt++ {
		resp, err := w.fs.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
			return ns.AddBlock(ctx, &pb.AddBlockRequest{Session: sess, Path: w.path, ClientName: w.fs.clientName(), Previous: w.last, ExcludedNodes: excluded})
		})
		if err != nil {
			return err
		}
		blk := resp.GetResult().GetBlock()
		locs := resp.GetLocations()
		if len(locs) == 0 {
			return fmt.Errorf("logbook: add block to %s: no pipeline nodes", w.path)
		}
		setup := &pb.WriteSetup{
			Pool: w.fs.pool, BlockId: blk.GetId(), Gs: blk.GetGs(), Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE,
			ExpectedLength: w.blockSize, ClientName: w.fs.clientName(), Targets: addrs(locs[1:]), BlockToken: resp.GetBlockToken(),
		}
		pipe, err := w.fs.openPipeline(ctx, locs[0], setup)
		if err == nil {
			w.blk = &writeBlock{id: blk.GetId(), gs: blk.GetGs(), nodes: locs, pipe: pipe, token: resp.GetBlockToken()}
			w.last = w.blk.ref()
			return nil
		}
		lastErr = err
		var be *blockio.Error
		bad := 0
		if errors.As(err, &be) && be.Index < len(locs) {
			bad = be.Index
		}
		excluded = append(excluded, locs[bad].GetNodeId())
		if _, err := w.fs.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
			return ns.AbandonBlock(ctx, &pb.AbandonBlockRequest{Session: sess, Path: w.path, ClientName: w.fs.clientName(), BlockId: blk.GetId()})
		}); err != nil {
			return fmt.Errorf("logbook: abandon block %d after %v: %w", blk.GetId(), lastErr, err)
		}
	}
	return fmt.Errorf("logbook: unable to create a new block of %s: %w", w.path, lastErr)
}

// sendNext sends the next packet of the current block: from the chunk at
// or below what was sent, up to 64 KiB of the buffered bytes.
func (w *FileWriter) sendNext(ctx context.Context, last, sync bool) error {
	b := w.blk
	off := chunkFloor(b.sent)
	end := min(b.written, off+blockio.MaxPacketData)
	pkt := blockio.Packet{Offset: off, Data: b.data[off-b.base : end-b.base], Last: last && end == b.written, Sync: sync && end == b.written}
	if err := w.send(ctx, pkt); err != nil {
		return err
	}
	b.trim()
	return nil
}

// send sends one packet, recovering the pipeline when it fails.
func (w *FileWriter) send(ctx context.Context, pkt blockio.Packet) error {
	b := w.blk
	b.sent = max(b.sent, pkt.End())
	b.lastSent = b.lastSent || pkt.Last
	_, err := b.pipe.Send(ctx, pkt)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	return w.recoverPipeline(ctx, err)
}

// trim drops buffered bytes below the acked length's chunk.
func (b *writeBlock) trim() {
	keep := chunkFloor(b.pipe.Acked())
	if keep-b.base < 1<<20 {
		return
	}
	b.data = append([]byte(nil), b.data[keep-b.base:]...)
	b.base = keep
}

// flush waits until the pipeline acked everything sent, recovering it on
// failure.
func (w *FileWriter) flush(ctx context.Context) error {
	for {
		if w.blk.closed {
			return nil
		}
		err := w.blk.pipe.Flush(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if err := w.recoverPipeline(ctx, err); err != nil {
			return err
		}
	}
}

// finishBlock sends the rest of the block, waits until every byte is
// acked, then sends the packet ending the block (the partial last chunk
// again, or nothing) and waits for the nodes to finalize (HDFS's
// PIPELINE_CLOSE stage: a failure there is a close recovery, which also
// accepts replicas already finalized). It leaves no current block.
func (w *FileWriter) finishBlock(ctx context.Context) error {
	b := w.blk
	for b.sent < b.written {
		if err := w.sendNext(ctx, false, false); err != nil {
			return err
		}
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	if !b.closed {
		if w.beforeEndOfBlock != nil {
			w.beforeEndOfBlock(w)
		}
		off := chunkFloor(b.written)
		if err := w.send(ctx, blockio.Packet{Offset: off, Data: b.data[off-b.base : b.written-b.base], Last: true}); err != nil {
			return err
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	if !b.closed {
		if err := b.pipe.Close(); err != nil {
			return fmt.Errorf("logbook: close the pipeline of block %d: %w", b.id, err)
		}
	}
	w.last = b.ref()
	w.blk = nil
	return nil
}

// Sync (hflush) sends the buffered bytes and returns once every pipeline
// node acked them: readers see the file up to here.
func (w *FileWriter) Sync(ctx context.Context) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.blk == nil {
		return nil
	}
	for w.blk.sent < w.blk.written {
		if err := w.fail(w.sendNext(ctx, false, true)); err != nil {
			return err
		}
	}
	if err := w.fail(w.flush(ctx)); err != nil {
		return err
	}
	w.synced = true
	w.last = w.blk.ref()
	return nil
}

// HSync is Sync with every pipeline node's data and checksums fsynced
// before it acks (HDFS hsync): the bytes survive the nodes' power loss.
func (w *FileWriter) HSync(ctx context.Context) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.blk == nil {
		return nil
	}
	b := w.blk
	for b.sent < b.written {
		if err := w.fail(w.sendNext(ctx, false, true)); err != nil {
			return err
		}
	}
	// The fsync rides on a packet of its own: the last partial chunk sent
	// again (nodes skip bytes they have), or nothing at a chunk boundary.
	off := chunkFloor(b.written)
	if err := w.fail(w.send(ctx, blockio.Packet{Offset: off, Data: b.data[off-b.base : b.written-b.base], Sync: true, Fsync: true})); err != nil {
		return err
	}
	if err := w.fail(w.flush(ctx)); err != nil {
		return err
	}
	w.synced = true
	w.last = b.ref()
	return nil
}

// Close finishes the last block and completes the file, retrying while the
// coordinator waits for the blocks' replicas to be reported, until ctx
// ends. It releases the lease.
func (w *FileWriter) Close(ctx context.Context) error {
	if err := w.usable(); err != nil {
		w.Abort()
		return err
	}
	defer w.stopRenewal()
	w.done = true
	if w.blk != nil {
		if err := w.fail(w.finishBlock(ctx)); err != nil {
			if w.blk.pipe != nil {
				w.blk.pipe.Abort()
			}
			return err
		}
	}
	// do retries Unavailable (NOT_REPLICATED_YET) with backoff until ctx.
	_, err := w.fs.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
		return ns.Complete(ctx, &pb.CompleteRequest{Session: sess, Path: w.path, ClientName: w.fs.clientName(), Last: w.last})
	})
	return w.fail(err)
}

// Abort gives the writer up without completing the file: the lease runs
// out and the coordinator recovers the file.
func (w *FileWriter) Abort() {
	if w.blk != nil && w.blk.pipe != nil {
		w.blk.pipe.Abort()
	}
	if !w.done {
		w.done = true
		w.stopRenewal()
	}
}

// recoverPipeline is the recovery loop of design §R5.3: drop the failed
// node, add a replacement when the policy asks for one (a live node the
// leader picks, given a copy of the replica by a surviving node), get a
// new GS, reopen the pipeline with the recovery stage (append, streaming
// or close), commit the new pipeline and resend what was not acked.
//
// A node that said it is restarting (NODE_RESTARTING) is not dropped: the
// loop retries the same pipeline every 0.5 s, doubling up to 4 s, while
// that node is unreachable or still restarting, for up to
// Config.NodeRestartTimeout; those retries do not count toward
// maxPipelineRecoveries. If the node is not back in time, or is back but
// refuses the recovery (its replica came back RWR), it is dropped as a
// failed node.
func (w *FileWriter) recoverPipeline(ctx context.Context, cause error) error {
	b := w.blk
	var acked int64
	if b.pipe != nil {
		acked = b.pipe.Acked()
		b.pipe.Abort()
	}
	if b.appendGS != 0 || b.lastSent {
		acked = b.sent // append setup: the block's length; close: all acked
	}
	sent := b.sent
	rw := restartWait{timeout: w.fs.c.cfg.NodeRestartTimeout, index: -1}
	for attempt := 0; ; {
		var be *blockio.Error
		bad := 0
		if errors.As(cause, &be) && be.Index < len(b.nodes) {
			bad = be.Index
		}
		if rw.wait(be, bad) {
			if err := rw.sleep(ctx); err != nil {
				return fmt.Errorf("logbook: wait for restarting node %s of block %d: %w", b.nodes[bad].GetNodeId(), b.id, err)
			}
		} else {
			if attempt == maxPipelineRecoveries {
				return fmt.Errorf("logbook: tried pipeline recovery of block %d %d times: %w", b.id, maxPipelineRecoveries, cause)
			}
			attempt++
			if len(b.nodes) <= 1 {
				return fmt.Errorf("logbook: all pipeline nodes of block %d are bad: %w", b.id, cause)
			}
			b.failed = append(b.failed, b.nodes[bad].GetNodeId())
			b.nodes = append(append([]*pb.NodeLocation(nil), b.nodes[:bad]...), b.nodes[bad+1:]...)
			rw.dropped(bad)
			if err := w.maybeReplaceNode(ctx, acked); err != nil {
				return err
			}
		}
		resp, err := w.fs.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
			return ns.UpdateBlockForPipeline(ctx, &pb.UpdateBlockForPipelineRequest{Session: sess, Path: w.path, ClientName: w.fs.clientName(), BlockId: b.id})
		})
		if err != nil {
			return fmt.Errorf("logbook: recover the pipeline of block %d (after %v): %w", b.id, cause, err)
		}
		newGS := resp.GetResult().GetNewGs()
		setup := &pb.WriteSetup{
			Pool: w.fs.pool, BlockId: b.id, Gs: b.gs, NewGs: newGS, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
			MinBytesRcvd: acked, MaxBytesRcvd: sent, ClientName: w.fs.clientName(), Targets: addrs(b.nodes[1:]), BlockToken: resp.GetBlockToken(),
		}
		switch {
		case b.appendGS != 0:
			setup.Stage, setup.Gs, setup.MaxBytesRcvd = pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND_RECOVERY, b.appendGS, acked
		case b.lastSent:
			setup.Stage, setup.MaxBytesRcvd = pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY, acked
		}
		pipe, err := w.fs.openPipeline(ctx, b.nodes[0], setup)
		if err != nil {
			cause = err
			continue
		}
		ids := make([]string, len(b.nodes))
		for i, n := range b.nodes {
			ids[i] = n.GetNodeId()
		}
		up, err := w.fs.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
			return ns.UpdatePipeline(ctx, &pb.UpdatePipelineRequest{
				Session: sess, Path: w.path, ClientName: w.fs.clientName(), BlockId: b.id,
				OldGs: b.gs, NewGs: newGS, NewLength: uint64(acked), NewNodes: ids,
			})
		})
		if err != nil {
			pipe.Abort()
			return fmt.Errorf("logbook: update the pipeline of block %d: %w", b.id, err)
		}
		b.gs, b.pipe, b.appendGS = newGS, pipe, 0
		if t := up.GetBlockToken(); t != nil {
			b.token = t
		} else if t := resp.GetBlockToken(); t != nil {
			b.token = t
		}
		w.last = &pb.BlockRef{Id: b.id, Gs: b.gs, NumBytes: uint64(acked)}
		if setup.Stage == pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY {
			// Every replica was finalized at the setup.
			pipe.Abort()
			b.closed = true
			return nil
		}
		if err := w.resend(ctx, acked, sent); err != nil {
			cause = err
			acked = max(acked, pipe.Acked())
			pipe.Abort()
			continue
		}
		return nil
	}
}

// restartWait is the recovery loop's state for a restarting pipeline node
// (HDFS DataStreamer's restartingNodeIndex and deadline).
type restartWait struct {
	timeout  time.Duration // Config.NodeRestartTimeout; < 0: never wait
	index    int           // the node awaited in the pipeline, -1: none
	deadline time.Time
	retry    time.Duration
}

// wait reports whether the failure charged to node bad means waiting for
// a restarting node rather than dropping it: the node said it is
// restarting, or is the one awaited and still unreachable (or restarting)
// within the deadline.
func (rw *restartWait) wait(be *blockio.Error, bad int) bool {
	if be == nil {
		return false
	}
	if rw.index < 0 && be.Reason == pb.ReasonNodeRestarting && rw.timeout > 0 {
		rw.index, rw.deadline, rw.retry = bad, time.Now().Add(rw.timeout), restartRetryFirst
	}
	if rw.index < 0 || bad != rw.index {
		return false
	}
	down := be.Reason == pb.ReasonNodeRestarting || be.Code == codes.Unavailable || be.Code == codes.DeadlineExceeded
	if down && time.Now().Before(rw.deadline) {
		return true
	}
	rw.index = -1 // not back in time, or back and refusing: a failed node
	return false
}

// sleep waits for the next retry: the retry interval, at most until the
// deadline.
func (rw *restartWait) sleep(ctx context.Context) error {
	d := min(rw.retry, time.Until(rw.deadline))
	rw.retry = min(2*rw.retry, restartRetryMax)
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropped notes that pipeline node i was removed.
func (rw *restartWait) dropped(i int) {
	switch {
	case rw.index == i:
		rw.index = -1
	case rw.index > i:
		rw.index--
	}
}

// wantReplacement applies the replace-node policy to a pipeline left with
// n nodes.
func (w *FileWriter) wantReplacement(n int) bool {
	r := w.replication
	if n < 1 || n >= r {
		return false
	}
	switch w.fs.c.cfg.ReplaceNode {
	case ReplaceNodeAlways:
		return true
	case ReplaceNodeNever:
		return false
	}
	return r >= 3 && (n <= r/2 || w.synced || w.appended)
}

// maybeReplaceNode adds a node to the shrunken pipeline when the policy
// asks for one (design §R5.3 step 5): the leader picks a live node outside
// the pipeline and the failed ones; a surviving node copies its replica
// there (TRANSFER_RBW) and the node joins the pipeline at its end. Nothing
// is added before any byte was written, nor to a close recovery. A
// replacement that cannot be found or filled fails the write only with
// Config.ReplaceNodeRequired.
func (w *FileWriter) maybeReplaceNode(ctx context.Context, acked int64) error {
	b := w.blk
	if b.lastSent || acked == 0 || !w.wantReplacement(len(b.nodes)) {
		return nil
	}
	srcGS := b.gs
	if b.appendGS != 0 {
		srcGS = b.appendGS
	}
	existing := make([]string, len(b.nodes))
	for i, n := range b.nodes {
		existing[i] = n.GetNodeId()
	}
	excluded := append([]string(nil), b.failed...)
	var lastErr error
	for try := 0; try < maxNodeReplacements; try++ {
		var node *pb.NodeLocation
		actx, cancel := context.WithTimeout(ctx, replaceNodeTimeout)
		err := w.fs.namespace(actx, func(ctx context.Context, ns pb.NamespaceClient) error {
			r, err := ns.GetAdditionalNode(ctx, &pb.GetAdditionalNodeRequest{Path: w.path, ClientName: w.fs.clientName(), BlockId: b.id, Existing: existing, Excluded: excluded})
			node = r.GetNode()
			return err
		})
		cancel()
		if err != nil {
			lastErr = err
			break // no candidate left
		}
		w.fs.learn([]*pb.NodeLocation{node})
		src := b.nodes[try%len(b.nodes)]
		if err := w.transferTo(ctx, src, node, srcGS); err != nil {
			lastErr = fmt.Errorf("copy block %d from %s to %s: %w", b.id, src.GetNodeId(), node.GetNodeId(), err)
			excluded = append(excluded, node.GetNodeId())
			continue
		}
		b.nodes = append(b.nodes, node)
		return nil
	}
	if w.fs.c.cfg.ReplaceNodeRequired {
		return fmt.Errorf("logbook: failed to replace a bad node in the pipeline of block %d (%d of %d nodes left): %w", b.id, len(b.nodes), w.replication, lastErr)
	}
	return nil
}

// transferTo has src copy its replica of the current block to dst as RBW.
func (w *FileWriter) transferTo(ctx context.Context, src, dst *pb.NodeLocation, gs uint64) error {
	cc, err := w.fs.c.conn(src.GetGrpcAddr())
	if err != nil {
		return err
	}
	_, err = pb.NewDataNodeClient(cc).TransferBlock(ctx, &pb.TransferBlockRequest{
		Pool: w.fs.pool, BlockId: w.blk.id, Gs: gs, Targets: []string{dst.GetGrpcAddr()}, Stage: pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, BlockToken: w.blk.token,
	})
	return fromStatus(err)
}

// resend sends [acked, sent) again on the new pipeline, flagging the last
// packet as the original one was (end of block) and as a sync.
func (w *FileWriter) resend(ctx context.Context, acked, sent int64) error {
	b := w.blk
	// b.base is chunk-aligned: offsets relative to it split as the block's.
	pkts := blockio.SplitPackets(b.data[:sent-b.base], acked-b.base, blockio.MaxPacketData)
	if len(pkts) == 0 && b.lastSent {
		pkts = []blockio.Packet{{Offset: sent - b.base}}
	}
	for i, p := range pkts {
		p.Offset += b.base
		if i == len(pkts)-1 {
			p.Last, p.Sync = b.lastSent, !b.lastSent
		}
		if _, err := b.pipe.Send(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
