package nodeserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/logbookhq/logbook/internal/gossipkeys"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/replica"
)

// VolumeSpec is one data directory and its storage type.
type VolumeSpec struct {
	Path        string
	StorageType replica.StorageType // StorageUnspecified means DISK
}

func (v VolumeSpec) String() string {
	if v.StorageType == replica.StorageUnspecified {
		return v.Path
	}
	return v.Path + ":" + v.StorageType.String()
}

// ParseVolumeSpec parses "PATH[:DISK|SSD|ARCHIVE|RAM_DISK]". A suffix that
// is not a storage type is part of the path.
func ParseVolumeSpec(s string) (VolumeSpec, error) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if t, err := replica.ParseStorageType(strings.ToUpper(s[i+1:])); err == nil {
			s = s[:i]
			if s == "" {
				return VolumeSpec{}, errors.New("volume: empty path")
			}
			return VolumeSpec{Path: s, StorageType: t}, nil
		}
	}
	if s == "" {
		return VolumeSpec{}, errors.New("volume: empty path")
	}
	return VolumeSpec{Path: s}, nil
}

// Security holds every listener's security settings in one place, as the
// coordinator's does. Zero values mean plaintext.
type Security struct {
	// TLS, when set, is the node's certificate and the cluster CA
	// (internal/pki), reloaded from their files: the gRPC and HTTP ports
	// serve it, the links to coordinators and other nodes present it, TLS
	// 1.3 only (security.go says who may call what).
	TLS *pki.Source
	// GossipKey (16, 24 or 32 bytes) encrypts gossip, alone or, with
	// GossipKeyringFile, as the seed of a missing file.
	GossipKey []byte
	// GossipKeyringFile is the gossip keyring (a JSON array of base64
	// keys, primary first): it wins over GossipKey when it exists, and
	// every coord gossip keyring change is written to it.
	GossipKeyringFile string
}

// Config configures one storage node.
type Config struct {
	ID string
	// DataDir is a single DISK volume; Volumes lists several. Set one.
	DataDir string
	Volumes []VolumeSpec
	// ReservedBytes is kept free on every volume for other users.
	ReservedBytes int64
	// VolumeFailuresTolerated: the node keeps serving while at most this
	// many volumes have failed.
	VolumeFailuresTolerated int
	// MaxLockedMemory is the budget for cached replicas (0: no caching).
	MaxLockedMemory int64
	// BlockPool is added at start (a node serves any pool loaded from disk
	// too).
	BlockPool string
	// BlockSize is the space reserved for a new replica of unknown size.
	BlockSize int64

	GRPCAddr   string
	HTTPAddr   string
	GossipAddr string // gossip bind address (TCP and UDP), used with Join
	// Advertised addresses; empty means the bind address.
	AdvertiseGRPC   string
	AdvertiseHTTP   string
	AdvertiseGossip string
	// EnablePprof serves net/http/pprof under /debug/pprof/ on HTTPAddr.
	EnablePprof bool

	// MaxTargets bounds the downstream nodes of one pipeline.
	MaxTargets int
	// SetupTimeout bounds connecting to the downstream node and its setup.
	SetupTimeout time.Duration
	// AckTimeout bounds the wait for a downstream node's ack of a packet.
	AckTimeout time.Duration
	// WriterStopTimeout bounds a recovery's wait for a running writer.
	WriterStopTimeout time.Duration
	// RestartReplicaExpiry is how long after a shutdown for restart the
	// replicas that were being written still reload RBW (HDFS
	// dfs.datanode.restart.replica.expiration, 50 s).
	RestartReplicaExpiry time.Duration
	// DirScanInterval and BlockScanBytesPerSecond drive the scanners (0
	// disables either).
	DirScanInterval         time.Duration
	BlockScanBytesPerSecond int64

	// OnBadBlock receives corrupt replicas found by the scanners or by a
	// read; the coordinator link will forward them (reportBadBlocks).
	OnBadBlock func(replica.BadBlock)

	// CoordEndpoints are coordinator gRPC addresses (host:port); any member
	// will do (followers forward NodeLink calls to the leader). Empty: no
	// coordinator link, the node runs standalone.
	CoordEndpoints []string
	// HeartbeatInterval is the period of NodeLink heartbeats.
	HeartbeatInterval time.Duration
	// Join lists gossip seeds (host:port), the coordinators' gossip
	// addresses: after its first registration the node joins their gossip
	// (gossip.go). Empty: no gossip, liveness by heartbeats alone.
	Join []string

	// FailpointRecoveryPause is test-only fault injection, in the spirit
	// of etcd's gofail failpoints: "DURATION[@PATH-PREFIX]" makes this node,
	// as a recovery primary, sleep DURATION once initReplicaRecovery has
	// succeeded on the locations and the plan is made, before
	// updateReplicaUnderRecovery and the commit — for blocks of files
	// under PATH-PREFIX only when one is given. It opens a window in which
	// the e2e suite kills the primary or the coordinator leader. Empty:
	// off. Never set it in production.
	FailpointRecoveryPause string

	Security Security
	Logger   *slog.Logger

	// diskUsage, when set (tests only), replaces the volumes' free-space
	// probe (a "full" volume).
	diskUsage func(path string) (replica.DiskUsage, error)
}

