package coordserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/blocks"
	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/raftnet"
	"github.com/logbookhq/logbook/internal/raftnode"
	"github.com/logbookhq/logbook/journal"
	"google.golang.org/protobuf/proto"
)

// Peer is one member of a static initial configuration (--peers).
type Peer struct {
	ID       string
	RaftAddr string
}

// Security holds every listener's security settings in one place. Zero
// values mean plaintext (coord dev, a LAN test cluster).
type Security struct {
	// TLS, when set, is the member's certificate and the cluster CA
	// (internal/pki), reloaded from their files: every listener serves
	// it and every dialer presents it, TLS 1.3 only. The Raft port and
	// the Peer service accept coordinator certificates only; NodeLink
	// accepts node certificates naming the node the request claims; the
	// client services any certificate of the cluster CA; gRPC health
	// checks need none. The HTTP port serves TLS and asks a certificate
	// for /metrics and pprof (security.go).
	TLS *pki.Source
	// ACL enforces the access control the cluster holds (coord acl;
	// --acl-enabled): user calls need a token or certificate whose user
	// the roles allow (acl_edge.go). It needs TLS, so that tokens never
	// travel in plaintext and members prove who they are. Every
	// coordinator of a cluster should run with the same setting: a
	// member without it forwards calls it did not check.
	ACL bool
	// ACLBootstrapToken, when set (a token, lbt_...: coord acl token
	// gen), bootstraps the access control with it once: the first leader
	// at log format 12 that finds it not bootstrapped binds user "admin"
	// to the admin role with this token, as coord acl bootstrap would
	// (Consul's initial management token). Every coordinator may be given
	// the same one; once bootstrapped it is an ordinary token, revoked
	// like any other.
	ACLBootstrapToken string
	// BlockTokenLifetime is how long a block access token the leader
	// hands out with a block's locations lasts (ACL on; default 1h), and
	// BlockKeyRoll how often the leader rolls the key that signs them
	// (default 20m). A key outlives its last token: it expires a roll and
	// a lifetime after it stopped signing (blocktokens.go).
	BlockTokenLifetime time.Duration
	BlockKeyRoll       time.Duration
	// GossipKey (16, 24 or 32 bytes) encrypts gossip, alone or, with
	// GossipKeyringFile, as the seed of a missing file.
	GossipKey []byte
	// GossipKeyringFile is the gossip keyring (a JSON array of base64
	// keys, primary first): it wins over GossipKey when it exists, and
	// every coord gossip keyring change is written to it.
	GossipKeyringFile string
}

// RaftTiming holds the Raft timeouts and log retention knobs.
type RaftTiming = raftnode.Timing

// Raft log store backends (--raft-log-store); internal/raftnode says what
// each one is.
const (
	LogStoreAuto   = raftnode.LogStoreAuto
	LogStoreWAL    = raftnode.LogStoreWAL
	LogStoreBoltDB = raftnode.LogStoreBoltDB
)

// JournalConfig holds the segment and retention knobs.
//
// EventsPerSegment, SegmentBytes, MaxSegments, MaxEvents and
// SessionIdleTimeout are settings of the whole cluster: before log format
// 11 the leader replicates its own (so every member rolls segments
// identically, and a leader change brings the new leader's); from 11 on
// the first leader seeds the cluster's from its own once, and after that
// only coord journal config set changes them (fsm.HeldConfigFormat).
type JournalConfig struct {
	// EventsPerSegment and SegmentBytes roll segments.
	EventsPerSegment uint64
	SegmentBytes     uint64
	// MaxSegments and MaxEvents trigger automatic trim of expired
	// segments; 0 disables that bound.
	MaxSegments int
	MaxEvents   int
	// MaxRetainedBytes is the retention quota: while the sealed segments
	// take at least this much (fsm.State.SealedBytes, about their
	// memory), this member as leader refuses appends of new events with
	// ResourceExhausted JOURNAL_FULL, and its automatic trim drops
	// expired segments until they take less, as etcd refuses writes past
	// --quota-backend-bytes. It bounds what a lagging consumer can make
	// every member hold (plus the open segment). 0: no quota. This
	// member's own (give every member the same).
	MaxRetainedBytes uint64
	// Linger bounds how long the leader's next batch (and a follower's
	// next forward) waits for the clients of the batch that just
	// committed (journal.BatcherConfig.Linger); 0 never waits. This
	// member's own.
	Linger time.Duration
	// SessionIdleTimeout: a client session unused this long, by the
	// sessions' clock, is forgotten with the results it keeps (log format
	// 9; whole seconds; 0: only the least recently used over
	// fsm.MaxSessions is).
	SessionIdleTimeout time.Duration
	// Given marks the settings above that were given explicitly (coord
	// serve's flags) rather than left at their defaults: once the cluster
	// holds its settings, a member given a value that differs from the
	// cluster's warns that it is not used.
	Given JournalGiven
}

