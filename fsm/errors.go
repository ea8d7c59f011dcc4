package fsm

import "errors"

// Errors returned in per-operation results. They are part of the replicated
// behaviour: every member returns the same error for the same entry.
var (
	// ErrEmptyAppend: an append operation carried no events.
	ErrEmptyAppend = errors.New("fsm: append carries no events")
	// ErrInvalidEvent: an event has an empty type.
	ErrInvalidEvent = errors.New("fsm: event type is empty")
	// ErrSessionAcked: the request seq is at or below the session's
	// acknowledged seq, so its result was already delivered and forgotten.
	ErrSessionAcked = errors.New("fsm: request seq already acknowledged by this client")
	// ErrSessionResultExpired: the request is a retry whose cached result was
	// evicted (too many outstanding requests in one session).
	ErrSessionResultExpired = errors.New("fsm: result of this retried request is no longer kept")
	// ErrInvalidMember: a member registration without id or addresses.
	ErrInvalidMember = errors.New("fsm: member registration needs id, raft and grpc addresses")
)

// ErrHalted is returned for every entry after the state machine met an entry
// it could not decode. The coordinator must stop: applying further entries
// would let this member diverge from the others.
var ErrHalted = errors.New("fsm: halted on an undecodable committed entry")
