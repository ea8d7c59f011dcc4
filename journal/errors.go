package journal

import "errors"

var (
	// ErrClosed: the batcher was closed before the op was handed to the log.
	ErrClosed = errors.New("journal: batcher closed")
	// ErrQueueFull: too many appends are queued; retry later.
	ErrQueueFull = errors.New("journal: append queue full")
)

var errShortResults = errors.New("journal: log returned fewer results than ops")
