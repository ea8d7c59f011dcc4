package blockio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options tune a Pipeline.
type Options struct {
	// Address names the first node in errors (the node conn dials).
	Address string
	// MaxInFlight bounds packets sent but not yet acked (HDFS's 80).
	MaxInFlight int
}

// Pipeline is one open WriteBlock stream. Send may be called from one
// goroutine at a time; the other methods are safe for concurrent use.
type Pipeline struct {
	stream pb.DataNode_WriteBlockClient
	cancel context.CancelFunc
	nodes  []string
	window chan struct{}
	done   chan struct{} // closed when the ack reader ends

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every ack or failure
	inflight []sentPacket
	nextSeq  int64
	acked    int64
	sent     int64
	err      error
	finished bool // the last packet was acked
}

type sentPacket struct {
	seqno int64
	pkt   Packet
}

// Open starts a WriteBlock stream on conn (the first node) and waits for the
// whole pipeline to be set up. A failure is an *Error naming the node.
func Open(ctx context.Context, conn grpc.ClientConnInterface, setup *pb.WriteSetup, opts Options) (*Pipeline, error) {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 80
	}
	sctx, cancel := context.WithCancel(ctx)
	p := &Pipeline{
		cancel:  cancel,
		nodes:   append([]string{opts.Address}, setup.GetTargets()...),
		window:  make(chan struct{}, opts.MaxInFlight),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	switch setup.GetStage() {
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY, pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND,
		pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND_RECOVERY, pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY:
		p.acked, p.sent = setup.GetMinBytesRcvd(), setup.GetMinBytesRcvd()
	}
	stream, err := pb.NewDataNodeClient(conn).WriteBlock(sctx)
	if err != nil {
		cancel()
		return nil, p.rpcErr(err, -1)
	}
	p.stream = stream
	if err := stream.Send(&pb.WritePacket{Msg: &pb.WritePacket_Setup{Setup: setup}}); err != nil {
		_, rerr := stream.Recv()
		cancel()
		return nil, p.rpcErr(rerr, -1)
	}
	ack, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, p.rpcErr(err, -1)
	}
	if bad := FirstBad(ack.GetStatuses()); bad >= 0 || ack.GetSeqno() != -1 {
		cancel()
		if bad < 0 {
			return nil, &Error{Index: 0, Address: p.node(0), Code: codes.Internal, Msg: fmt.Sprintf("setup ack with seqno %d", ack.GetSeqno()), Seqno: -1}
		}
		return nil, p.statusErr(bad, ack.GetStatuses()[bad], -1)
	}
	go p.readAcks()
	return p, nil
}

func (p *Pipeline) node(i int) string {
	if i < len(p.nodes) {
		return p.nodes[i]
	}
	return ""
}

// rpcErr charges a stream error to the first node.
func (p *Pipeline) rpcErr(err error, seqno int64) *Error {
	if err == nil || errors.Is(err, io.EOF) {
		return &Error{Index: 0, Address: p.node(0), Code: codes.Unavailable, Msg: "stream ended early", Seqno: seqno}
	}
	st := status.Convert(err)
	e := &Error{Index: 0, Address: p.node(0), Code: st.Code(), Msg: st.Message(), Seqno: seqno}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Reason = info.GetReason()
		}
	}
	return e
}

func (p *Pipeline) statusErr(i int, st *pb.NodeStatus, seqno int64) *Error {
	addr := st.GetAddress()
	if addr == "" {
		addr = p.node(i)
	}
	return &Error{Index: i, Address: addr, Code: codes.Code(st.GetCode()), Reason: st.GetReason(), Msg: st.GetMessage(), Seqno: seqno}
}

