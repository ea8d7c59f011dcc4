package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultPort is the default gossip port (TCP and UDP).
const DefaultPort = 7946

// Config configures a Memberlist. Zero timing and sizing fields take the
// values of DefaultConfig.
type Config struct {
	// BindAddr is the gossip listen address, host:port with an IP host. TCP
	// and UDP share the port; port 0 picks a free one.
	BindAddr string
	// AdvertiseAddr is the optional address (IP:port) advertised to peers
	// instead of the bound one.
	AdvertiseAddr string
	// ClusterID names the cluster. It is used as memberlist's Label, so
	// packets and streams of another cluster are rejected by memberlist
	// itself, and it must match Meta.ClusterID.
	ClusterID string
	// Meta is the local member's metadata. Meta.ClusterID may be left empty.
	Meta Meta
	// Join lists seed addresses (host:port). New joins them in the
	// background, retrying with backoff until at least one other member
	// answers, and retries again whenever this member finds itself alone.
	Join []string
	// Logger receives memberlist's log output, mapped to slog levels. Nil
	// means slog.Default().
	Logger *slog.Logger
	// Keyring optionally enables gossip encryption (AES-GCM with the
	// primary key; every installed key is tried on what arrives) and lets
	// the running member rotate keys (Memberlist.InstallKey, UseKey,
	// RemoveKey). Members share at least one key, and each one's primary
	// must be installed on all the others, or they cannot talk. With a
	// Keyring, memberlist encrypts everything and refuses clear gossip.
	Keyring *Keyring
	// SecretKey is the single-key shorthand (16, 24 or 32 bytes) used
	// when Keyring is nil: a keyring of that one key, on the wire exactly
	// what a Keyring of one key sends.
	SecretKey []byte

	// ProbeInterval is the failure-detector probe interval.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe ack; must not exceed
	// ProbeInterval.
	ProbeTimeout time.Duration
	// GossipInterval is the interval between gossip rounds.
	GossipInterval time.Duration
	// SuspicionMult scales how long a suspect member has to refute before it
	// is declared dead.
	SuspicionMult int
	// PushPullInterval is the interval between full state exchanges with a
	// random member, the anti-entropy that repairs what gossip missed.
	PushPullInterval time.Duration

	// JoinRetryMin is the first retry delay of the background join loop.
	JoinRetryMin time.Duration
	// JoinRetryMax caps the retry delay; it is also the interval at which a
	// joined member checks whether it has become isolated.
	JoinRetryMax time.Duration
	// EventBuffer is the capacity of the Events channel.
	EventBuffer int
	// BroadcastTimeout bounds how long UpdateMeta waits for its update to be
	// broadcast.
	BroadcastTimeout time.Duration
}

// DefaultConfig returns a Config with memberlist's LAN timings, the default
// port on all interfaces, and default join, event and broadcast settings.
// ClusterID and Meta must still be set.
func DefaultConfig() Config {
	lan := memberlist.DefaultLANConfig()
	return Config{
		BindAddr:         net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultPort)),
		ProbeInterval:    lan.ProbeInterval,
		ProbeTimeout:     lan.ProbeTimeout,
		GossipInterval:   lan.GossipInterval,
		SuspicionMult:    lan.SuspicionMult,
		PushPullInterval: lan.PushPullInterval,
		JoinRetryMin:     time.Second,
		JoinRetryMax:     30 * time.Second,
		EventBuffer:      256,
		BroadcastTimeout: 5 * time.Second,
	}
}