// DefaultConfig returns the LAN defaults.
func DefaultConfig() Config {
	rc := replica.DefaultConfig()
	return Config{
		BlockPool:               "BP-1",
		BlockSize:               rc.BlockSize,
		GRPCAddr:                "127.0.0.1:7400",
		HTTPAddr:                "127.0.0.1:7500",
		GossipAddr:              "127.0.0.1:7600",
		MaxTargets:              blockio.MaxTargets,
		SetupTimeout:            10 * time.Second,
		AckTimeout:              60 * time.Second,
		WriterStopTimeout:       rc.WriterStopTimeout,
		RestartReplicaExpiry:    50 * time.Second,
		DirScanInterval:         rc.DirScanInterval,
		BlockScanBytesPerSecond: rc.BlockScanBytesPerSecond,
		HeartbeatInterval:       3 * time.Second,
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks the configuration and reports every problem it finds.
func (c *Config) Validate() error {
	var errs []error
	if !idPattern.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id %q: want 1-64 of [A-Za-z0-9._-], starting alphanumeric", c.ID))
	}
	switch {
	case c.DataDir == "" && len(c.Volumes) == 0:
		errs = append(errs, errors.New("a data dir or at least one volume is required"))
	case c.DataDir != "" && len(c.Volumes) > 0:
		errs = append(errs, errors.New("data dir and volumes are alternatives: set one"))
	}
	seen := map[string]bool{}
	for _, v := range c.volumes() {
		if v.Path == "" || seen[v.Path] {
			errs = append(errs, fmt.Errorf("volume %q: want a unique, non-empty path", v.Path))
		}
		seen[v.Path] = true
		if v.StorageType > replica.StorageRAMDisk {
			errs = append(errs, fmt.Errorf("volume %q: bad storage type", v.Path))
		}
	}
	if n := len(c.volumes()); n > 0 && (c.VolumeFailuresTolerated < 0 || c.VolumeFailuresTolerated >= n) {
		errs = append(errs, fmt.Errorf("volume failures tolerated %d: want 0..%d with %d volumes", c.VolumeFailuresTolerated, n-1, n))
	}
	if c.ReservedBytes < 0 || c.MaxLockedMemory < 0 || c.BlockSize <= 0 {
		errs = append(errs, errors.New("reserved bytes and max locked memory must be >= 0, block size > 0"))
	}
	if err := replica.ValidatePoolID(c.BlockPool); err != nil {
		errs = append(errs, fmt.Errorf("block pool: %w", err))
	}
	for _, a := range []struct{ name, bind, adv string }{
		{"grpc", c.GRPCAddr, c.AdvertiseGRPC},
		{"http", c.HTTPAddr, c.AdvertiseHTTP},
	} {
		if err := checkAddr(a.bind, a.adv); err != nil {
			errs = append(errs, fmt.Errorf("%s address: %w", a.name, err))
		}
	}
	if _, _, err := net.SplitHostPort(c.GossipAddr); err != nil {
		errs = append(errs, fmt.Errorf("gossip address: %w", err))
	}
	if c.AdvertiseGossip != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseGossip); err != nil {
			errs = append(errs, fmt.Errorf("advertise gossip: %w", err))
		}
	}
	if c.MaxTargets < 0 || c.MaxTargets > blockio.MaxTargets {
		errs = append(errs, fmt.Errorf("max targets %d: want 0..%d", c.MaxTargets, blockio.MaxTargets))
	}
	if c.SetupTimeout <= 0 || c.AckTimeout <= 0 || c.WriterStopTimeout <= 0 {
		errs = append(errs, errors.New("setup, ack and writer stop timeouts must be > 0"))
	}
	if c.RestartReplicaExpiry <= 0 || c.RestartReplicaExpiry > time.Hour {
		errs = append(errs, fmt.Errorf("restart replica expiry %v: want > 0 and <= 1h", c.RestartReplicaExpiry))
	}
	if c.DirScanInterval < 0 || c.BlockScanBytesPerSecond < 0 {
		errs = append(errs, errors.New("scanner settings must be >= 0"))
	}
	for _, e := range c.CoordEndpoints {
		if err := checkHostPort(e); err != nil {
			errs = append(errs, fmt.Errorf("coordinator endpoint: %w", err))
		}
	}
	if len(c.CoordEndpoints) > 0 && (c.HeartbeatInterval <= 0 || c.HeartbeatInterval > 10*time.Minute) {
		errs = append(errs, fmt.Errorf("heartbeat interval %v: want > 0 and <= 10m", c.HeartbeatInterval))
	}
	for _, j := range c.Join {
		if err := checkHostPort(j); err != nil {
			errs = append(errs, fmt.Errorf("join: %w", err))
		}
	}
	if _, _, err := parseRecoveryPause(c.FailpointRecoveryPause); err != nil {
		errs = append(errs, err)
	}
	if k := len(c.Security.GossipKey); k != 0 && k != 16 && k != 24 && k != 32 {
		errs = append(errs, fmt.Errorf("gossip key of %d bytes: want 16, 24 or 32", k))
	}
	if f := c.Security.GossipKeyringFile; f != "" {
		if err := gossipkeys.CheckFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	if src := c.Security.TLS; src != nil {
		if id := src.Identity(); id != (pki.Identity{Role: pki.RoleNode, Name: c.ID}) {
			errs = append(errs, fmt.Errorf("the TLS certificate names %s; node %q needs one of role node named %q", id, c.ID, c.ID))
		}
	}
	return errors.Join(errs...)
}

