package nodeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// pipelineQueue bounds the packets a node holds between receiving them and
// acking them upstream (HDFS's client keeps at most 80 in flight).
const pipelineQueue = 128

// writeBlock serves one WriteBlock stream (HDFS DataXceiver.writeBlock +
// BlockReceiver + PacketResponder).
//
// Three goroutines work on a stream: the receiver reads packets from
// upstream, verifies them, forwards them downstream and writes them; the
// downstream reader collects the next node's acks; the responder (the
// handler goroutine, the only one that sends upstream) waits for both and
// acks each packet in order. bytesAcked advances only when the whole
// downstream acked a packet.
func (s *Server) writeBlock(up pb.DataNode_WriteBlockServer) error {
	first, err := up.Recv()
	if err != nil {
		return err
	}
	setup := first.GetSetup()
	if err := validateSetup(setup, s.cfg.MaxTargets); err != nil {
		return s.toStatus(err)
	}
	client := isClientStage(setup.GetStage())
	if client {
		if !s.enterClientPipe() {
			return s.errRestarting()
		}
		defer s.leaveClientPipe()
	}
	ctx, cancel := context.WithCancel(up.Context())
	defer cancel()
	log := s.log.With("pool", setup.GetPool(), "block-id", setup.GetBlockId(), "gs", setup.GetGs(),
		"stage", setup.GetStage().String(), "client", setup.GetClientName())
	w, err := s.setupReplica(ctx, setup)
	if err != nil {
		log.Info("pipeline setup refused", "error", err)
		return s.toStatus(err)
	}
	if w != nil {
		defer w.Close() // a no-op once finalized or stopped
	}
	r := &receiver{
		s: s, log: log, setup: setup, up: up, ctx: ctx, cancel: cancel, w: w,
		self: s.AdvertisedGRPC(), pending: make(chan received, pipelineQueue),
	}
	if client {
		r.restart = s.restart.ch
	}
	if w != nil {
		r.acked = w.Replica().BytesAcked
	}
	down, err := r.connectDownstream()
	statuses := append([]*pb.NodeStatus{nodeStatus(r.self, nil)}, down...)
	if err != nil {
		s.metrics.pipelineFailures.WithLabelValues("downstream").Inc()
		log.Warn("pipeline setup: downstream failed", "target", r.downAddr, "error", err)
		if serr := up.Send(&pb.WriteAck{Seqno: -1, Statuses: statuses, BytesAcked: r.acked}); serr != nil {
			return serr
		}
		return s.statusErr(codes.Aborted, pb.ReasonDownstreamFailed, fmt.Sprintf("downstream %s: %v", r.downAddr, err))
	}
	if err := up.Send(&pb.WriteAck{Seqno: -1, Statuses: statuses, BytesAcked: r.acked}); err != nil {
		return err
	}
	if w == nil {
		return nil // close recovery: done at the setup
	}
	if r.down != nil {
		r.downAcks = make(chan *pb.WriteAck, pipelineQueue)
		s.goStream(r.readDownAcks)
	}
	// The receiver may outlive this handler, blocked in Recv until the
	// stream ends; Close waits for it.
	s.goStream(r.receive)
	return r.respond()
}

