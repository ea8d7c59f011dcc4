package blocks

import "errors"

// The manager's refusals. Each changes nothing; the RPC layer maps them
// to gRPC codes and reasons in one place (internal/coordserver). Errors
// of the state machine (fsm's sentinels) and of the rules
// (leaserecovery's) come through as they are, wrapped with context.
var (
	// ErrNodeNotRegistered: a node that is not registered sent a
	// heartbeat, report or commit; it registers again on this error.
	ErrNodeNotRegistered = errors.New("blocks: node not registered")
	// ErrNoLiveNodes: no live storage node to place a block on (retry
	// once nodes report).
	ErrNoLiveNodes = errors.New("blocks: no live storage nodes")
	// ErrNoAdditionalNode: no live node outside a pipeline and its
	// exclusions. An answer, not a reason to retry: the writer goes on
	// without one, or fails if it must add one.
	ErrNoAdditionalNode = errors.New("blocks: no live node to add to the pipeline")
	// ErrSafeMode: a new leader has not heard every storage node's full
	// report yet (design §R9 rule 12); retry.
	ErrSafeMode = errors.New("blocks: the leader is in safe mode, waiting for the storage nodes' full reports")
	// ErrReportInterrupted: leadership changed while a full report was
	// being installed; the node sends it again.
	ErrReportInterrupted = errors.New("blocks: leadership changed during the block report; send it again")
	// ErrBadDecision: the lease rules answered a release action this
	// manager does not know (a bug).
	ErrBadDecision = errors.New("blocks: unexpected release decision")
)
