package fsm

import (
	"cmp"
	"container/list"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	pb "github.com/logbookhq/logbook/fsm/fsmpb"
)

// keptResult is the result of one request a session keeps for retries:
// 24 bytes, in a slice ordered by request seq (no map, no pointer per
// result).
type keptResult struct {
	requestSeq uint64
	firstSeq   uint64
	count      uint32
}

type session struct {
	id       string
	ackedSeq uint64
	// kept holds the results not yet acked, by ascending request seq: the
	// oldest to drop, the acked prefix and a retry's binary search come
	// without a scan, and a capture shares the slice (see capture).
	kept []keptResult
	// droppedThrough is the highest request seq whose result was dropped
	// unacknowledged (set from log format 5 on): a request at or below it
	// without a kept result is a retry whose answer is gone, refused with
	// ErrSessionResultExpired rather than applied a second time.
	droppedThrough uint64
	lastIndex      uint64
	// lastUsed is sessionTable.clock when the session was last used (log
	// format 9 on; 0 before). Sessions in lru order have it non-decreasing.
	lastUsed int64
	// keptGen is sessionTable.captures when kept's array was last made
	// anew: while they are equal no capture shares the array.
	keptGen uint64
	elem    *list.Element // in State.lru
	holder  *list.Element // in State.holders while kept is not empty
}

// sessionTable is the session part of State: the sessions by client id,
// in least-recently-used order, and the same order restricted to the
// sessions holding results (whose front loses results first when all
// sessions together keep more than MaxKeptResults).
type sessionTable struct {
	sessions map[string]*session
	lru      *list.List // front = least recently used session
	holders  *list.List // sessions with kept results, in lru order
	// keptResults is the number of results all sessions keep.
	keptResults int
	// clock is the state machine's time from log format 9 on (see
	// SessionIdleFormat): the latest proposal time of the entries applied
	// (from format 10 on, the latest session clock they carry), never
	// moving back; 0 before format 9.
	clock int64
	// captures counts the captures taken (they run side by side under the
	// FSM's read lock, hence atomic); see session.capture.
	captures atomic.Uint64
}

func (t *sessionTable) resetSessions() {
	t.sessions, t.lru, t.holders, t.keptResults = make(map[string]*session), list.New(), list.New(), 0
}

// tick advances the clock to an entry's time — its proposal time, from
// log format 10 on its session clock — never back (a new leader's clock
// may be behind its predecessor's), and forgets the sessions unused for
// longer than idle by it, least recently used first (0: none expire by
// time). Log format 9 on.
func (t *sessionTable) tick(at int64, idle time.Duration) {
	t.clock = max(t.clock, at)
	if idle <= 0 {
		return
	}
	for e := t.lru.Front(); e != nil; e = t.lru.Front() {
		sess := e.Value.(*session)
		if t.clock-sess.lastUsed <= int64(idle) {
			return // the rest were used later
		}
		t.remove(sess)
	}
}

// startClock starts the clock at the proposal time of the SET_FORMAT to
// log format 9 and marks every session used then: members that replayed
// older entries and members that restored an older snapshot (without
// times) agree from here on.
func (t *sessionTable) startClock(proposed int64) {
	t.clock = proposed
	for e := t.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*session).lastUsed = proposed
	}
}

// addRestored appends a session read from a snapshot (which lists them
// least recently used first).
func (t *sessionTable) addRestored(sess *session) {
	sess.elem = t.lru.PushBack(sess)
	if len(sess.kept) > 0 {
		sess.holder = t.holders.PushBack(sess)
	}
	t.keptResults += len(sess.kept)
	t.sessions[sess.id] = sess
}

// session returns the client's session, creating it (and evicting the least
// recently used one over MaxSessions) as needed, and marks it used at index.
func (t *sessionTable) session(id string, index uint64) *session {
	sess, ok := t.sessions[id]
	if !ok {
		id = strings.Clone(id) // the caller's may alias a log entry
		sess = &session{id: id}
		sess.elem = t.lru.PushBack(sess)
		t.sessions[id] = sess
		for len(t.sessions) > MaxSessions {
			t.remove(t.lru.Front().Value.(*session))
		}
	} else {
		t.lru.MoveToBack(sess.elem)
		if sess.holder != nil {
			t.holders.MoveToBack(sess.holder)
		}
	}
	sess.lastIndex, sess.lastUsed = index, t.clock
	return sess
}

