// Package membership provides gossip membership and failure detection for
// Logbook coordinators and storage nodes, built on hashicorp/memberlist, and
// the pure bootstrap-expect decision (BootstrapDecision) coordinators use to
// form a Raft cluster.
//
// Every member gossips a small Meta (role, ID, cluster ID, addresses, whether
// it already has Raft state). The cluster ID doubles as memberlist's label, so
// traffic from another cluster is rejected by memberlist itself; members whose
// metadata does not decode or names another cluster are excluded as well.
//
// Security: without Config.Keyring (or SecretKey), gossip is neither authenticated nor
// encrypted, so anyone who can reach the gossip port and knows the cluster ID
// can join and advertise members (including fake coordinators, which
// BootstrapDecision would count). Production clusters should set a key;
// keys rotate without downtime through the keyring (keyring.go).
// Independently of the key, incoming and outgoing gossip streams are
// screened for malformed length fields that would crash memberlist v0.5.4.
package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	// ErrClosed is returned by operations on a closed Memberlist.
	ErrClosed = errors.New("membership: closed")
	// ErrLeft is returned by UpdateMeta after Leave.
	ErrLeft = errors.New("membership: left the cluster")
)

// Memberlist is a running gossip member. Its methods are safe for concurrent
// use.
type Memberlist struct {
	cfg       Config
	log       *slog.Logger
	ml        *memberlist.Memberlist
	localAddr string

	metaMu  sync.Mutex // guards meta, leaving, metaBuf
	meta    Meta
	leaving bool
	metaBuf []byte

	membersMu sync.RWMutex
	members   map[string]Member // admitted, not dead or left; keyed by name
	rejected  map[string]string // name → exclusion reason already logged
	claimants map[string]string // name → a new address refused while the old one lived

	// reclaim carries addresses to push/pull with: a member that came back
	// at a new address, whose old address was just declared dead.
	reclaim chan string

	evMu     sync.Mutex // guards evClosed and sends on events
	events   chan Event
	evClosed bool
	dropped  atomic.Uint64

	// lifeMu guards closed; UpdateMeta and Leave hold it for reading
	// throughout, so Close cannot shut memberlist down under them.
	lifeMu   sync.RWMutex
	closed   bool
	updateMu sync.Mutex // serialises UpdateMeta and Leave; guards left
	left     bool

	keyring  *Keyring     // nil: gossip in clear
	mismatch *mismatchLog // rate-limits the wrong-key warning

	stopJoin     context.CancelFunc
	joinDone     chan struct{}
	joinAttempts atomic.Uint64
}

// New validates cfg, starts memberlist on cfg.BindAddr and, if cfg.Join is
// not empty, a background loop that joins the seeds.
func New(cfg Config) (*Memberlist, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	buf, err := encodeMeta(cfg.Meta, false)
	if err != nil {
		return nil, err
	}
	cfg.Join = slices.Clone(cfg.Join)
	if cfg.Keyring == nil && len(cfg.SecretKey) > 0 {
		if cfg.Keyring, err = NewKeyring([][]byte{cfg.SecretKey}); err != nil {
			return nil, fmt.Errorf("membership: config: %w", err)
		}
	}
	m := &Memberlist{
		keyring:   cfg.Keyring,
		mismatch:  &mismatchLog{},
		cfg:       cfg,
		log:       cfg.Logger,
		meta:      cfg.Meta,
		metaBuf:   buf,
		members:   make(map[string]Member),
		rejected:  make(map[string]string),
		claimants: make(map[string]string),
		reclaim:   make(chan string, 16),
		events:    make(chan Event, cfg.EventBuffer),
		joinDone:  make(chan struct{}),
	}
	mc, tr, err := cfg.memberlistConfig(&delegate{m: m}, m.mismatch)
	if err != nil {
		return nil, fmt.Errorf("membership: listen on %s: %w", cfg.BindAddr, err)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("membership: start memberlist on %s: %w", cfg.BindAddr, err)
	}
	m.ml = ml
	tr.open()
	// Only UpdateNode rewrites the local address fields and it cannot run
	// yet, so reading them here does not race.
	m.localAddr = ml.LocalNode().Address()

	ctx, cancel := context.WithCancel(context.Background())
	m.stopJoin = cancel
	go m.joinLoop(ctx, m.seeds())
	m.log.Info("membership: started", "id", cfg.Meta.ID, "cluster", cfg.ClusterID,
		"addr", m.localAddr, "encrypted", cfg.Keyring != nil, "seeds", strings.Join(cfg.Join, ","))
	return m, nil
}

