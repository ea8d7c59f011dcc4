package replica

import (
	"encoding/binary"
	"hash/crc32"
	"io"
)

// Meta file header (see doc.go).
const (
	metaMagic = "LBKM"
	// MetaVersion is the only meta format version this build writes and reads.
	MetaVersion uint16 = 1
	// MetaHeaderSize is the length of the meta file header.
	MetaHeaderSize = 11
	// ChecksumSize is the length of one stored checksum.
	ChecksumSize = 4
	// MaxBytesPerChecksum bounds the chunk size a meta header may declare.
	MaxBytesPerChecksum = 1 << 20
	// DefaultBytesPerChecksum is HDFS's dfs.bytes-per-checksum.
	DefaultBytesPerChecksum = 512
)

// ChecksumType names the checksum algorithm of a meta file.
type ChecksumType uint8

const (
	ChecksumNull   ChecksumType = 0 // no checksums (not written by this package)
	ChecksumCRC32  ChecksumType = 1 // IEEE
	ChecksumCRC32C ChecksumType = 2 // Castagnoli, the default
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	ieee       = crc32.IEEETable
)

// MetaHeader is the decoded meta file header.
type MetaHeader struct {
	Version          uint16
	Type             ChecksumType
	BytesPerChecksum uint32
}

// DefaultMetaHeader is what new replicas get: CRC32C over 512-byte chunks.
func DefaultMetaHeader(bpc int) MetaHeader {
	return MetaHeader{Version: MetaVersion, Type: ChecksumCRC32C, BytesPerChecksum: uint32(bpc)}
}

// Encode returns the MetaHeaderSize bytes of the header.
func (h MetaHeader) Encode() []byte {
	b := make([]byte, MetaHeaderSize)
	copy(b, metaMagic)
	binary.BigEndian.PutUint16(b[4:], h.Version)
	b[6] = byte(h.Type)
	binary.BigEndian.PutUint32(b[7:], h.BytesPerChecksum)
	return b
}

// ParseMetaHeader decodes and validates a header. Errors are KindCorrupt.
func ParseMetaHeader(b []byte) (MetaHeader, error) {
	if len(b) < MetaHeaderSize {
		return MetaHeader{}, newErr(KindCorrupt, "meta-short", "meta header is %d bytes, want %d", len(b), MetaHeaderSize)
	}
	if string(b[:4]) != metaMagic {
		return MetaHeader{}, newErr(KindCorrupt, "meta-magic", "bad meta magic %q", b[:4])
	}
	h := MetaHeader{
		Version:          binary.BigEndian.Uint16(b[4:]),
		Type:             ChecksumType(b[6]),
		BytesPerChecksum: binary.BigEndian.Uint32(b[7:]),
	}
	if h.Version != MetaVersion {
		return MetaHeader{}, newErr(KindCorrupt, "meta-version", "meta version %d, this build reads %d", h.Version, MetaVersion)
	}
	switch h.Type {
	case ChecksumCRC32, ChecksumCRC32C:
	default:
		return MetaHeader{}, newErr(KindCorrupt, "meta-checksum-type", "unsupported checksum type %d", h.Type)
	}
	if h.BytesPerChecksum == 0 || h.BytesPerChecksum > MaxBytesPerChecksum {
		return MetaHeader{}, newErr(KindCorrupt, "meta-bpc", "bytes per checksum %d out of range", h.BytesPerChecksum)
	}
	return h, nil
}

// ReadMetaHeader reads and validates a header from r.
func ReadMetaHeader(r io.Reader) (MetaHeader, error) {
	var b [MetaHeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return MetaHeader{}, newErr(KindCorrupt, "meta-short", "meta file shorter than its header")
		}
		return MetaHeader{}, ioErr(err)
	}
	return ParseMetaHeader(b[:])
}

// Chunks returns the number of checksum chunks covering n data bytes.
func (h MetaHeader) Chunks(n int64) int64 {
	bpc := int64(h.BytesPerChecksum)
	return (n + bpc - 1) / bpc
}

