package replica

import "sync/atomic"

// Stats are the dataset's counters since Open (for the server's metrics).
type Stats struct {
	BlocksCreated   int64
	BlocksFinalized int64
	BlocksDeleted   int64
	BytesWritten    int64
	BytesRead       int64
	ChecksumErrors  int64 // bad checksums seen on write or read
	VolumeFailures  int64

	// Directory scanner.
	DirScans           int64
	DirScanFiles       int64
	DirScanMissingMem  int64 // on disk, added to memory
	DirScanMissingDisk int64 // in memory, file gone: removed
	DirScanGSFixed     int64
	DirScanLenFixed    int64 // length mismatches (reported bad)
	DirScanDuplicates  int64
	DirScanOrphanMeta  int64

	// Block scanner.
	BlocksVerified int64
	BytesVerified  int64
	CorruptBlocks  int64

	// Cache.
	BlocksCached  int64
	BytesCached   int64
	CacheFailures int64
}

type counters struct {
	blocksCreated, blocksFinalized, blocksDeleted       atomic.Int64
	bytesWritten, bytesRead, checksumErrors             atomic.Int64
	volumeFailures                                      atomic.Int64
	dirScans, dirScanFiles, dirScanMissingMem           atomic.Int64
	dirScanMissingDisk, dirScanGSFixed, dirScanLenFixed atomic.Int64
	dirScanDuplicates, dirScanOrphanMeta                atomic.Int64
	blocksVerified, bytesVerified, corruptBlocks        atomic.Int64
	cacheFailures                                       atomic.Int64
}

// Stats returns a snapshot of the counters.
func (d *Dataset) Stats() Stats {
	c := &d.stats
	s := Stats{
		BlocksCreated: c.blocksCreated.Load(), BlocksFinalized: c.blocksFinalized.Load(),
		BlocksDeleted: c.blocksDeleted.Load(), BytesWritten: c.bytesWritten.Load(),
		BytesRead: c.bytesRead.Load(), ChecksumErrors: c.checksumErrors.Load(),
		VolumeFailures: c.volumeFailures.Load(),
		DirScans:       c.dirScans.Load(), DirScanFiles: c.dirScanFiles.Load(),
		DirScanMissingMem: c.dirScanMissingMem.Load(), DirScanMissingDisk: c.dirScanMissingDisk.Load(),
		DirScanGSFixed: c.dirScanGSFixed.Load(), DirScanLenFixed: c.dirScanLenFixed.Load(),
		DirScanDuplicates: c.dirScanDuplicates.Load(), DirScanOrphanMeta: c.dirScanOrphanMeta.Load(),
		BlocksVerified: c.blocksVerified.Load(), BytesVerified: c.bytesVerified.Load(),
		CorruptBlocks: c.corruptBlocks.Load(), CacheFailures: c.cacheFailures.Load(),
	}
	s.BlocksCached, s.BytesCached = d.cache.usage()
	return s
}