// seeds returns the configured seeds without our own address.
func (m *Memberlist) seeds() []string {
	var out []string
	for _, s := range m.cfg.Join {
		if s != m.localAddr && s != m.cfg.BindAddr {
			out = append(out, s)
		}
	}
	return out
}

// joinLoop joins the seeds with jittered exponential backoff until a seed
// has answered a push/pull, then keeps checking every JoinRetryMax and
// rejoins if this member ends up alone (for example after a partition in
// which every peer was declared dead). memberlist itself never re-contacts
// dead members. Gossip heard before the first join does not count as
// joined: a member restarted at an address another member used hears the
// gossip meant for that one at once, and would otherwise never announce
// itself to the seeds.
//
// It also pushes and pulls state with each address sent on m.reclaim: a
// member that restarted at another address is refused while its old entry
// lives, and nothing tells it so once the old entry is declared dead (the
// dead message goes to the old address), so this side asks it for its
// state, which carries its alive entry at the new address.
func (m *Memberlist) joinLoop(ctx context.Context, seeds []string) {
	defer close(m.joinDone)
	backoff := m.cfg.JoinRetryMin
	failures := 0
	joined := false
	for {
		wait := m.cfg.JoinRetryMax
		if len(seeds) > 0 && (!joined || m.ml.NumMembers() <= 1) {
			if m.tryJoin(ctx, seeds) {
				m.log.Info("membership: joined cluster", "members", m.ml.NumMembers(), "after_failures", failures)
				backoff, failures, joined = m.cfg.JoinRetryMin, 0, true
			} else if ctx.Err() == nil {
				failures++
				level := slog.LevelDebug
				if failures == 1 {
					level = slog.LevelWarn
				}
				m.log.Log(ctx, level, "membership: no seed reachable, retrying", "seeds", strings.Join(seeds, ","), "failures", failures, "retry_in", backoff)
				wait = backoff/2 + rand.N(backoff/2+1)
				backoff = min(2*backoff, m.cfg.JoinRetryMax)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case addr := <-m.reclaim:
			t.Stop()
			_, err := m.ml.Join([]string{addr})
			m.log.Info("membership: pushed and pulled state with a member back at a new address", "addr", addr, "err", err)
		case <-t.C:
		}
	}
}

// tryJoin contacts each seed in turn, so that Close only ever waits for one
// connection attempt. It reports whether another member is now known.
func (m *Memberlist) tryJoin(ctx context.Context, seeds []string) bool {
	contacted := false
	for _, s := range seeds {
		if ctx.Err() != nil {
			return false
		}
		n, err := m.ml.Join([]string{s})
		m.joinAttempts.Add(1)
		if err != nil {
			if keyMismatch(err.Error()) {
				m.mismatch.warn(m.log, "seed", s, "err", err)
			} else {
				m.log.Debug("membership: join attempt failed", "seed", s, "err", err)
			}
			continue
		}
		contacted = contacted || n > 0
	}
	return contacted && m.ml.NumMembers() > 1
}

// Members returns the admitted members that are alive (or suspect, or
// leaving), including the local one, sorted by name.
func (m *Memberlist) Members() []Member {
	m.membersMu.RLock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	m.membersMu.RUnlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Events returns the channel of membership changes, including those of the
// local member. It is buffered (Config.EventBuffer); when it is full the
// oldest event is dropped (see DroppedEvents), so memberlist is never
// blocked. Consumers that must not miss state should re-read Members after
// noticing drops. The channel is closed by Close.
func (m *Memberlist) Events() <-chan Event { return m.events }

// DroppedEvents returns how many events were dropped because the Events
// channel was full.
func (m *Memberlist) DroppedEvents() uint64 { return m.dropped.Load() }

// LocalMeta returns the local member's current metadata.
func (m *Memberlist) LocalMeta() Meta {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.meta
}

// UpdateMeta applies fn to a copy of the local metadata and, if the result is
// valid, fits the size limit and keeps ID and ClusterID, makes it current and
// gossips it. fn must not call UpdateMeta or Leave. UpdateMeta waits up to
// Config.BroadcastTimeout for the broadcast; a timeout is only logged, since
// the update is in effect and also spreads through periodic state sync.
func (m *Memberlist) UpdateMeta(fn func(*Meta)) error {
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	if m.left {
		return ErrLeft
	}

	cur := m.LocalMeta()
	next := cur
	fn(&next)
	if next.ID != cur.ID || next.ClusterID != cur.ClusterID {
		return errors.New("membership: update meta: id and cluster id cannot change")
	}
	if err := m.setMeta(next, false); err != nil {
		return err
	}
	if err := m.ml.UpdateNode(m.cfg.BroadcastTimeout); err != nil {
		m.log.Warn("membership: metadata update not yet broadcast", "err", err)
	}
	return nil
}

// setMeta encodes and installs new local metadata.
func (m *Memberlist) setMeta(meta Meta, leaving bool) error {
	buf, err := encodeMeta(meta, leaving)
	if err != nil {
		return err
	}
	m.metaMu.Lock()
	m.meta, m.leaving, m.metaBuf = meta, leaving, buf
	m.metaMu.Unlock()
	return nil
}

// Leave gracefully leaves the cluster, so peers report this member as
// StateLeft rather than StateDead: it stops the join loop, gossips that it is
// leaving, then broadcasts memberlist's leave message, waiting at most timeout
// overall (0 means no limit). The member keeps answering gossip until Close.
// Calling Leave again is a no-op.
func (m *Memberlist) Leave(timeout time.Duration) error {
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	if m.left {
		return nil
	}
	m.left = true
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	m.stopJoin()
	<-m.joinDone

	remaining := func(frac time.Duration) time.Duration {
		if deadline.IsZero() {
			return 0
		}
		return max(time.Until(deadline)/frac, time.Millisecond)
	}
	if err := m.setMeta(m.LocalMeta(), true); err != nil {
		return err
	}
	if err := m.ml.UpdateNode(remaining(2)); err != nil {
		m.log.Warn("membership: leaving announcement not yet broadcast", "err", err)
	}
	if err := m.ml.Leave(remaining(1)); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	m.log.Info("membership: left cluster", "id", m.cfg.Meta.ID)
	return nil
}

// Close stops the join loop, shuts memberlist down without a leave message
// (peers will detect the failure; call Leave first to depart gracefully) and
// closes the Events channel. It waits for a running UpdateMeta or Leave and
// for an in-flight join attempt. Close is idempotent.
func (m *Memberlist) Close() error {
	m.lifeMu.Lock()
	if m.closed {
		m.lifeMu.Unlock()
		return nil
	}
	m.closed = true
	m.lifeMu.Unlock()

	m.stopJoin()
	<-m.joinDone
	err := m.ml.Shutdown()

	m.evMu.Lock()
	m.evClosed = true
	close(m.events)
	m.evMu.Unlock()

	m.membersMu.Lock()
	clear(m.members)
	m.membersMu.Unlock()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

// LocalAddr returns the advertised gossip address (host:port) of the local
// member; with port 0 in BindAddr it reveals the chosen port.
func (m *Memberlist) LocalAddr() string { return m.localAddr }

// Health returns memberlist's health score: 0 is healthy, higher values mean
// the local member is struggling to meet the protocol's timing (and probes
// less aggressively as a result).
func (m *Memberlist) Health() int { return m.ml.GetHealthScore() }