// OpenSessionResult is the result of an OPEN_SESSION: the id of the new
// session, or why none was opened.
type OpenSessionResult struct {
	SessionID string
	Index     uint64
	// IdleTimeout is the replicated idle timeout when the session opened
	// (log format 9; 0: none).
	IdleTimeout time.Duration
	Err         error
}

// SessionID names the session an OPEN_SESSION of clientID at index opens.
// The index makes it unlike every other open's.
func SessionID(clientID string, index uint64) string {
	return clientID + "@" + strconv.FormatUint(index, 10)
}

// ValidSessionClientID reports whether an OPEN_SESSION may name clientID.
func ValidSessionClientID(clientID string) bool {
	return clientID != "" && len(clientID) <= MaxSessionBaseBytes && utf8.ValidString(clientID)
}

// openSession opens the session of clientID at index: a new one, empty,
// the most recently used (evicting the least recently used over
// MaxSessions). A session of that id that requests started without an
// open (a client may name any id) is replaced: the opener's requests must
// not be answered with another's results.
func (s *State) openSession(index uint64, clientID string) OpenSessionResult {
	if !ValidSessionClientID(clientID) {
		return OpenSessionResult{Index: index, Err: ErrSessionClientID}
	}
	id := SessionID(clientID, index)
	if old, ok := s.sessions[id]; ok {
		s.remove(old)
	}
	s.session(id, index)
	return OpenSessionResult{SessionID: id, Index: index, IdleTimeout: s.SessionIdleTimeout()}
}

// CloseSessionResult is the result of a CLOSE_SESSION: whether the state
// machine held the session until then, or why nothing was done.
type CloseSessionResult struct {
	Closed bool
	Index  uint64
	Err    error
}

// ValidSessionID reports whether a CLOSE_SESSION may name id: any client
// id a request may carry (an opened session's "<client id>@<index>" or an
// id a client used without an open).
func ValidSessionID(id string) bool {
	return id != "" && len(id) <= MaxClientIDBytes && utf8.ValidString(id)
}

// closeSession ends session id: it and its kept results are forgotten, and
// its later requests, marked established, are refused (ErrSessionExpired)
// as after an eviction. A session the state machine does not hold (closed
// before, evicted, never opened) is not an error — a retried close finds
// its first attempt applied — and changes nothing.
func (s *State) closeSession(index uint64, id string) CloseSessionResult {
	if !ValidSessionID(id) {
		return CloseSessionResult{Index: index, Err: ErrSessionID}
	}
	sess, ok := s.sessions[id]
	if ok {
		s.remove(sess)
	}
	return CloseSessionResult{Closed: ok, Index: index}
}

// remove forgets a session and its results.
func (t *sessionTable) remove(sess *session) {
	t.lru.Remove(sess.elem)
	delete(t.sessions, sess.id)
	t.keptResults -= len(sess.kept)
	if sess.holder != nil {
		t.holders.Remove(sess.holder)
	}
}

// sessionExpired reports whether a request of an established session
// (one its client had an answer from) must be refused: from log format 6
// on, when the state machine does not hold the session.
func (s *State) sessionExpired(id string) bool {
	if s.LogFormat() < SessionExpiryFormat {
		return false
	}
	_, ok := s.sessions[id]
	return !ok
}

// keep records the result of a request not kept yet in sess (just marked
// used), applies the client's ack and drops results over the bounds: the
// session's oldest over MaxResultsPerSession and, from log format 5 on,
// the oldest of the least recently used session holding results while all
// sessions keep more than MaxKeptResults (those drops raise the session's
// droppedThrough). Every step costs the same however the client numbers or
// acks its requests: a client that never acks has its oldest result
// dropped on every request.
func (t *sessionTable) keep(sess *session, r keptResult, acked uint64, format uint32) {
	floors := format >= SessionFloorFormat
	before := len(sess.kept)
	if n := len(sess.kept); n == 0 || sess.kept[n-1].requestSeq < r.requestSeq {
		sess.kept = append(sess.kept, r) // the usual case: seqs rise
	} else {
		i, _ := slices.BinarySearchFunc(sess.kept, r.requestSeq, cmpRequestSeq)
		if gen := t.captures.Load(); sess.keptGen != gen {
			// A capture since the array was made may share it (see
			// capture), and an insert in place would shift what it
			// reads: insert into a new array, this session's own.
			sess.kept = slices.Insert(slices.Clip(sess.kept), i, r)
			sess.keptGen = gen
		} else {
			sess.kept = slices.Insert(sess.kept, i, r)
		}
	}
	sess.ack(acked)
	if n := len(sess.kept) - MaxResultsPerSession; n > 0 {
		sess.drop(n, floors)
	}
	t.keptResults += len(sess.kept) - before
	t.updateHolder(sess)
	if !floors {
		return
	}
	for t.keptResults > MaxKeptResults {
		// Never sess itself: it is the most recently used, and one
		// session alone cannot exceed the total.
		old := t.holders.Front().Value.(*session)
		old.drop(1, true)
		t.keptResults--
		t.updateHolder(old)
	}
}