// parseRecoveryPause parses FailpointRecoveryPause: "" (off, d = 0) or
// "DURATION[@PATH-PREFIX]" with DURATION > 0 and an absolute prefix.
func parseRecoveryPause(s string) (d time.Duration, prefix string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, "", nil
	}
	ds, prefix, hasPrefix := strings.Cut(s, "@")
	d, err = time.ParseDuration(ds)
	switch {
	case err != nil:
		return 0, "", fmt.Errorf("failpoint recovery pause %q: %w", s, err)
	case d <= 0 || d > time.Hour:
		return 0, "", fmt.Errorf("failpoint recovery pause %q: want a duration in (0, 1h]", s)
	case hasPrefix && !strings.HasPrefix(prefix, "/"):
		return 0, "", fmt.Errorf("failpoint recovery pause %q: want an absolute path prefix after @", s)
	}
	return d, prefix, nil
}

// volumes returns the configured volumes (DataDir as one DISK volume).
func (c *Config) volumes() []VolumeSpec {
	if c.DataDir != "" {
		return []VolumeSpec{{Path: c.DataDir}}
	}
	return c.Volumes
}

// replicaConfig is the dataset's configuration.
func (c *Config) replicaConfig(log *slog.Logger, onBad func(replica.BadBlock)) replica.Config {
	rc := replica.DefaultConfig()
	for _, v := range c.volumes() {
		rc.Volumes = append(rc.Volumes, replica.VolumeConfig{Path: v.Path, StorageType: v.StorageType, Reserved: c.ReservedBytes})
	}
	rc.VolumeFailuresTolerated = c.VolumeFailuresTolerated
	rc.MaxLockedMemory = c.MaxLockedMemory
	rc.BlockSize = c.BlockSize
	rc.WriterStopTimeout = c.WriterStopTimeout
	rc.DirScanInterval = c.DirScanInterval
	rc.BlockScanBytesPerSecond = c.BlockScanBytesPerSecond
	rc.DiskUsage = c.diskUsage
	rc.OnBadBlock = onBad
	rc.Logger = log.With("component", "replica")
	return rc
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

// checkHostPort accepts "host:port" with a non-empty host and a port.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q: %w", a, err)
	}
	if host == "" || port == "" {
		return fmt.Errorf("%q: want host:port", a)
	}
	return nil
}

func advertised(bind, adv string) string {
	if adv != "" {
		return adv
	}
	return bind
}
