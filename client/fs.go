package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"google.golang.org/grpc"
)

// DefaultBlockPool is the block pool storage nodes serve by default
// (nodeserver.DefaultConfig).
const DefaultBlockPool = "BP-1"

// FS is the file-system API: files of blocks written through storage-node
// pipelines, with the namespace kept by the coordinators. Keep one FS per
// client: it caches the addresses of the storage nodes it has seen.
//
// The client name holding write leases is the SDK's client id; every write
// call carries the client's session, so a retry through a leader change is
// applied once.
type FS struct {
	c    *Client
	pool string
	// renewEvery is the lease renewal period of open writers until a
	// renewal has told the leader's limits (then renewPeriod).
	renewEvery  time.Duration
	renewPeriod atomic.Int64 // nanoseconds; 0: not known yet

	mu    sync.Mutex
	nodes map[string]string // node id -> gRPC address
}

// FS returns the file-system API on the default block pool.
func (c *Client) FS() *FS {
	return &FS{c: c, pool: DefaultBlockPool, renewEvery: 20 * time.Second, nodes: map[string]string{}}
}

// WithPool returns a copy of f writing to and reading from pool.
func (f *FS) WithPool(pool string) *FS {
	g := f.c.FS()
	g.pool = pool
	return g
}

// Defaults of CreateOptions.
const (
	DefaultReplication = 3
	DefaultBlockSize   = 128 << 20
)

// CreateOptions tune Create. Zero values take DefaultReplication and
// DefaultBlockSize.
type CreateOptions struct {
	Replication uint32
	// BlockSize: a multiple of 512 bytes.
	BlockSize uint64
	// Overwrite replaces a closed file.
	Overwrite bool
}

// FileInfo is a file (or, from List, a directory).
type FileInfo struct {
	Path              string
	Dir               bool
	Replication       uint32
	BlockSize         uint64
	UnderConstruction bool
	LeaseHolder       string
	// Length is the sum of the blocks' lengths the coordinator knows (a
	// block being written counts what its pipeline last reported).
	Length     uint64
	BlockCount uint32
	Created    time.Time
	Modified   time.Time
	// Blocks is set by Stat only.
	Blocks []BlockInfo
	// Entries is a directory's number of direct entries (set by Stat).
	Entries uint64
}

// BlockInfo is one block of a file as Stat returns it.
type BlockInfo struct {
	ID     uint64
	GS     uint64
	Length uint64
	State  BlockState
	// Expected are the node ids of the pipeline (or recovered replicas).
	Expected []string
	// Reported are the replicas the leader saw in the nodes' reports.
	Reported []ReplicaLocation
	// Recovery is set while the block is UNDER_RECOVERY.
	Recovery *BlockRecovery
	// Token is the block access token the storage nodes take to serve
	// the block (a cluster with ACLs; nil without). It expires: Stat
	// again for a new one.
	Token []byte
}

// BlockRecovery is the current attempt of a block recovery.
type BlockRecovery struct {
	// ID is the attempt's recovery id (the GS the block gets on commit).
	ID uint64
	// Primary is the node running it; Attempt counts from 1.
	Primary  string
	Attempt  uint32
	Deadline time.Time
	Reason   string
}

// ReplicaLocation is a replica of a block reported by a storage node.
type ReplicaLocation struct {
	Node   string
	State  ReplicaState
	GS     uint64
	Length int64
	// Corrupt: reported corrupt (a reader's or the node's checksum
	// failure); read last, and soon replaced by a good copy.
	Corrupt bool
	// Cached: the node's cache report lists the replica in locked memory
	// (see AddCacheDirective).
	Cached bool
}

func toFileInfo(fs *pb.FileStatus) FileInfo {
	return FileInfo{
		Path: fs.GetPath(), Replication: fs.GetReplication(), BlockSize: fs.GetBlockSize(),
		UnderConstruction: fs.GetUnderConstruction(), LeaseHolder: fs.GetLeaseHolder(),
		Length: fs.GetLength(), BlockCount: fs.GetBlockCount(),
		Created: time.Unix(0, fs.GetCtimeUnixNanos()), Modified: time.Unix(0, fs.GetMtimeUnixNanos()),
	}
}

// namespace runs one read of the Namespace service on the leader.
func (f *FS) namespace(ctx context.Context, fn func(ctx context.Context, ns pb.NamespaceClient) error) error {
	return f.c.do(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		return fn(ctx, pb.NewNamespaceClient(cc))
	})
}

// write runs one write of the Namespace service under a fresh session seq;
// the retries of do reuse it, so the write applies once.
func (f *FS) write(ctx context.Context, fn func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error)) (*pb.FileOpResponse, error) {
	resp, err := inSession(ctx, f, fn)
	if err != nil {
		return nil, err
	}
	f.learn(resp.GetLocations())
	return resp, nil
}

// inSession runs one Namespace call under a fresh session seq; the
// retries of do reuse it, so the call applies once.
func inSession[T any](ctx context.Context, f *FS, fn func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (T, error)) (T, error) {
	var resp T
	err := f.c.session.run(ctx, func(t ticket) (bool, int, error) {
		sess := &pb.FsSession{ClientId: t.id, RequestSeq: t.seq, AckedSeq: t.acked, SessionEstablished: t.established}
		attempts := 0
		err := f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
			attempts++
			var err error
			resp, err = fn(ctx, ns, sess)
			return err
		})
		// An op that wrote its audit event is one the session holds.
		r, ok := any(resp).(interface{ GetSeq() uint64 })
		return err == nil && ok && r.GetSeq() > 0, attempts, err
	})
	return resp, err
}

