package coordserver

import (
	"sync"
	"time"
)

// leaderClock stamps the session clock of the entries a leader proposes
// (Command.session_clock_unix_nanos, log format 10; fsm.LeaderClockFormat):
// the state machine's clock as this leader advances it. In each term it
// starts from the clock the state machine has applied and adds what this
// member's monotonic clock measures from then on, so neither this
// member's wall clock nor its offset from earlier leaders' enters the
// sessions' idle times — only elapsed time, as etcd times its leases. If
// the applied clock is ever ahead of the stamp (entries of an earlier
// term applied after this term's first stamp, or the wall-clock start of
// log format 9), the stamp restarts from it: stamps never fall behind what
// is applied, and never move back within a term.
//
// Time no leader measured — an election, or an idle spell before a change
// of leader — is not counted: a session may outlive its idle timeout by
// that much, never expire before it.
type leaderClock struct {
	mu   sync.Mutex
	term uint64
	base int64     // the applied clock the stamps start from
	at   time.Time // this member's clock then (monotonic reading)
	last int64     // the latest stamp (callers' readings may race)
}

// stamp is the session clock for an entry proposed now in term, given the
// state machine's applied clock.
func (c *leaderClock) stamp(term uint64, applied int64, now time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if term != c.term || c.at.IsZero() {
		c.term, c.base, c.at, c.last = term, applied, now, applied
		return applied
	}
	t := max(c.base+int64(now.Sub(c.at)), c.last) // an older reading: no step back
	if applied > t {
		c.base, c.at, t = applied, now, applied
	}
	c.last = t
	return t
}
