// Package export reads, writes and inspects journal export files: the
// Logbook analogue of `cephfs-journal-tool journal export` (see
// docs/design.md §J7, the journal tool). An export is a self-describing,
// checksummed, offline copy of a contiguous range of journal events. The
// package is pure: it has no network, Raft or storage code; callers feed it
// an io.Writer or io.Reader.
//
// # File format, version 1
//
// All integers are unsigned big-endian unless stated otherwise. "CRC32C" is
// CRC-32 with the Castagnoli polynomial (0x1EDC6F41, reflected 0x82F63B78),
// initial value and final XOR 0xFFFFFFFF, exactly as computed by
// crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); its check value
// for the ASCII bytes "123456789" is 0xE3069283. A file is a header, zero
// or more records, and a trailer, with nothing after the trailer.
//
// Header, at offset 0:
//
//	offset  size  field
//	0       8     magic "LBKJEXP\n" (4C 42 4B 4A 45 58 50 0A)
//	8       2     format version (1)
//	10      4     N, header body length; N <= 65536 in every version
//	14      N     header body (below)
//	14+N    4     CRC32C of bytes [0, 14+N): magic, version, N and body
//
// Header body, version 1 (offsets relative to byte 14; C and S <= 256):
//
//	0       2     C, cluster id length
//	2       C     cluster id bytes
//	2+C     2     S, source member id length
//	4+C     S     source member id bytes
//	4+C+S   8     first_seq
//	12+C+S  8     last_seq (0 if the export is empty)
//	20+C+S  8     event_count
//	28+C+S  8     created_unix_nanos, int64 two's complement; 0 = unset
//
// In version 1, N must equal 36+C+S exactly. The header is a promise: when
// event_count is 0, last_seq is 0 and there are no records (first_seq is then
// free, conventionally the next seq the journal would assign); otherwise
// first_seq >= 1 and last_seq = first_seq + event_count - 1, and the records
// carry exactly the seqs first_seq..last_seq in order. The first 14 bytes and
// the trailing header CRC are the envelope every future version keeps, so a
// reader checks the CRC before it looks at the version: a flipped bit is
// damage, while an intact header with a version other than 1 is refused with
// ErrUnsupportedVersion.
//
// Records follow the header, the first at offset 18+N. A record at offset R:
//
//	R       4     L, body length; 32 <= L <= 67109408 (32+256+256+64 MiB)
//	R+4     L     body (below)
//	R+4+L   4     CRC32C of bytes [R, R+4+L): the length field and the body
//
// Record body (offsets relative to R+4; T and K <= 256, P <= 64 MiB):
//
//	0       8     seq
//	8       2     T, event type length
//	10      T     event type bytes
//	10+T    2     K, client id length
//	12+T    K     client id bytes
//	12+T+K  8     request seq (the client's dedupe sequence number)
//	20+T+K  8     raft index of the log entry that committed the event
//	28+T+K  4     P, payload length
//	32+T+K  P     payload bytes
//
// L must equal 32+T+K+P exactly; anything else is "bad length". The next
// record starts at R+8+L. The length value 0xFFFFFFFF is reserved: it marks
// the trailer, 20 bytes at offset Z:
//
//	Z       4     0xFFFFFFFF
//	Z+4     8     record count
//	Z+12    4     digest: CRC32C of the concatenation of every record's 4-byte
//	              CRC field, in file order (0 when there are no records)
//	Z+16    4     CRC32C of bytes [Z, Z+16)
//	Z+20          end of file; any further byte is damage
//
// Strings (cluster id, source, type, client id) are opaque bytes,
// conventionally UTF-8. Created round-trips at nanosecond precision and is
// decoded in UTC; the zero time.Time is stored as 0 and 0 decodes to the zero
// time.
//
// # Damage detection
//
// Every byte is covered by a CRC, the header is cross-checked against the
// records, and the trailer counts and digests the records, so a flipped bit,
// a missing, duplicated or reordered record, truncation anywhere (including
// exactly at a record boundary), and trailing garbage are all detected. A
// Reader stops at the first problem with a *DamageError. Inspect never stops:
// after damage it scans forward byte by byte for the next offset holding a
// record whose lengths are consistent, whose CRC matches and whose seq is
// plausible (or an intact trailer), like the sentinel scan of
// `cephfs-journal-tool journal inspect`, and reports every damaged range.
//
// Every length read from a file is bounded before it is used, and buffers
// grow only as bytes actually arrive, so a corrupt length costs at most the
// size of the file, never a large up-front allocation.
package export