// clientName is the lease holder name of this client's writers.
func (f *FS) clientName() string { return f.c.ClientID() }

// Stat returns the file at path with its blocks and their reported
// replicas, or the directory at path (Dir and Entries set; the root is
// always one).
func (f *FS) Stat(ctx context.Context, path string) (FileInfo, error) {
	var resp *pb.StatResponse
	err := f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
		var err error
		resp, err = ns.Stat(ctx, &pb.StatRequest{Path: path})
		return err
	})
	if err != nil {
		return FileInfo{}, err
	}
	if resp.GetDir() {
		return FileInfo{Path: path, Dir: true, Entries: resp.GetDirEntries()}, nil
	}
	info := toFileInfo(resp.GetFile())
	for _, b := range resp.GetBlocks() {
		f.learn(b.GetLocations())
		bi := BlockInfo{ID: b.GetId(), GS: b.GetGs(), Length: b.GetNumBytes(), State: toBlockState(b.GetState()), Expected: append([]string(nil), b.GetExpectedLocations()...), Token: b.GetBlockToken()}
		for _, r := range b.GetReportedLocations() {
			bi.Reported = append(bi.Reported, ReplicaLocation{Node: r.GetNodeId(), State: toReplicaState(r.GetState()), GS: r.GetGs(), Length: r.GetNumBytes(), Corrupt: r.GetCorrupt(), Cached: r.GetCached()})
		}
		if r := b.GetRecovery(); r != nil {
			bi.Recovery = &BlockRecovery{ID: r.GetRecoveryId(), Primary: r.GetPrimary(), Attempt: r.GetAttempt(),
				Deadline: time.Unix(0, r.GetDeadlineUnixNanos()), Reason: r.GetReason()}
		}
		info.Blocks = append(info.Blocks, bi)
	}
	return info, nil
}

// statFile is Stat of a file: a directory is ErrIsDirectory.
func (f *FS) statFile(ctx context.Context, path string) (FileInfo, error) {
	info, err := f.Stat(ctx, path)
	if err == nil && info.Dir {
		return FileInfo{}, fmt.Errorf("%s: %w", path, ErrIsDirectory)
	}
	return info, err
}

// List returns the entries directly under dir, in name order (every page).
func (f *FS) List(ctx context.Context, dir string) ([]FileInfo, error) {
	var out []FileInfo
	after := ""
	for {
		var resp *pb.ListResponse
		err := f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
			var err error
			resp, err = ns.List(ctx, &pb.ListRequest{Dir: dir, After: after})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetEntries() {
			info := FileInfo{Path: e.GetPath(), Dir: e.GetDir()}
			if e.GetFile() != nil {
				info = toFileInfo(e.GetFile())
				info.Path, info.Dir = e.GetPath(), e.GetDir()
			}
			out = append(out, info)
		}
		if !resp.GetMore() || len(resp.GetEntries()) == 0 {
			return out, nil
		}
		after = baseName(resp.GetEntries()[len(resp.GetEntries())-1].GetPath())
	}
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// Delete removes a file, or with recursive a directory and everything
// under it. It returns the number of files removed.
func (f *FS) Delete(ctx context.Context, path string, recursive bool) (uint64, error) {
	resp, err := f.write(ctx, func(ctx context.Context, ns pb.NamespaceClient, sess *pb.FsSession) (*pb.FileOpResponse, error) {
		return ns.Delete(ctx, &pb.DeleteRequest{Session: sess, Path: path, Recursive: recursive})
	})
	if err != nil {
		return 0, err
	}
	return resp.GetResult().GetRemovedFiles(), nil
}

// RecoverLease takes the lease of an open file over and starts its
// recovery: closed is true once the file is closed, false while a block
// recovery runs (call again later).
func (f *FS) RecoverLease(ctx context.Context, path string) (closed bool, err error) {
	err = f.c.session.run(ctx, func(t ticket) (bool, int, error) {
		req := &pb.RecoverLeaseRequest{Session: &pb.FsSession{ClientId: t.id, RequestSeq: t.seq, AckedSeq: t.acked, SessionEstablished: t.established}, Path: path, ClientName: f.clientName()}
		attempts := 0
		err := f.namespace(ctx, func(ctx context.Context, ns pb.NamespaceClient) error {
			attempts++
			resp, err := ns.RecoverLease(ctx, req)
			closed = resp.GetClosed()
			return err
		})
		return false, attempts, err
	})
	return closed, err
}

// learn caches the addresses of nodes named by a write answer.
func (f *FS) learn(locs []*pb.NodeLocation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range locs {
		if l.GetGrpcAddr() != "" {
			f.nodes[l.GetNodeId()] = l.GetGrpcAddr()
		}
	}
}

// nodeAddr resolves a node id to its gRPC address, as the coordinator
// named it (Stat and the write answers carry every node's address).
func (f *FS) nodeAddr(ctx context.Context, id string) (string, error) {
	f.mu.Lock()
	addr, ok := f.nodes[id]
	f.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%w: storage node %s has no known address", ErrNotFound, id)
	}
	return addr, nil
}