// setupReplica runs the replica operation of the setup's stage (design §R5.1)
// and returns the replica's writer (nil for close recovery).
func (s *Server) setupReplica(ctx context.Context, st *pb.WriteSetup) (replica.Writer, error) {
	pool := st.GetPool()
	b := replica.Block{ID: st.GetBlockId(), GS: st.GetGs()}
	switch st.GetStage() {
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE:
		b.NumBytes = st.GetExpectedLength()
		return s.store.CreateRbw(ctx, pool, b, replica.CreateOptions{})
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND:
		return s.store.Append(ctx, pool, b, st.GetNewGs(), st.GetMinBytesRcvd())
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND_RECOVERY:
		return s.store.RecoverAppend(ctx, pool, b, st.GetNewGs(), st.GetMinBytesRcvd())
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY:
		return s.store.RecoverRbw(ctx, pool, b, st.GetNewGs(), st.GetMinBytesRcvd(), st.GetMaxBytesRcvd())
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY:
		_, err := s.store.RecoverClose(ctx, pool, b, st.GetNewGs(), st.GetMinBytesRcvd())
		return nil, err
	case pb.BlockStage_BLOCK_STAGE_TRANSFER_TEMPORARY:
		b.NumBytes = st.GetExpectedLength()
		return s.store.CreateTemporary(ctx, pool, b, false, replica.CreateOptions{})
	case pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW, pb.BlockStage_BLOCK_STAGE_TRANSFER_FINALIZED:
		b.NumBytes = st.GetExpectedLength()
		return s.store.CreateTemporary(ctx, pool, b, true, replica.CreateOptions{})
	}
	return nil, badRequest(pb.ReasonBadSetup, "unknown stage") // validateSetup refused it already
}

// receiver is the state of one WriteBlock stream on this node.
type receiver struct {
	s      *Server
	log    *slog.Logger
	setup  *pb.WriteSetup
	up     pb.DataNode_WriteBlockServer
	ctx    context.Context
	cancel context.CancelFunc
	w      replica.Writer
	self   string // this node's address in statuses

	down     pb.DataNode_WriteBlockClient // nil at the pipeline's tail
	downAddr string
	downAcks chan *pb.WriteAck // closed when the downstream stream ends
	downErr  error             // why it ended; written before downAcks is closed

	pending chan received // receiver → responder, in packet order
	acked   int64         // responder only
	// restart is closed when the node shuts down for a restart (nil for
	// transfers): the responder acks out of band and ends the stream.
	restart <-chan struct{}
}

// received is one packet as the receiver handled it.
type received struct {
	seqno int64
	end   int64
	last  bool
	err   error // this node failed on the packet; nothing follows
}

// connectDownstream opens the stream to the next node and waits for its
// setup ack. It returns the downstream statuses (the failing ones on error).
func (r *receiver) connectDownstream() ([]*pb.NodeStatus, error) {
	targets := r.setup.GetTargets()
	if len(targets) == 0 {
		return nil, nil
	}
	r.downAddr = targets[0]
	fail := func(err error) ([]*pb.NodeStatus, error) {
		return []*pb.NodeStatus{nodeStatus(r.downAddr, err)}, err
	}
	conn, err := r.s.peers.get(r.downAddr)
	if err != nil {
		return fail(err)
	}
	next := proto.Clone(r.setup).(*pb.WriteSetup)
	next.Targets = targets[1:]
	// The stream lives as long as this one (r.ctx); the timer bounds only
	// the setup.
	dctx, dcancel := context.WithCancel(r.ctx)
	timer := time.AfterFunc(r.s.cfg.SetupTimeout, dcancel)
	stream, err := pb.NewDataNodeClient(conn).WriteBlock(dctx)
	var ack *pb.WriteAck
	if err == nil {
		if err = stream.Send(&pb.WritePacket{Msg: &pb.WritePacket_Setup{Setup: next}}); err == nil || errors.Is(err, io.EOF) {
			ack, err = stream.Recv()
		}
	}
	if !timer.Stop() {
		dcancel()
		return fail(status.Errorf(codes.DeadlineExceeded, "downstream setup took longer than %v", r.s.cfg.SetupTimeout))
	}
	if err != nil {
		dcancel()
		return fail(err)
	}
	if bad := blockio.FirstBad(ack.GetStatuses()); bad >= 0 {
		dcancel()
		st := ack.GetStatuses()[bad]
		return ack.GetStatuses()[:bad+1], status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	if ack.GetSeqno() != -1 || len(ack.GetStatuses()) == 0 {
		dcancel()
		return fail(status.Errorf(codes.Internal, "downstream setup ack with seqno %d and %d statuses", ack.GetSeqno(), len(ack.GetStatuses())))
	}
	r.down = stream
	return ack.GetStatuses(), nil
}

func (r *receiver) readDownAcks() {
	defer close(r.downAcks)
	for {
		ack, err := r.down.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "downstream stream ended")
			}
			r.downErr = err
			return
		}
		select {
		case r.downAcks <- ack:
		case <-r.ctx.Done():
			r.downErr = r.ctx.Err()
			return
		}
	}
}

