package nodeserver

import (
	"fmt"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc/codes"
)

// restartDrainTimeout bounds the wait, in a shutdown for restart, for the
// open client pipelines to send their out-of-band ack and end.
const restartDrainTimeout = 5 * time.Second

// restartState is the node's side of a shutdown for restart (HDFS's
// shutdown for upgrade, design §R1.4 and §R5.3): the client pipelines open on
// this node and the replicas they were writing.
type restartState struct {
	mu        sync.Mutex
	shutdown  bool          // a shutdown (either kind) was requested
	restart   bool          // no new client pipeline: NODE_RESTARTING
	ch        chan struct{} // closed when restart is set: pipelines ack OOB
	pipes     sync.WaitGroup
	replicas  []replicaKey  // replicas whose writers were told
	requested chan struct{} // closed by ShutdownNode; Run returns
}

type replicaKey struct {
	pool string
	id   uint64
}

func newRestartState() *restartState {
	return &restartState{ch: make(chan struct{}), requested: make(chan struct{})}
}

// isClientStage: a pipeline stage a writer drives (not a transfer).
func isClientStage(st pb.BlockStage) bool {
	switch st {
	case pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE, pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND,
		pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_APPEND_RECOVERY, pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_STREAMING_RECOVERY,
		pb.BlockStage_BLOCK_STAGE_PIPELINE_CLOSE_RECOVERY:
		return true
	}
	return false
}

// enterClientPipe registers a client pipeline; false once the node is
// shutting down for a restart. A true return must be paired with
// leaveClientPipe.
func (s *Server) enterClientPipe() bool {
	rs := s.restart
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.restart {
		return false
	}
	rs.pipes.Add(1)
	return true
}

func (s *Server) leaveClientPipe() { s.restart.pipes.Done() }

func (s *Server) errRestarting() error {
	return s.statusErr(codes.Unavailable, pb.ReasonNodeRestarting,
		fmt.Sprintf("node %s is shutting down for a restart (replicas being written stay RBW for %v)", s.cfg.ID, s.cfg.RestartReplicaExpiry))
}

// requestShutdown is ShutdownNode: the shutdown runs in the background and
// Run returns once it is done.
func (s *Server) requestShutdown(forRestart bool) error {
	rs := s.restart
	rs.mu.Lock()
	already := rs.shutdown || s.closing.Load()
	rs.shutdown = true
	rs.mu.Unlock()
	if already {
		return s.statusErr(codes.FailedPrecondition, pb.ReasonShuttingDown, "the node is already shutting down")
	}
	s.log.Info("shutdown requested", "for-restart", forRestart)
	go func() {
		if forRestart {
			s.ShutdownForRestart()
		} else {
			s.Close()
		}
		close(rs.requested)
	}()
	return nil
}

// ShutdownForRestart stops the node for a quick restart (HDFS's shutdown
// for upgrade): new client pipelines are refused (Unavailable,
// NODE_RESTARTING); every open one sends its writer an out-of-band
// NODE_RESTARTING ack and ends; once they have ended (at most
// restartDrainTimeout) each replica they were writing gets a restart
// marker expiring RestartReplicaExpiry from now, so that a node started
// again before then reloads it RBW and its writer resumes with a pipeline
// recovery. Then the node closes as Close does. Calling it after Close (or
// twice) does nothing more.
func (s *Server) ShutdownForRestart() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdownForRestart() })
	return s.closeErr
}

func (s *Server) shutdownForRestart() error {
	rs := s.restart
	rs.mu.Lock()
	rs.shutdown, rs.restart = true, true
	close(rs.ch)
	rs.mu.Unlock()
	drained := make(chan struct{})
	go func() { rs.pipes.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(restartDrainTimeout):
		s.log.Warn("shutdown for restart: client pipelines still open", "after", restartDrainTimeout)
	}
	expiry := time.Now().Add(s.cfg.RestartReplicaExpiry)
	rs.mu.Lock()
	keys := rs.replicas
	rs.mu.Unlock()
	marked := 0
	for _, k := range keys {
		if err := s.store.WriteRestartMarker(k.pool, k.id, expiry); err != nil {
			// That replica comes back RWR: its writer drops this node.
			s.log.Warn("shutdown for restart: no restart marker", "pool", k.pool, "block-id", k.id, "error", err)
			continue
		}
		marked++
	}
	s.log.Info("shutting down for restart", "pipelines", len(keys), "restart-markers", marked, "expiry", expiry.Format(time.RFC3339))
	return s.shutdown(true)
}

// restarting sends the writer the out-of-band NODE_RESTARTING ack and
// records the replica for its restart marker; its error ends the stream.
func (r *receiver) restarting() error {
	rs := r.s.restart
	rs.mu.Lock()
	rs.replicas = append(rs.replicas, replicaKey{pool: r.setup.GetPool(), id: r.setup.GetBlockId()})
	rs.mu.Unlock()
	err := r.s.errRestarting()
	r.s.metrics.pipelineFailures.WithLabelValues("restart").Inc()
	r.up.Send(&pb.WriteAck{Seqno: pb.OOBAckSeqno, Statuses: []*pb.NodeStatus{nodeStatus(r.self, err)}, BytesAcked: r.acked})
	r.log.Info("pipeline: out-of-band restart ack sent", "acked", r.acked)
	return err
}

// RestartRequested reports whether the node was shut down for a restart
// (ShutdownForRestart, or ShutdownNode with for_restart): a supervisor
// such as coord dev starts it again with the same Config.
func (s *Server) RestartRequested() bool {
	s.restart.mu.Lock()
	defer s.restart.mu.Unlock()
	return s.restart.restart
}
