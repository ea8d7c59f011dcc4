package fsm

import (
	"errors"
	"fmt"
)

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
	// ErrSessionExpired: the request says its client had an answer in this
	// session, but the state machine no longer holds the session (evicted
	// as least recently used, or replaced by a forced import): it may be a
	// retry of a request applied before, so it is refused (log format 6).
	ErrSessionExpired = errors.New("fsm: session expired: the state machine no longer holds this client's session; start a new one")
	// ErrSessionOpenFormat: an OPEN_SESSION in an entry of log format < 7.
	ErrSessionOpenFormat = errors.New("fsm: opening a session needs log format 7 (every voter upgraded)")
	// ErrSessionCloseFormat: a CLOSE_SESSION in an entry of log format < 8.
	ErrSessionCloseFormat = errors.New("fsm: closing a session needs log format 8 (every voter upgraded)")
	// ErrSessionID: a CLOSE_SESSION whose session id is empty, longer than
	// MaxClientIDBytes or not UTF-8.
	ErrSessionID = fmt.Errorf("fsm: a session id must be 1..%d bytes of UTF-8", MaxClientIDBytes)
	// ErrSessionClientID: an OPEN_SESSION whose client id is empty, longer
	// than MaxSessionBaseBytes or not UTF-8.
	ErrSessionClientID = fmt.Errorf("fsm: a session's client id must be 1..%d bytes of UTF-8", MaxSessionBaseBytes)
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
	ErrInvalidJournalConfig = errors.New("fsm: journal config needs events per segment 1..2^30, segment bytes 1..2^40, a session idle timeout of at most 30 days, and trim bounds of at most 2^20 segments and 2^40 events")
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

// Errors of the journal settings the cluster holds (log format 11).
var (
	// ErrJournalConfigFormat: SET_JOURNAL_CONFIG before log format 11.
	ErrJournalConfigFormat = errors.New("fsm: journal settings held by the cluster need log format 11 (every voter upgraded)")
	// ErrJournalConfigHeld: CONFIGURE_JOURNAL (a leader's flags) once the
	// cluster holds its settings.
	ErrJournalConfigHeld = errors.New("fsm: the cluster holds its journal settings: a leader's flags no longer replace them")
)

var (
	// ErrImportNotEmpty: an import into a journal that already holds events.
	ErrImportNotEmpty = errors.New("fsm: import into a non-empty journal (force replaces it)")
	// ErrImportGap: an import chunk does not continue at the next seq.
	ErrImportGap = errors.New("fsm: import chunk does not continue the journal")
)

// Kind classifies a namespace error for the gRPC edge (one code per kind,
// mapped in the server). Errors of other packages and the journal errors
// above have no kind (KindOf returns KindUnknown).
type Kind int

// Error kinds.
const (
	KindUnknown Kind = iota
	// KindInvalidArgument: the op itself is malformed (bad path, bad
	// replication, duplicate targets ...); no state makes it valid.
	KindInvalidArgument
	// KindNotFound: the file, block or node named does not exist.
	KindNotFound
	// KindAlreadyExists: the file (or a directory at the path) exists.
	KindAlreadyExists
	// KindFailedPrecondition: the state does not allow the op now (lease
	// held by another client, block in the wrong state, not yet
	// replicated ...).
	KindFailedPrecondition
	// KindAborted: the op was based on a superseded view: a stale recovery
	// id or generation stamp (invariant 5).
	KindAborted
	// KindOutOfRange: a length, count or size outside its bounds.
	KindOutOfRange
	// KindUnavailable: try again later (a recovery is running, blocks are
	// not yet reported minimally replicated).
	KindUnavailable
	// KindInternal: a metadata invariant is broken.
	KindInternal
	// KindResourceExhausted: a replicated table is full (cache directives).
	KindResourceExhausted
)