// notifyLocked wakes waiters. p.mu held.
func (p *Pipeline) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pipeline) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *Pipeline) readAcks() {
	defer close(p.done)
	defer p.cancel()
	for {
		ack, err := p.stream.Recv()
		if err != nil {
			p.mu.Lock()
			clean := errors.Is(err, io.EOF) && len(p.inflight) == 0
			p.mu.Unlock()
			if !clean {
				p.fail(p.rpcErr(err, p.headSeqno()))
			} else {
				p.fail(nil)
			}
			return
		}
		if bad := FirstBad(ack.GetStatuses()); bad >= 0 {
			p.fail(p.statusErr(bad, ack.GetStatuses()[bad], ack.GetSeqno()))
			return
		}
		p.mu.Lock()
		if len(p.inflight) == 0 || p.inflight[0].seqno != ack.GetSeqno() {
			p.mu.Unlock()
			p.fail(&Error{Index: 0, Address: p.node(0), Code: codes.Internal, Msg: fmt.Sprintf("ack for unexpected seqno %d", ack.GetSeqno()), Seqno: ack.GetSeqno()})
			return
		}
		sp := p.inflight[0]
		p.inflight = p.inflight[1:]
		p.acked = max(p.acked, sp.pkt.End())
		if sp.pkt.Last {
			p.finished = true
		}
		p.notifyLocked()
		p.mu.Unlock()
		<-p.window
	}
}

func (p *Pipeline) headSeqno() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.inflight) > 0 {
		return p.inflight[0].seqno
	}
	return -1
}

// Send sends one packet (checksums computed here) and returns its seqno. It
// blocks while MaxInFlight packets are unacked. After a failure it returns
// the failure (an *Error).
func (p *Pipeline) Send(ctx context.Context, pkt Packet) (int64, error) {
	if pkt.Offset < 0 || pkt.Offset%ChunkSize != 0 || len(pkt.Data) > MaxPacketData {
		return 0, fmt.Errorf("blockio: packet at %d with %d bytes: want a chunk-aligned offset and at most %d bytes", pkt.Offset, len(pkt.Data), MaxPacketData)
	}
	select {
	case p.window <- struct{}{}:
	case <-p.done:
		return 0, p.Err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	p.mu.Lock()
	if p.err != nil || p.finished {
		err := p.err
		p.mu.Unlock()
		<-p.window
		if err == nil {
			err = errors.New("blockio: pipeline already finished")
		}
		return 0, err
	}
	seq := p.nextSeq
	p.nextSeq++
	p.inflight = append(p.inflight, sentPacket{seqno: seq, pkt: pkt})
	p.sent = max(p.sent, pkt.End())
	p.mu.Unlock()
	msg := &pb.WritePacket{Msg: &pb.WritePacket_Packet{Packet: &pb.Packet{
		Seqno: seq, Offset: pkt.Offset, Data: pkt.Data, Checksums: Checksums(pkt.Data),
		LastPacketInBlock: pkt.Last, Sync: pkt.Sync, Fsync: pkt.Fsync,
	}}}
	if err := p.stream.Send(msg); err != nil {
		// The stream broke; the ack reader reports why.
		<-p.done
		return 0, p.Err()
	}
	return seq, nil
}

// Flush waits until every packet sent so far is acked by the whole
// pipeline (the hflush wait), or the pipeline fails.
func (p *Pipeline) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		n, err, ch := len(p.inflight), p.err, p.changed
		p.mu.Unlock()
		switch {
		case err != nil:
			return err
		case n == 0:
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close ends the stream (after the last packet, or to give the replica up
// as it is) and waits for the nodes to finish; it returns the pipeline's
// failure, if any.
func (p *Pipeline) Close() error {
	if err := p.stream.CloseSend(); err != nil {
		p.cancel()
	}
	<-p.done
	return p.Err()
}

// Abort cancels the stream at once.
func (p *Pipeline) Abort() {
	p.cancel()
	<-p.done
}

// Err returns the pipeline's failure (an *Error), or nil.
func (p *Pipeline) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Acked is the end of the longest prefix every node has acked.
func (p *Pipeline) Acked() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// Sent is the end of the furthest packet sent.
func (p *Pipeline) Sent() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// Finished reports whether the last packet of the block was acked.
func (p *Pipeline) Finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finished
}

// Unacked returns the packets sent but not acked, in order (to resend after
// a pipeline recovery).
func (p *Pipeline) Unacked() []Packet {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Packet, len(p.inflight))
	for i, sp := range p.inflight {
		out[i] = sp.pkt
	}
	return out
}
