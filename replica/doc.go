// Package replica is the storage node's dataset: volumes, block pools, the
// replica map and every operation that moves a replica between the states
// TEMPORARY, RBW, RWR, RUR and FINALIZED — HDFS FsDatasetImpl semantics
// (docs/design.md §R1, §R2), re-implemented. It never imports gRPC: every
// error is an *Error with an ErrorKind (errors.go) that a server maps to one
// status code. "design §…" in this package cites docs/design.md.
//
// # API shape
//
// Store is the interface the data service uses; *Dataset implements it over
// an FS: OSFS (Open) or MemFS (NewMemStore, the in-memory fake). A Writer is
// the one writer of an in-pipeline replica; a newer operation stops it
// (Stopped() closes, later calls fail KindAborted) and waits up to
// Config.WriterStopTimeout for a call in progress (KindDeadlineExceeded).
// BlockReader/MetaReader read up to the visible length. Subscription carries
// incremental changes (RECEIVING, RECEIVED, DELETED); BlockReport is the full
// report. Reconcile/CheckAndUpdate is the directory scanner, VerifyReplica
// and StartBlockScanner the block scanner; Cache/Uncache lock replicas in
// memory.
//
// # On-disk layout
//
// Per volume (a configured directory <vol>):
//
//	<vol>/current/.storage-id                                 "DS-<32 hex>\n", the storage id
//	<vol>/current/<bpid>/current/finalized/subdirA/subdirB/blk_<id>            FINALIZED data
//	<vol>/current/<bpid>/current/finalized/subdirA/subdirB/blk_<id>_<gs>.meta  its checksums
//	<vol>/current/<bpid>/current/rbw/blk_<id>, blk_<id>_<gs>.meta              RBW and RWR
//	<vol>/current/<bpid>/current/rbw/blk_<id>.restart                          restart marker (expiry, Unix ms)
//	<vol>/current/<bpid>/tmp/blk_<id>, blk_<id>_<gs>.meta                      TEMPORARY
//	<vol>/current/<bpid>/tmp/deleting-<n>-blk_<id>[...]                         awaiting deletion
//	<vol>/current/<bpid>/trash/{finalized/subdirA/subdirB,rbw}/...              deleted in an upgrade window
//
// A = (id >> 16) & 31 and B = (id >> 8) & 31 (HDFS's 32×32 layout). An RUR
// stays where its original is. <id> and <gs> are canonical decimal uint64s
// (no sign, no leading zero), so a file name can never hold a path
// character. A block pool id (<bpid>) is 1-128 bytes of [A-Za-z0-9._-]
// starting with a letter or digit (ValidatePoolID); anything else is
// KindInvalidArgument before any path is built. Block id 0 and GS 0 are
// reserved (GS 0 marks a finalized data file found without a meta file).
//
// The generation stamp lives only in the meta file name: changing a
// replica's GS is renaming its meta file.
//
// # Meta file, version 1
//
//	magic             4 bytes  "LBKM"
//	version           uint16   big endian, 1
//	checksum type     uint8    1 = CRC32 (IEEE), 2 = CRC32C (Castagnoli; written by this package)
//	bytes per chunk   uint32   big endian, 1..1 MiB (512 by default)
//	checksums         uint32   big endian, one per chunk of data, the last chunk may be short
//
// so the meta file of L data bytes is 11 + 4·ceil(L/bpc) bytes. The
// checksum of a partial last chunk is overwritten in place as the chunk
// grows. A header that does not parse is KindCorrupt (FuzzReadMeta).
//
// # Durability and crash-safe ordering
//
// Nothing is acknowledged before it is fsynced: a state operation returns
// nil only after the files it changed and the directories whose names it
// changed are fsynced. Packet data is durable after Writer.Sync or
// Writer.Finalize. The steps, with their failpoint names:
//
//   - create (createRbw, createTemporary): write the meta header and fsync,
//     create the data file and fsync, fsync the directory. A crash before
//     the data file exists leaves an orphan meta that Load deletes.
//   - finalize (RBW/RWR/TEMPORARY → FINALIZED): fsync data, fsync meta
//     ("finalize/after-sync"); rename meta into finalized/A/B
//     ("finalize/after-meta-rename"); rename data ("finalize/after-data-rename");
//     fsync both directories ("finalize/after-dir-sync").
//   - move (finalize, append, convert, recovery): the meta file moves first
//     and its directory is the commit point. If a crash separates them, Load
//     moves the lone data file next to its lone meta file (rolls forward).
//     A failed data rename renames the meta back.
//   - append (FINALIZED → RBW at newGS): the meta is renamed from finalized/
//     to rbw/blk_<id>_<newGS>.meta in one rename ("append/after-meta-rename"),
//     then the data ("append/after-data-rename"), then both directories are
//     fsynced ("append/after-dir-sync").
//   - GS bump in place (recoverRbw, recoverAppend, recoverClose, recovery
//     of a FINALIZED original): rename the meta, fsync the directory
//     ("<op>/after-gs-rename").
//   - truncate (recoverRbw, updateReplicaUnderRecovery): write the new meta
//     (last partial chunk's checksum recomputed from the data) to
//     <meta>.trunc and fsync it ("<op>/truncate/after-temp-meta"); truncate
//     the data file and fsync it ("<op>/truncate/after-data-truncate");
//     rename <meta>.trunc over <meta> and fsync the directory
//     ("<op>/truncate/after-meta-rename"). Load
//     rolls a leftover .trunc forward if the data verifies against it (the
//     crash was after the data truncate), else deletes it.
//   - updateReplicaUnderRecovery: truncate at the old GS (above, op
//     "update-recovery"), then for an original in rbw/ move it into
//     finalized/ naming the meta for the recovery id (the commit point),
//     for a FINALIZED original rename the meta for the recovery id. (HDFS
//     bumps the GS first; truncating first means a crash never leaves the
//     recovery's GS on a replica of the wrong length in rbw/.)
//   - delete (invalidate, replaced replica): under the lock the data file,
//     then the meta file, are renamed into tmp/ (or into trash/); the
//     asynchronous deleter unlinks them and then publishes DELETED. tmp/ is
//     wiped at restart, so a crash never resurrects half a replica.
//   - packet writes: data, then checksums ("write/before-data",
//     "write/after-data"); a torn tail is dropped at restart.
//
// # Load (restart, design §R1.4)
//
// Open loads every block pool directory found; AddBlockPool loads one. Per
// volume, in parallel: tmp/ is removed (TEMPORARY replicas vanish, never
// reported); leftover .trunc files are rolled forward or removed; of several
// meta files in one directory the highest GS is kept; split moves are
// completed; meta files without data are deleted; finalized/ files load as
// FINALIZED (length = file length; GS 0 without meta); rbw/ files load as
// RWR (RBW under an unexpired restart marker, below) with the length of the longest prefix whose chunks verify (the last
// stored checksum may cover a shorter prefix of its chunk), and the data
// then the meta file are truncated to it. Replicas of one id found twice are
// resolved as HDFS resolveDuplicateReplicas (§R2.15): higher GS, then longer,
// then persistent storage, else the first found; the loser's files are
// deleted unless Config.DeleteDuplicateReplicas is false. No replica cache
// file is written or read.
//
// The restart marker (HDFS's restart meta, design §R1.4 step 5): before a
// node shuts down for a quick restart, WriteRestartMarker fsyncs an RBW
// replica's data and meta and writes rbw/blk_<id>.restart (the expiry as a
// decimal Unix time in milliseconds, fsynced, directory synced). At load,
// while that expiry is in the future, the rbw/ replica comes back RBW
// instead of RWR — no writer, bytes acked = bytes on disk = the validated
// length, the rest of its block reserved — so that its writer can resume
// it with RecoverRbw. Every marker is read once and deleted at load,
// whatever it says; an unreadable, oversize (> 64 bytes) or expired one,
// or one outside rbw/, counts for nothing.
//
// # Deviations from HDFS, on purpose
//
//   - Append requires newGS > the block's GS (HDFS-17850 direction).
//   - GS mismatches and ranges are KindStaleGS where HDFS throws
//     ReplicaNotFound; length mismatches are KindOutOfRange where HDFS
//     throws a plain IOException. State errors follow the transition table.
//   - updateReplicaUnderRecovery runs every check before changing anything;
//     copy-on-truncate is not supported (KindInvalidArgument).
//   - No hard-link breaking (no upgrade snapshots), no lazy-persist/RAM_DISK
//     write-behind; RAM_DISK is only a storage type for volume choice.
package replica
