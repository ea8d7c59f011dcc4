package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readAhead is how much of a block one sequential Read fetches.
const readAhead = 1 << 20

// FileReader reads one file as it was when opened (a file under
// construction up to the visible length of its last block). It is not safe
// for concurrent use, except ReadAt.
type FileReader struct {
	fs     *FS
	ctx    context.Context
	path   string
	blocks []readBlock
	size   int64
	pos    int64

	buf    []byte // bytes [bufOff, bufOff+len(buf)) of the file
	bufOff int64
}

// readBlock is one block and where it can be read.
type readBlock struct {
	id, gs uint64
	off    int64 // offset of the block in the file
	length int64
	nodes  []string // node ids, best first
	token  []byte   // block access token (nil without ACLs)
}

// Open opens path for reading. ctx bounds Read and Seek; ReadAt uses it too.
func (f *FS) Open(ctx context.Context, path string) (*FileReader, error) {
	info, err := f.statFile(ctx, path)
	if err != nil {
		return nil, err
	}
	r := &FileReader{fs: f, ctx: ctx, path: path}
	var off int64
	for i, b := range info.Blocks {
		rb := readBlock{id: b.ID, gs: b.GS, off: off, length: int64(b.Length), nodes: readOrder(b), token: b.Token}
		if i == len(info.Blocks)-1 && b.State != BlockComplete {
			n, err := f.visibleLength(ctx, rb)
			if err != nil {
				return nil, fmt.Errorf("logbook: open %s: the last block's visible length: %w", path, err)
			}
			rb.length = n
		}
		r.blocks = append(r.blocks, rb)
		off += rb.length
	}
	r.size = off
	return r, nil
}

// readOrder lists the nodes to read a block from: reported replicas at
// the block's GS (finalized first), then the other expected locations,
// replicas reported corrupt last.
func readOrder(b BlockInfo) []string {
	var fin, rbw, corrupt, out []string
	for _, r := range b.Reported {
		switch {
		case r.GS < b.GS:
		case r.Corrupt:
			corrupt = append(corrupt, r.Node)
		case r.State == ReplicaFinalized:
			fin = append(fin, r.Node)
		case r.State == ReplicaRBW:
			rbw = append(rbw, r.Node)
		}
	}
	seen := map[string]bool{}
	for _, n := range corrupt {
		seen[n] = true // only last
	}
	for _, list := range [][]string{fin, rbw, b.Expected} {
		for _, n := range list {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	for _, n := range corrupt {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// visibleLength asks the block's nodes, in order, for the visible length
// of their replica (the first that answers wins).
func (f *FS) visibleLength(ctx context.Context, b readBlock) (int64, error) {
	var lastErr error = fmt.Errorf("%w: block %d has no locations", ErrUnavailable, b.id)
	for _, id := range b.nodes {
		addr, err := f.nodeAddr(ctx, id)
		if err != nil {
			lastErr = err
			continue
		}
		cc, err := f.c.conn(addr)
		if err != nil {
			lastErr = err
			continue
		}
		resp, err := pb.NewDataNodeClient(cc).GetReplicaVisibleLength(ctx, &pb.GetReplicaVisibleLengthRequest{Pool: f.pool, BlockId: b.id, Gs: b.gs, BlockToken: b.token})
		if err != nil {
			lastErr = fromStatus(err)
			continue
		}
		return resp.GetVisibleLength(), nil
	}
	return 0, lastErr
}

// Size is the file's readable length.
func (r *FileReader) Size() int64 { return r.size }

// Read reads from the current position.
func (r *FileReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.pos < r.bufOff || r.pos >= r.bufOff+int64(len(r.buf)) {
		b := r.blockAt(r.pos)
		n := min(int64(readAhead), b.off+b.length-r.pos)
		data, err := r.readBlock(b, r.pos-b.off, n)
		if err != nil {
			return 0, err
		}
		r.buf, r.bufOff = data, r.pos
	}
	n := copy(p, r.buf[r.pos-r.bufOff:])
	r.pos += int64(n)
	return n, nil
}

// ReadAt reads len(p) bytes at off (io.ReaderAt).
func (r *FileReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrInvalidArgument)
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= r.size {
			return n, io.EOF
		}
		b := r.blockAt(at)
		want := min(int64(len(p)-n), b.off+b.length-at)
		data, err := r.readBlock(b, at-b.off, want)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], data)
	}
	return n, nil
}

// Seek sets the position for the next Read (io.Seeker).
func (r *FileReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, fmt.Errorf("%w: whence %d", ErrInvalidArgument, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("%w: seek to %d", ErrInvalidArgument, offset)
	}
	r.pos = offset
	return offset, nil
}

// Close releases the reader's buffer.
func (r *FileReader) Close() error {
	r.buf = nil
	return nil
}

