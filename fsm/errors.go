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
	// ErrFormatDowngrade: a SET_FORMAT below the current log format.
	ErrFormatDowngrade = errors.New("fsm: the log format never goes back to an older version")
)

// ErrHalted is returned for every entry after the state machine met an entry
// it could not decode. The coordinator must stop: applying further entries
// would let this member diverge from the others.
var ErrHalted = errors.New("fsm: halted on an undecodable committed entry")

// Journal errors (part of the replicated behaviour, like the others).
var (
	ErrInvalidJournalConfig = errors.New("fsm: journal config needs events per segment and segment bytes >= 1")
	ErrConsumerName         = errors.New("fsm: consumer name must be 1-128 of [A-Za-z0-9._-], starting alphanumeric")
	ErrConsumerExists       = errors.New("fsm: consumer already registered")
	ErrConsumerNotFound     = errors.New("fsm: no such consumer")
	ErrTooManyConsumers     = errors.New("fsm: too many consumers")
	ErrConsumerFrom         = errors.New("fsm: consumer start outside the retained journal")
	ErrConsumerOp           = errors.New("fsm: unknown consumer operation")
	ErrAckBeyondSafe        = errors.New("fsm: ack beyond safe_pos")
	ErrAckBackwards         = errors.New("fsm: ack moves backwards")
	ErrTrimFuture           = errors.New("fsm: trim beyond the end of the journal")
)

var (
	// ErrImportNotEmpty: an import into a journal that already holds events.
	ErrImportNotEmpty = errors.New("fsm: import into a non-empty journal (force replaces it)")
	// ErrImportGap: an import chunk does not continue at the next seq.
	ErrImportGap = errors.New("fsm: import chunk does not continue the journal")
)