// withDefaults fills zero fields from DefaultConfig and Meta.ClusterID from
// ClusterID.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BindAddr == "" {
		c.BindAddr = d.BindAddr
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = d.ProbeInterval
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = d.ProbeTimeout
	}
	if c.GossipInterval == 0 {
		c.GossipInterval = d.GossipInterval
	}
	if c.SuspicionMult == 0 {
		c.SuspicionMult = d.SuspicionMult
	}
	if c.PushPullInterval == 0 {
		c.PushPullInterval = d.PushPullInterval
	}
	if c.JoinRetryMin == 0 {
		c.JoinRetryMin = d.JoinRetryMin
	}
	if c.JoinRetryMax == 0 {
		c.JoinRetryMax = max(d.JoinRetryMax, c.JoinRetryMin)
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = d.EventBuffer
	}
	if c.BroadcastTimeout == 0 {
		c.BroadcastTimeout = d.BroadcastTimeout
	}
	if c.Meta.ClusterID == "" {
		c.Meta.ClusterID = c.ClusterID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports whether c, with defaults applied, is usable by New.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, _, err := splitIPPort("bind", c.BindAddr, true); err != nil {
		return err
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort("advertise", c.AdvertiseAddr, false); err != nil {
			return err
		}
	}
	if c.ClusterID == "" {
		return errors.New("membership: config: cluster id is required")
	}
	if len(c.ClusterID) > memberlist.LabelMaxSize {
		return fmt.Errorf("membership: config: cluster id is longer than %d bytes", memberlist.LabelMaxSize)
	}
	if c.Meta.ClusterID != c.ClusterID {
		return fmt.Errorf("membership: config: meta cluster id %q differs from cluster id %q", c.Meta.ClusterID, c.ClusterID)
	}
	if _, err := encodeMeta(c.Meta, false); err != nil {
		return err
	}
	for _, s := range c.Join {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("membership: config: join address %q is not host:port", s)
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return fmt.Errorf("membership: config: secret key must be 16, 24 or 32 bytes, got %d", len(c.SecretKey))
	}
	if c.ProbeInterval < 0 || c.ProbeTimeout < 0 || c.GossipInterval < 0 || c.SuspicionMult < 0 || c.PushPullInterval < 0 ||
		c.JoinRetryMin < 0 || c.JoinRetryMax < 0 || c.EventBuffer < 0 || c.BroadcastTimeout < 0 {
		return errors.New("membership: config: timings and sizes must not be negative")
	}
	if c.ProbeTimeout > c.ProbeInterval {
		return fmt.Errorf("membership: config: probe timeout %v exceeds probe interval %v", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.JoinRetryMax < c.JoinRetryMin {
		return fmt.Errorf("membership: config: join retry max %v is below join retry min %v", c.JoinRetryMax, c.JoinRetryMin)
	}
	return nil
}

// splitIPPort parses an IP:port address, as memberlist needs literal IPs.
func splitIPPort(what, addr string, allowZeroPort bool) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("membership: config: %s address %q: %v", what, addr, err)
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("membership: config: %s address %q: host must be an IP address", what, addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 || (port == 0 && !allowZeroPort) {
		return "", 0, fmt.Errorf("membership: config: %s address %q: invalid port", what, addr)
	}
	return host, port, nil
}

// deadNodeReclaimTime is how long after a member was declared dead its name
// may be taken by another address: at once (memberlist reads 0 as never).
const deadNodeReclaimTime = time.Nanosecond

// memberlistConfig translates a validated, defaulted Config. It binds the
// guarded transport, so the caller must shut it down if memberlist.Create
// fails.
func (c Config) memberlistConfig(d *delegate, lim *mismatchLog) (*memberlist.Config, *guardedTransport, error) {
	mc := memberlist.DefaultLANConfig()
	host, port, _ := splitIPPort("bind", c.BindAddr, true)
	tr, err := newGuardedTransport(host, port, c.Logger, mc.TCPTimeout)
	if err != nil {
		return nil, nil, err
	}
	mc.Transport = tr
	mc.Name = c.Meta.ID
	mc.BindAddr, mc.BindPort = host, tr.GetAutoBindPort()
	mc.AdvertisePort = mc.BindPort
	if c.AdvertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort, _ = splitIPPort("advertise", c.AdvertiseAddr, false)
	}
	mc.Label = c.ClusterID
	// memberlist.DefaultLANConfig leaves GossipVerifyIncoming and
	// GossipVerifyOutgoing on: with a keyring everything is encrypted
	// and clear gossip is refused.
	if c.Keyring != nil {
		mc.Keyring = c.Keyring.ring
	}
	// Compression stays off: guardedTransport rejects compressed streams,
	// which memberlist v0.5.4 does not decode safely.
	mc.EnableCompression = false
	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.GossipInterval = c.GossipInterval
	mc.SuspicionMult = c.SuspicionMult
	mc.PushPullInterval = c.PushPullInterval
	// A member that crashed and came back at another address (a container
	// restarted on a compose network may get another IP) is refused by its
	// peers while they hold its name at the old address. Once the failure
	// detector has declared the old address dead, the name is reclaimed by
	// the new one straight away (the delegate's NotifyConflict and the join
	// loop fetch its state then), instead of staying refused until
	// memberlist forgets the dead member (GossipToTheDeadTime, 30 s). Two
	// live processes under one name still conflict: a live entry is never
	// reclaimed.
	mc.DeadNodeReclaimTime = deadNodeReclaimTime
	mc.Delegate = d
	mc.Events = d
	mc.Conflict = d
	mc.LogOutput = nil
	mc.Logger = newStdLogger(c.Logger, lim)
	return mc, tr, nil
}