// readBlock reads [from, from+n) of b; when every replica refused b's
// block access token as expired, it asks the coordinators for new tokens
// (Stat) once and tries again.
func (r *FileReader) readBlock(b readBlock, from, n int64) ([]byte, error) {
	data, err := r.fs.readBlock(r.ctx, b, from, n)
	if err == nil || !errors.Is(err, ErrBlockTokenExpired) {
		return data, err
	}
	info, serr := r.fs.statFile(r.ctx, r.path)
	if serr != nil {
		return nil, err
	}
	for _, nb := range info.Blocks {
		for i := range r.blocks {
			if r.blocks[i].id == nb.ID {
				r.blocks[i].token = nb.Token
				if nb.ID == b.id {
					b.token = nb.Token
				}
			}
		}
	}
	return r.fs.readBlock(r.ctx, b, from, n)
}

func (r *FileReader) blockAt(off int64) readBlock {
	for _, b := range r.blocks {
		if off < b.off+b.length {
			return b
		}
	}
	return r.blocks[len(r.blocks)-1]
}

// readBlock reads [from, from+n) of a block from its first node that
// serves it with valid checksums. Replicas that failed their checksums are
// reported to the leader once another replica served the range (when
// every replica fails, the fault is more likely this reader's).
func (f *FS) readBlock(ctx context.Context, b readBlock, from, n int64) ([]byte, error) {
	var lastErr error = fmt.Errorf("%w: block %d has no locations", ErrUnavailable, b.id)
	var bad []*pb.BadReplica
	for _, id := range b.nodes {
		addr, err := f.nodeAddr(ctx, id)
		if err != nil {
			lastErr = err
			continue
		}
		data, err := f.readAt(ctx, addr, b.id, b.gs, b.token, from, n)
		if err == nil {
			if len(bad) > 0 {
				f.reportBad(ctx, bad)
			}
			return data, nil
		}
		if errors.Is(err, errCorruptReplica) {
			bad = append(bad, &pb.BadReplica{BlockId: b.id, Gs: b.gs, NodeId: id, Reason: err.Error()})
		}
		lastErr = fmt.Errorf("node %s: %w", id, err)
	}
	return nil, fmt.Errorf("logbook: read block %d: %w", b.id, lastErr)
}

// errCorruptReplica marks a read that failed its checksums (here, or on
// the node: DataLoss).
var errCorruptReplica = errors.New("corrupt replica")

// reportBad tells the leader about corrupt replicas, best effort: a
// failure only costs the leader the hint (the node's scanner finds them
// too).
func (f *FS) reportBad(ctx context.Context, bad []*pb.BadReplica) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
		_, err := ns.ReportBadBlocks(ctx, &pb.ReportBadBlocksRequest{Reporter: f.clientName(), Replicas: bad})
		return err
	})
}

// readFrom reads [from, from+n) of a block from the first of locs that
// serves it.
func (f *FS) readFrom(ctx context.Context, locs []*pb.NodeLocation, id, gs uint64, token []byte, from, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	var lastErr error
	for _, l := range locs {
		data, err := f.readAt(ctx, l.GetGrpcAddr(), id, gs, token, from, n)
		if err == nil {
			return data, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// readAt streams [from, from+n) of one replica and verifies every chunk.
func (f *FS) readAt(ctx context.Context, addr string, id, gs uint64, token []byte, from, n int64) ([]byte, error) {
	cc, err := f.c.conn(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewDataNodeClient(cc).ReadBlock(ctx, &pb.ReadBlockRequest{Pool: f.pool, BlockId: id, Gs: gs, Offset: from, Length: n, BlockToken: token})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]byte, 0, n)
	end := from + n
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if status.Code(err) == codes.DataLoss {
				return nil, fmt.Errorf("%w: %w", errCorruptReplica, fromStatus(err))
			}
			return nil, fromStatus(err)
		}
		if chunk.GetBytesPerChecksum() != blockio.ChunkSize {
			return nil, fmt.Errorf("logbook: replica with %d bytes per checksum, want %d", chunk.GetBytesPerChecksum(), blockio.ChunkSize)
		}
		if bad := blockio.Verify(chunk.GetData(), chunk.GetChecksums()); bad >= 0 {
			return nil, fmt.Errorf("logbook: %w: checksum mismatch in chunk %d at offset %d", errCorruptReplica, bad, chunk.GetOffset())
		}
		lo, hi := max(from, chunk.GetOffset()), min(end, chunk.GetOffset()+int64(len(chunk.GetData())))
		if lo < hi {
			out = append(out, chunk.GetData()[lo-chunk.GetOffset():hi-chunk.GetOffset()]...)
		}
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("logbook: replica served %d of %d bytes", len(out), n)
	}
	return out, nil
}
