package coordserver

import (
	"fmt"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/blocks"
)

// blockPorts is the block manager's view of this coordinator: its Raft
// node's leadership and the proposal of namespace ops.
type blockPorts struct{ s *Server }

var (
	_ blocks.Leadership = blockPorts{}
	_ blocks.Proposer   = blockPorts{}
)

func (p blockPorts) Term() uint64      { return p.s.raft.CurrentTerm() }
func (p blockPorts) IsLeader() bool    { return p.s.isLeader() }
func (p blockPorts) LeaderReady() bool { return p.s.leaderReady() }
func (p blockPorts) LogFormat() uint32 { return p.s.logFormat() }

// ProposeNamespace proposes op outside any client session and returns
// the state machine's result; its errors are the domain's and Raft's
// (the RPC layer maps them, fsErr).
func (p blockPorts) ProposeNamespace(op *fsmpb.NamespaceOp) (fsm.NamespaceResult, error) {
	resp, err := p.s.apply(fsmpb.CommandType_COMMAND_TYPE_NAMESPACE, &fsmpb.NamespaceCommand{Op: op})
	if err != nil {
		return fsm.NamespaceResult{}, err
	}
	r, ok := resp.(fsm.NamespaceResult)
	if !ok {
		return fsm.NamespaceResult{}, fmt.Errorf("coordserver: unexpected state machine response %T", resp)
	}
	return r, r.Err
}

// SafeMode reports whether this leader is in safe mode (no invalidations,
// no re-replication yet). A follower answers true: it holds no soft state.
func (s *Server) SafeMode() bool { return s.blocks.SafeMode() }

// ReplicationStats reports this leader's replication state (zero on a
// follower).
func (s *Server) ReplicationStats() blocks.ReplicationStats { return s.blocks.ReplicationStats() }
