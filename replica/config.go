package replica

import (
	"log/slog"
	"time"
)

// VolumeConfig is one data directory.
type VolumeConfig struct {
	Path        string
	StorageType StorageType // StorageUnspecified means DISK
	// Reserved bytes are kept free for other users of the file system
	// (HDFS dfs.datanode.du.reserved).
	Reserved int64
}

// VolumeChoice is the policy that picks a volume for a new replica.
type VolumeChoice uint8

const (
	// RoundRobin takes the next volume (of the wanted type) with room.
	RoundRobin VolumeChoice = iota
	// MostAvailable takes the volume with the most available space.
	MostAvailable
)

// BadBlock is a replica found corrupt by a scanner, to be reported to the
// coordinator (HDFS reportBadBlocks).
type BadBlock struct {
	Pool      string
	Block     Block
	StorageID string
	Reason    string // "checksum-mismatch", "length-mismatch", "meta-missing", ...
}

// Config of a Dataset. Start from DefaultConfig.
type Config struct {
	Volumes []VolumeConfig
	// FS is the medium; nil means OSFS.
	FS FS
	// VolumeFailuresTolerated: the dataset keeps serving while at most this
	// many volumes have failed; beyond it every call returns KindUnavailable.
	VolumeFailuresTolerated int
	VolumeChoice            VolumeChoice
	// BlockSize is the space reserved for a new replica whose size is not
	// given (Block.NumBytes == 0). HDFS dfs.blocksize.
	BlockSize int64
	// BytesPerChecksum of new replicas (CRC32C).
	BytesPerChecksum int
	// WriterStopTimeout bounds the wait for an existing writer to stop
	// (HDFS dfs.datanode.xceiver.stop.timeout.millis).
	WriterStopTimeout time.Duration
	// DeleteDuplicateReplicas: the loser of a duplicate is deleted.
	DeleteDuplicateReplicas bool
	// DiskUsage overrides FS.DiskUsage (tests make a volume "full" with it).
	DiskUsage func(path string) (DiskUsage, error)
	// OnBadBlock receives corrupt replicas found by the scanners. It is
	// called without locks held and must not block for long.
	OnBadBlock func(BadBlock)
	// DirScanInterval is the directory scanner period; 0 disables it.
	DirScanInterval time.Duration
	// DirScanFilesPerSecond throttles the directory scanner; 0 is unlimited.
	DirScanFilesPerSecond int
	// BlockScanBytesPerSecond throttles the block scanner; 0 disables it.
	BlockScanBytesPerSecond int64
	// BlockScanPeriod: each FINALIZED replica is verified once per period.
	BlockScanPeriod time.Duration
	// MaxLockedMemory is the budget for cached (mlocked) replicas; 0
	// disables caching.
	MaxLockedMemory int64
	// ChangeQueueLimit bounds each subscription's undrained changes; past it
	// the subscription is marked overflowed (send a full report).
	ChangeQueueLimit int
	Logger           *slog.Logger
}

// DefaultConfig returns HDFS's defaults (design §R8).
func DefaultConfig() Config {
	return Config{
		BlockSize:               128 << 20,
		BytesPerChecksum:        DefaultBytesPerChecksum,
		WriterStopTimeout:       60 * time.Second,
		DeleteDuplicateReplicas: true,
		DirScanInterval:         6 * time.Hour,
		BlockScanBytesPerSecond: 1 << 20,
		BlockScanPeriod:         504 * time.Hour,
		ChangeQueueLimit:        1 << 20,
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return newErr(KindInvalidArgument, "bad-config", format, args...)
	}
	if len(c.Volumes) == 0 {
		return bad("no volumes")
	}
	seen := map[string]bool{}
	for _, v := range c.Volumes {
		if v.Path == "" {
			return bad("volume with empty path")
		}
		if seen[v.Path] {
			return bad("volume %s listed twice", v.Path)
		}
		seen[v.Path] = true
		if v.Reserved < 0 || v.StorageType > StorageRAMDisk {
			return bad("volume %s: bad reserved bytes or storage type", v.Path)
		}
	}
	if c.VolumeFailuresTolerated < 0 || c.VolumeFailuresTolerated >= len(c.Volumes) {
		return bad("volume failures tolerated %d must be in [0, %d)", c.VolumeFailuresTolerated, len(c.Volumes))
	}
	if c.BlockSize <= 0 {
		return bad("block size %d", c.BlockSize)
	}
	if c.BytesPerChecksum <= 0 || c.BytesPerChecksum > MaxBytesPerChecksum {
		return bad("bytes per checksum %d", c.BytesPerChecksum)
	}
	if c.WriterStopTimeout <= 0 {
		return bad("writer stop timeout %v", c.WriterStopTimeout)
	}
	if c.DirScanInterval < 0 || c.DirScanFilesPerSecond < 0 || c.BlockScanBytesPerSecond < 0 || c.MaxLockedMemory < 0 {
		return bad("negative scanner or cache setting")
	}
	if c.BlockScanBytesPerSecond > 0 && c.BlockScanPeriod <= 0 {
		return bad("block scan period %v", c.BlockScanPeriod)
	}
	if c.ChangeQueueLimit <= 0 {
		return bad("change queue limit %d", c.ChangeQueueLimit)
	}
	return nil
}