// receive reads packets until the last one, the writer's end of stream or
// an error, and hands each to the responder.
func (r *receiver) receive() {
	var chk packetChecker
	for {
		msg, err := r.up.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) { // the writer closed its side
				r.endDownstream()
				close(r.pending)
			} else { // upstream gone
				r.cancel()
			}
			return
		}
		it := r.handle(&chk, msg)
		select {
		case r.pending <- it:
		case <-r.ctx.Done():
			return
		}
		if it.err != nil {
			return
		}
		if it.last {
			r.endDownstream()
			close(r.pending)
			return
		}
	}
}

func (r *receiver) endDownstream() {
	if r.down != nil {
		r.down.CloseSend()
	}
}

// handle validates, verifies, forwards and writes one packet.
func (r *receiver) handle(chk *packetChecker, msg *pb.WritePacket) received {
	pkt := msg.GetPacket()
	it := received{seqno: pkt.GetSeqno()}
	if err := chk.check(pkt); err != nil {
		it.err = err
		return it
	}
	if err := verifyPacket(pkt); err != nil {
		r.s.metrics.checksumErrors.Inc()
		it.err = err
		return it
	}
	// Mirror first, as HDFS does: the next node works while this one writes.
	// A failed send shows up as the downstream reader's error.
	if r.down != nil {
		r.down.Send(msg)
	}
	if err := r.w.WritePacket(r.ctx, pkt.GetOffset(), pkt.GetData(), pkt.GetChecksums()); err != nil {
		it.err = err
		return it
	}
	// Durability: an hsync packet is fsynced before it can be acked.
	if pkt.GetFsync() {
		if err := r.w.Sync(); err != nil {
			it.err = err
			return it
		}
		r.s.metrics.hsyncs.Inc()
	}
	r.s.metrics.packets.Inc()
	r.s.metrics.packetBytes.Add(float64(len(pkt.GetData())))
	it.end = pkt.GetOffset() + int64(len(pkt.GetData()))
	it.last = pkt.GetLastPacketInBlock()
	return it
}