// JournalGiven marks the cluster-wide journal settings given explicitly.
type JournalGiven struct {
	EventsPerSegment, SegmentBytes, MaxSegments, MaxEvents, SessionIdleTimeout bool
}

// seedWith is c completed with this member's settings for every field c
// does not set: the change an administrator asks for before the cluster
// holds its settings, so that it seeds the rest as the leader would have.
func (j JournalConfig) seedWith(c *fsmpb.SetJournalConfigCommand) *fsmpb.SetJournalConfigCommand {
	out := j.seed()
	proto.Merge(out, c) // the fields c sets (optional: present or not)
	return out
}

// seed is the command that makes these settings the cluster's.
func (j JournalConfig) seed() *fsmpb.SetJournalConfigCommand {
	u := func(v uint64) *uint64 { return &v }
	return &fsmpb.SetJournalConfigCommand{
		EventsPerSegment:          u(j.EventsPerSegment),
		SegmentBytes:              u(j.SegmentBytes),
		SessionIdleTimeoutSeconds: u(uint64(j.SessionIdleTimeout / time.Second)),
		MaxSegments:               u(uint64(j.MaxSegments)),
		MaxEvents:                 u(uint64(j.MaxEvents)),
	}
}

// Config configures one coordinator.
type Config struct {
	ID        string
	ClusterID string
	DataDir   string

	RaftAddr   string
	GRPCAddr   string
	GossipAddr string
	HTTPAddr   string
	// Advertised addresses; empty means the bind address (which must then
	// not be an unspecified IP such as 0.0.0.0).
	AdvertiseRaft   string
	AdvertiseGRPC   string
	AdvertiseGossip string
	AdvertiseHTTP   string
	// EnablePprof serves net/http/pprof under /debug/pprof/ on HTTPAddr
	// (off by default, like etcd's --enable-pprof).
	EnablePprof bool
	// ConsoleSampleEvery is how often the web console samples this
	// member's metrics for its charts (0: every 5 s).
	ConsoleSampleEvery time.Duration

	// BootstrapExpect: form a new cluster once this many coordinators see
	// each other over gossip. 0 disables (join an existing cluster).
	BootstrapExpect int
	// Join lists gossip seeds (host:port).
	Join []string
	// Peers is the static alternative to bootstrap-expect: the initial
	// voters. The member with the lowest id bootstraps.
	Peers []Peer

	// LogStore is the Raft log and stable store backend: LogStoreAuto
	// (or empty), LogStoreWAL or LogStoreBoltDB (internal/raftnode).
	LogStore string
	// WALPrefill writes every raft-wal segment full of zeros ahead of use
	// instead of preallocating it with fallocate, so that the sync after
	// each append is a data flush without a file-system journal commit
	// (zeroedSegments). Costs one spare segment of disk and a second write
	// of every segment. No effect on raft-boltdb.
	WALPrefill bool

	Raft    RaftTiming
	Journal JournalConfig
	// NoLeaderHold is how long a request waits for a leader before it
	// fails with Unavailable.
	NoLeaderHold time.Duration
	// ApplyTimeout bounds one batch's wait for commit.
	ApplyTimeout time.Duration

	MaxEventBytes       int
	MaxEventsPerRequest int
	MaxRequestBytes     int
	MaxReadEvents       int

	Security Security
	Logger   *slog.Logger

	// FS tunes leases, block recovery and storage-node liveness.
	FS blocks.Config

	// RaftDial, when set, opens this member's outgoing Raft connections
	// instead of a plain TCP dial: an in-process Cluster cuts the network
	// between its members through it (faultnet.go).
	RaftDial raftnet.DialFunc
	// leaderIndexBlocked, when set (tests only), is asked before a
	// follower asks the leader for its read index (refreshLeaderIndex);
	// true makes the attempt fail, as an unreachable leader would.
	leaderIndexBlocked func() bool
	// crashAt, when set (tests only), is asked at each named step of a
	// multi-step operation; true aborts the operation there, as a crash
	// would (Server.crashPoint).
	crashAt func(step string) bool
	// walSegmentBytes, when set (tests only), replaces raft-wal's 64 MiB
	// segment size so a test can fill several segments.
	walSegmentBytes int
	// maxLogFormat, when set (tests only), is the newest log format this
	// member claims to read, as a member of an older build would.
	maxLogFormat uint32
	// wallClock, when set (tests only), replaces time.Now for the times
	// this member stamps on the entries it proposes as leader: a member
	// whose wall clock is off.
	wallClock func() time.Time
}