var kindNames = [...]string{"unknown", "invalid-argument", "not-found", "already-exists", "failed-precondition", "aborted", "out-of-range", "unavailable", "internal", "resource-exhausted"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// KindError is a sentinel error with a kind. Namespace ops return one of the
// sentinels below, usually wrapped with details (fmt.Errorf("%w: ...")), so
// errors.Is matches the sentinel and KindOf finds the kind. A refusal by a
// leaserecovery rule wraps both the sentinel and the rule's *Error (with
// its stable Reason); KindOf then reports the rule's kind.
type KindError struct {
	kind Kind
	msg  string
}

func newKindError(k Kind, msg string) *KindError { return &KindError{kind: k, msg: msg} }

func (e *KindError) Error() string { return e.msg }

// Kind is the error's kind.
func (e *KindError) Kind() Kind { return e.kind }

// ErrReservedEventType: a client append used the reserved audit event type
// prefix (ReservedEventPrefix) after the namespace began (doc.go). It also
// matches ErrInvalidEvent.
var ErrReservedEventType = fmt.Errorf("%w: the type prefix %q is reserved for the coordinator's audit events", ErrInvalidEvent, ReservedEventPrefix)

// Namespace errors (part of the replicated behaviour: every member returns
// the same error for the same entry). A refused op changes nothing.
var (
	ErrInvalidNamespaceOp = newKindError(KindInvalidArgument, "fsm: namespace op missing or malformed")
	// ErrNamespaceFormat: a namespace op in an entry of log format < 3,
	// written before every voter could read namespace commands.
	ErrNamespaceFormat      = newKindError(KindFailedPrecondition, "fsm: namespace ops need log format 3 (every voter upgraded)")
	ErrInvalidPath          = newKindError(KindInvalidArgument, "fsm: invalid path")
	ErrInvalidReplication   = newKindError(KindInvalidArgument, "fsm: replication must be 1..16")
	ErrInvalidBlockSize     = newKindError(KindInvalidArgument, "fsm: block size must be a positive multiple of 512 up to 1 GiB")
	ErrInvalidClientName    = newKindError(KindInvalidArgument, "fsm: invalid client name")
	ErrInvalidTargets       = newKindError(KindInvalidArgument, "fsm: invalid target nodes")
	ErrInvalidNode          = newKindError(KindInvalidArgument, "fsm: invalid node registration")
	ErrInvalidGS            = newKindError(KindInvalidArgument, "fsm: generation stamp was never allocated")
	ErrInvalidRecovery      = newKindError(KindInvalidArgument, "fsm: invalid recovery")
	ErrFileNotFound         = newKindError(KindNotFound, "fsm: file not found")
	ErrBlockNotFound        = newKindError(KindNotFound, "fsm: block not found")
	ErrNodeNotFound         = newKindError(KindNotFound, "fsm: node not registered")
	ErrFileExists           = newKindError(KindAlreadyExists, "fsm: file already exists")
	ErrIsDirectory          = newKindError(KindAlreadyExists, "fsm: path is a directory")
	ErrParentNotDirectory   = newKindError(KindFailedPrecondition, "fsm: a parent of the path is a file")
	ErrDirectoryNotEmpty    = newKindError(KindFailedPrecondition, "fsm: directory is not empty (delete it recursively)")
	ErrNotUnderConstruction = newKindError(KindFailedPrecondition, "fsm: file is not under construction")
	ErrNotLeaseHolder       = newKindError(KindFailedPrecondition, "fsm: no lease on the file")
	ErrFileBeingWritten     = newKindError(KindFailedPrecondition, "fsm: file is being written")
	ErrAlreadyLeaseHolder   = newKindError(KindFailedPrecondition, "fsm: client is already the current lease holder")
	ErrRecoveryInProgress   = newKindError(KindUnavailable, "fsm: block recovery is in progress, try again later")
	ErrRecoveryNeeded       = newKindError(KindFailedPrecondition, "fsm: the last block needs a block recovery")
	ErrNotLastBlock         = newKindError(KindFailedPrecondition, "fsm: not the file's last block")
	ErrBlockState           = newKindError(KindFailedPrecondition, "fsm: unexpected block state")
	ErrNotReplicatedYet     = newKindError(KindUnavailable, "fsm: committed blocks are not yet minimally replicated, try again later")
	ErrNodeIDHeld           = newKindError(KindFailedPrecondition, "fsm: node id held by another node")
	ErrStaleGS              = newKindError(KindFailedPrecondition, "fsm: stale generation stamp")
	ErrStaleRecovery        = newKindError(KindAborted, "fsm: recovery id does not match the current recovery id")
	ErrTooManyBlocks        = newKindError(KindOutOfRange, "fsm: too many blocks in the file")
	ErrBlockLength          = newKindError(KindOutOfRange, "fsm: block length out of range")
	ErrDeleteTooLarge       = newKindError(KindOutOfRange, "fsm: delete covers too many blocks (delete subdirectories first)")
)

// Cache-directive errors (namespace_cache.go).
var (
	// ErrCacheFormat: a cache-directive op in an entry of log format < 4,
	// written before every voter could read it.
	ErrCacheFormat             = newKindError(KindFailedPrecondition, "fsm: cache directives need log format 4 (every voter upgraded)")
	ErrInvalidCacheReplication = newKindError(KindInvalidArgument, "fsm: cache replication must be 1..the file's replication")
	ErrDirectiveExists         = newKindError(KindAlreadyExists, "fsm: the path already has a cache directive")
	ErrDirectiveNotFound       = newKindError(KindNotFound, "fsm: cache directive not found")
	ErrTooManyDirectives       = newKindError(KindResourceExhausted, "fsm: too many cache directives")
)