// MetaFileSize is the meta file length for n data bytes.
func (h MetaHeader) MetaFileSize(n int64) int64 {
	return MetaHeaderSize + h.Chunks(n)*ChecksumSize
}

// Sum computes the checksum of one chunk.
func (h MetaHeader) Sum(chunk []byte) uint32 {
	if h.Type == ChecksumCRC32 {
		return crc32.Checksum(chunk, ieee)
	}
	return crc32.Checksum(chunk, castagnoli)
}

// longestMatchingPrefix returns the largest n ≤ len(chunk) with
// Sum(chunk[:n]) == sum, or 0.
func (h MetaHeader) longestMatchingPrefix(chunk []byte, sum uint32) int64 {
	tab := castagnoli
	if h.Type == ChecksumCRC32 {
		tab = ieee
	}
	var crc uint32
	var best int64
	for i := range chunk {
		crc = crc32.Update(crc, tab, chunk[i:i+1])
		if crc == sum {
			best = int64(i + 1)
		}
	}
	return best
}

// SumChunks returns one checksum per BytesPerChecksum chunk of data.
func (h MetaHeader) SumChunks(data []byte) []uint32 {
	bpc := int(h.BytesPerChecksum)
	sums := make([]uint32, 0, (len(data)+bpc-1)/bpc)
	for i := 0; i < len(data); i += bpc {
		sums = append(sums, h.Sum(data[i:min(i+bpc, len(data))]))
	}
	return sums
}

// Verify checks data against sums (chunks aligned to data[0]). It returns the
// index of the first bad chunk, or -1.
func (h MetaHeader) Verify(data []byte, sums []uint32) int {
	bpc := int(h.BytesPerChecksum)
	for i, k := 0, 0; i < len(data); i, k = i+bpc, k+1 {
		if k >= len(sums) || h.Sum(data[i:min(i+bpc, len(data))]) != sums[k] {
			return k
		}
	}
	return -1
}

// ChecksumsPerChunk is a helper for clients: CRC32C over bpc-byte chunks.
func ChecksumsPerChunk(data []byte, bpc int) []uint32 {
	return DefaultMetaHeader(bpc).SumChunks(data)
}

// ReadChecksums reads n checksums from r (positioned after the header).
// A short file is KindCorrupt.
func ReadChecksums(r io.Reader, n int) ([]uint32, error) {
	if n < 0 {
		return nil, newErr(KindInvalidArgument, "bad-count", "negative checksum count %d", n)
	}
	sums := make([]uint32, 0, min(n, 1<<16))
	var buf [4096]byte
	for len(sums) < n {
		want := min((n-len(sums))*ChecksumSize, len(buf))
		if _, err := io.ReadFull(r, buf[:want]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return sums, newErr(KindCorrupt, "meta-short", "meta file has %d of %d checksums", len(sums), n)
			}
			return sums, ioErr(err)
		}
		for i := 0; i < want; i += ChecksumSize {
			sums = append(sums, binary.BigEndian.Uint32(buf[i:]))
		}
	}
	return sums, nil
}

func encodeSums(sums []uint32) []byte {
	b := make([]byte, len(sums)*ChecksumSize)
	for i, s := range sums {
		binary.BigEndian.PutUint32(b[i*ChecksumSize:], s)
	}
	return b
}

// ParseMeta decodes a whole meta file: header and every checksum. A trailing
// partial checksum is KindCorrupt.
func ParseMeta(b []byte) (MetaHeader, []uint32, error) {
	h, err := ParseMetaHeader(b)
	if err != nil {
		return h, nil, err
	}
	rest := b[MetaHeaderSize:]
	if len(rest)%ChecksumSize != 0 {
		return h, nil, newErr(KindCorrupt, "meta-torn", "meta file ends inside a checksum")
	}
	sums := make([]uint32, len(rest)/ChecksumSize)
	for i := range sums {
		sums[i] = binary.BigEndian.Uint32(rest[i*ChecksumSize:])
	}
	return h, sums, nil
}