// respond acks packets upstream in order; it returns when the stream is
// done or failed.
func (r *receiver) respond() error {
	stopped := r.w.Stopped()
	for {
		var it received
		var ok bool
		select {
		case it, ok = <-r.pending:
		case <-stopped:
			return r.writerStopped()
		case <-r.restart:
			return r.restarting()
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		if !ok {
			return nil // the writer ended the stream; every packet is acked
		}
		if it.err != nil {
			return r.failLocal(it.seqno, it.err)
		}
		var down []*pb.NodeStatus
		if r.down != nil {
			statuses, err := r.awaitDownAck(it.seqno, stopped)
			if err != nil {
				return r.failDownstream(it.seqno, statuses, err)
			}
			down = statuses
		}
		if it.end > r.acked {
			if err := r.w.SetBytesAcked(it.end); err != nil {
				return r.failLocal(it.seqno, err)
			}
			r.acked = it.end
		}
		if it.last {
			if err := r.complete(); err != nil {
				return r.failLocal(it.seqno, err)
			}
		}
		statuses := append([]*pb.NodeStatus{nodeStatus(r.self, nil)}, down...)
		if err := r.up.Send(&pb.WriteAck{Seqno: it.seqno, Statuses: statuses, BytesAcked: r.acked}); err != nil {
			return err
		}
		if it.last {
			r.log.Debug("block received", "bytes", r.acked)
			return nil
		}
	}
}

// awaitDownAck waits for the downstream ack of seqno; on failure it
// returns the downstream statuses up to the failed node.
func (r *receiver) awaitDownAck(seqno int64, stopped <-chan struct{}) ([]*pb.NodeStatus, error) {
	timer := time.NewTimer(r.s.cfg.AckTimeout)
	defer timer.Stop()
	select {
	case ack, ok := <-r.downAcks:
		if !ok {
			return []*pb.NodeStatus{nodeStatus(r.downAddr, r.downErr)}, r.downErr
		}
		if bad := blockio.FirstBad(ack.GetStatuses()); bad >= 0 {
			st := ack.GetStatuses()[bad]
			return ack.GetStatuses()[:bad+1], status.Error(codes.Code(st.GetCode()), st.GetMessage())
		}
		if ack.GetSeqno() != seqno {
			err := status.Errorf(codes.Internal, "downstream acked seqno %d, want %d", ack.GetSeqno(), seqno)
			return []*pb.NodeStatus{nodeStatus(r.downAddr, err)}, err
		}
		return ack.GetStatuses(), nil
	case <-timer.C:
		err := status.Errorf(codes.DeadlineExceeded, "no ack for packet %d within %v", seqno, r.s.cfg.AckTimeout)
		return []*pb.NodeStatus{nodeStatus(r.downAddr, err)}, err
	case <-stopped:
		return nil, errWriterStopped
	case <-r.restart:
		return nil, errNodeRestarting
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
}

var (
	errWriterStopped  = errors.New("writer stopped")
	errNodeRestarting = errors.New("node restarting")
)

// complete ends the block after its last packet was acked downstream:
// TRANSFER_RBW converts the TEMPORARY replica to RBW, everything else
// finalizes it.
func (r *receiver) complete() error {
	if r.setup.GetStage() == pb.BlockStage_BLOCK_STAGE_TRANSFER_RBW {
		visible := r.setup.GetExpectedLength()
		if visible == 0 {
			visible = r.acked
		}
		b := replica.Block{ID: r.setup.GetBlockId(), GS: r.setup.GetGs(), NumBytes: visible}
		_, err := r.s.store.ConvertTemporaryToRbw(r.ctx, r.setup.GetPool(), b)
		return err
	}
	_, err := r.w.Finalize(r.ctx)
	return err
}

func (r *receiver) failLocal(seqno int64, err error) error {
	r.s.metrics.pipelineFailures.WithLabelValues("local").Inc()
	r.log.Warn("pipeline: packet failed here", "seqno", seqno, "error", err)
	r.up.Send(&pb.WriteAck{Seqno: seqno, Statuses: []*pb.NodeStatus{nodeStatus(r.self, err)}, BytesAcked: r.acked})
	return r.s.toStatus(err)
}

func (r *receiver) failDownstream(seqno int64, down []*pb.NodeStatus, err error) error {
	if errors.Is(err, errWriterStopped) {
		return r.writerStopped()
	}
	if errors.Is(err, errNodeRestarting) {
		return r.restarting()
	}
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	r.s.metrics.pipelineFailures.WithLabelValues("downstream").Inc()
	r.log.Warn("pipeline: downstream failed", "seqno", seqno, "target", r.downAddr, "error", err)
	statuses := append([]*pb.NodeStatus{nodeStatus(r.self, nil)}, down...)
	r.up.Send(&pb.WriteAck{Seqno: seqno, Statuses: statuses, BytesAcked: r.acked})
	return r.s.statusErr(codes.Aborted, pb.ReasonDownstreamFailed, fmt.Sprintf("downstream %s: %v", r.downAddr, err))
}

// writerStopped: a newer operation (a recovery) took the replica over.
func (r *receiver) writerStopped() error {
	r.s.metrics.pipelineFailures.WithLabelValues("stopped").Inc()
	r.log.Info("pipeline: writer stopped by a newer operation")
	return r.s.statusErr(codes.Aborted, pb.ReasonWriterStopped, "the replica was taken over by a newer operation (recovery)")
}