// maxJournalLinger bounds JournalConfig.Linger: a batch that waits longer
// than a commit takes only adds latency.
const maxJournalLinger = 100 * time.Millisecond

// DefaultConfig returns the LAN defaults (docs/operations.md explains them).
func DefaultConfig() Config {
	return Config{
		ClusterID:  "logbook",
		LogStore:   LogStoreAuto,
		WALPrefill: true,
		RaftAddr:   "127.0.0.1:7000",
		GRPCAddr:   "127.0.0.1:7100",
		GossipAddr: "127.0.0.1:7200",
		HTTPAddr:   "127.0.0.1:7300",
		Raft: RaftTiming{
			HeartbeatTimeout:    500 * time.Millisecond,
			ElectionTimeout:     1000 * time.Millisecond,
			LeaderLeaseTimeout:  250 * time.Millisecond,
			CommitTimeout:       25 * time.Millisecond,
			SnapshotThreshold:   8192,
			SnapshotInterval:    30 * time.Second,
			TrailingLogs:        10240,
			MaxAppendEntries:    256,
			ParallelLeaderWrite: true,
		},
		Journal: JournalConfig{
			EventsPerSegment: 1024,
			SegmentBytes:     16 << 20,
			MaxSegments:      128,
			MaxEvents:        0,
			// Above the default retention at the largest segments (128
			// of up to 16 MiB), so the quota never bites while trim keeps
			// up.
			MaxRetainedBytes: 4 << 30,
			Linger:           journal.DefaultBatcherConfig().Linger,
			// LogCabin's default: far longer than any client's retries
			// (an expired session's retry is refused, not re-applied).
			SessionIdleTimeout: time.Hour,
		},
		NoLeaderHold:        5 * time.Second,
		ApplyTimeout:        10 * time.Second,
		MaxEventBytes:       1 << 20,
		MaxEventsPerRequest: 10000,
		MaxRequestBytes:     4 << 20,
		MaxReadEvents:       10000,
		FS:                  blocks.DefaultConfig(),
		Security:            Security{BlockTokenLifetime: defaultBlockTokenLifetime, BlockKeyRoll: defaultBlockKeyRoll},
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidID reports whether s is usable as a member or cluster id.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// Validate checks the configuration and reports every problem it finds.
func (c *Config) Validate() error {
	var errs []error
	if !ValidID(c.ID) {
		errs = append(errs, fmt.Errorf("id %q: want 1-64 of [A-Za-z0-9._-], starting alphanumeric", c.ID))
	}
	if !ValidID(c.ClusterID) {
		errs = append(errs, fmt.Errorf("cluster id %q: want 1-64 of [A-Za-z0-9._-], starting alphanumeric", c.ClusterID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	// Gossip may bind 0.0.0.0 without an advertise address: memberlist
	// then advertises the host's private IP.
	if _, _, err := net.SplitHostPort(c.GossipAddr); err != nil {
		errs = append(errs, fmt.Errorf("gossip address: %w", err))
	}
	for _, a := range []struct{ name, bind, adv string }{
		{"raft", c.RaftAddr, c.AdvertiseRaft},
		{"grpc", c.GRPCAddr, c.AdvertiseGRPC},
		{"http", c.HTTPAddr, c.AdvertiseHTTP},
	} {
		if err := checkAddr(a.bind, a.adv); err != nil {
			errs = append(errs, fmt.Errorf("%s address: %w", a.name, err))
		}
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect > 9 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d: want 0..9", c.BootstrapExpect))
	}
	if c.BootstrapExpect > 0 && len(c.Peers) > 0 {
		errs = append(errs, errors.New("bootstrap-expect and peers are alternatives: set one"))
	}
	seen := map[string]bool{}
	for _, p := range c.Peers {
		if !ValidID(p.ID) || p.RaftAddr == "" || seen[p.ID] {
			errs = append(errs, fmt.Errorf("peer %q=%q: want a unique valid id and a raft address", p.ID, p.RaftAddr))
		}
		seen[p.ID] = true
	}
	if len(c.Peers) > 0 && !seen[c.ID] {
		errs = append(errs, fmt.Errorf("peers do not include this member %q", c.ID))
	}
	if !raftnode.ValidLogStore(c.LogStore) {
		errs = append(errs, fmt.Errorf("raft log store %q: want auto, wal or boltdb", c.LogStore))
	}
	r := c.Raft
	if r.HeartbeatTimeout < 5*time.Millisecond || r.ElectionTimeout < r.HeartbeatTimeout || r.LeaderLeaseTimeout > r.HeartbeatTimeout || r.CommitTimeout <= 0 {
		errs = append(errs, errors.New("raft timing: want heartbeat >= 5ms, election >= heartbeat, 0 < commit, leader lease <= heartbeat"))
	}
	if r.MaxAppendEntries < 1 || r.MaxAppendEntries > 1024 {
		errs = append(errs, errors.New("raft max append entries: want 1..1024"))
	}
	if c.MaxEventBytes < 1 || c.MaxRequestBytes < c.MaxEventBytes || c.MaxEventsPerRequest < 1 || c.MaxReadEvents < 1 {
		errs = append(errs, errors.New("limits: want positive limits with max request bytes >= max event bytes"))
	}
	if j := c.Journal; j.EventsPerSegment < 1 || j.EventsPerSegment > fsm.MaxEventsPerSegment || j.SegmentBytes < 1 || j.SegmentBytes > fsm.MaxSegmentBytes ||
		j.MaxSegments < 0 || j.MaxSegments > fsm.MaxTrimSegments || j.MaxEvents < 0 || j.MaxEvents > fsm.MaxTrimEvents {
		errs = append(errs, fmt.Errorf("journal: want events per segment 1..%d, segment bytes 1..%d, max segments 0..%d and max events 0..%d",
			fsm.MaxEventsPerSegment, uint64(fsm.MaxSegmentBytes), fsm.MaxTrimSegments, uint64(fsm.MaxTrimEvents)))
	}
	if l := c.Journal.Linger; l < 0 || l > maxJournalLinger {
		errs = append(errs, fmt.Errorf("journal: linger %s: want 0..%s", l, maxJournalLinger))
	}
	if d := c.Journal.SessionIdleTimeout; d < 0 || d > fsm.MaxSessionIdleTimeout || d%time.Second != 0 {
		errs = append(errs, fmt.Errorf("journal: session idle timeout %s: want whole seconds, 0..%s", d, fsm.MaxSessionIdleTimeout))
	}
	if c.NoLeaderHold < 0 || c.ApplyTimeout <= 0 {
		errs = append(errs, errors.New("timeouts: want no-leader hold >= 0 and apply timeout > 0"))
	}
	if k := len(c.Security.GossipKey); k != 0 && k != 16 && k != 24 && k != 32 {
		errs = append(errs, fmt.Errorf("gossip key of %d bytes: want 16, 24 or 32", k))
	}
	if f := c.Security.GossipKeyringFile; f != "" {
		if err := gossipkeys.CheckFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Security.ACL && c.Security.TLS == nil {
		errs = append(errs, errors.New("ACL enforcement needs TLS (--tls-cert, --tls-key, --tls-ca): tokens would travel in plaintext and members could not prove who they are"))
	}
	if c.Security.BlockTokenLifetime < 0 || c.Security.BlockKeyRoll < 0 {
		errs = append(errs, errors.New("block token lifetime and block key roll must not be negative"))
	}
	if t := c.Security.ACLBootstrapToken; t != "" {
		if _, err := authz.ParseToken(t); err != nil {
			errs = append(errs, fmt.Errorf("ACL bootstrap token: %v", err))
		}
	}
	if src := c.Security.TLS; src != nil {
		if id := src.Identity(); id != (pki.Identity{Role: pki.RoleCoordinator, Name: c.ID}) {
			errs = append(errs, fmt.Errorf("the TLS certificate names %s; coordinator %q needs one of role coordinator named %q", id, c.ID, c.ID))
		}
	}
	if err := c.FS.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkAddr(bind, adv string) error {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return fmt.Errorf("bind %q: %w", bind, err)
	}
	if port == "" {
		return fmt.Errorf("bind %q: no port", bind)
	}
	if adv != "" {
		if _, _, err := net.SplitHostPort(adv); err != nil {
			return fmt.Errorf("advertise %q: %w", adv, err)
		}
		return nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("bind %q is unspecified: set the matching --advertise address", bind)
	}
	return nil
}

func advertised(bind, adv string) string {
	if adv != "" {
		return adv
	}
	return bind
}

// ParsePeers parses "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want id=host:port", part)
		}
		out = append(out, Peer{ID: id, RaftAddr: addr})
	}
	return out, nil
}