// updateHolder puts sess in or out of the holders after its results
// changed. A session joins the holders only right after it was used, so
// at the back is its place in lru order.
func (t *sessionTable) updateHolder(sess *session) {
	switch {
	case len(sess.kept) > 0 && sess.holder == nil:
		sess.holder = t.holders.PushBack(sess)
	case len(sess.kept) == 0 && sess.holder != nil:
		t.holders.Remove(sess.holder)
		sess.holder = nil
	}
}

// ack forgets the results of every request at or below seq.
func (sess *session) ack(seq uint64) {
	if seq <= sess.ackedSeq {
		return
	}
	i, _ := slices.BinarySearchFunc(sess.kept, seq+1, cmpRequestSeq)
	sess.kept = sess.kept[i:]
	sess.ackedSeq = seq
}

// drop forgets the n oldest results unacknowledged; floors records them in
// droppedThrough (log format 5).
func (sess *session) drop(n int, floors bool) {
	if floors {
		sess.droppedThrough = max(sess.droppedThrough, sess.kept[n-1].requestSeq)
	}
	sess.kept = sess.kept[n:]
}

// result returns the kept result of request seq.
func (sess *session) result(seq uint64) (keptResult, bool) {
	i, ok := slices.BinarySearchFunc(sess.kept, seq, cmpRequestSeq)
	if !ok {
		return keptResult{}, false
	}
	return sess.kept[i], true
}

// expired reports whether request seq, above the ack and not kept, is a
// retry whose result was dropped: at or below droppedThrough, or (the rule
// of every format) below the oldest kept result of a full session.
func (sess *session) expired(seq uint64) bool {
	return seq <= sess.droppedThrough || (len(sess.kept) >= MaxResultsPerSession && seq < sess.minResultSeq())
}

func cmpRequestSeq(r keptResult, seq uint64) int { return cmp.Compare(r.requestSeq, seq) }

// minResultSeq is the lowest request seq with a kept result (0 when none
// is kept).
func (sess *session) minResultSeq() uint64 {
	if len(sess.kept) == 0 {
		return 0
	}
	return sess.kept[0].requestSeq
}

// capture takes what a snapshot or digest needs of the session in O(1):
// the kept results are shared, not copied (the caller counts the capture
// in sessionTable.captures first). Nothing writes into them after: an ack
// or a drop only re-slices, an append writes past the captured length (the
// end of the results never moves back), and an insert, the one write in
// place, first moves the results to a new array if a capture was taken
// since the array was made (keep). So the capture may be read by another
// goroutine (a snapshot's Persist) while the apply goes on, and capture
// itself writes nothing of the session (captures run under the FSM's read
// lock, side by side).
func (sess *session) capture() sessionCapture {
	return sessionCapture{id: sess.id, ackedSeq: sess.ackedSeq, lastIndex: sess.lastIndex, droppedThrough: sess.droppedThrough, lastUsed: sess.lastUsed, kept: slices.Clip(sess.kept)}
}

// sessionCapture is a session as of a capture.
type sessionCapture struct {
	id                                  string
	ackedSeq, lastIndex, droppedThrough uint64
	lastUsed                            int64
	kept                                []keptResult
}

// record is the snapshot record of the capture.
func (c *sessionCapture) record() *pb.Session {
	out := &pb.Session{ClientId: c.id, AckedSeq: c.ackedSeq, LastIndex: c.lastIndex, DroppedThrough: c.droppedThrough, LastUsedUnixNanos: c.lastUsed, Results: make([]*pb.SessionResult, len(c.kept))}
	for i, r := range c.kept {
		out.Results[i] = &pb.SessionResult{RequestSeq: r.requestSeq, FirstSeq: r.firstSeq, Count: r.count}
	}
	return out
}
