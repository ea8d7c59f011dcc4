package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logbookhq/logbook/internal/logging"
	"github.com/logbookhq/logbook/internal/raftnet"
)

// Timing holds the Raft timeouts and log retention knobs.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	MaxAppendEntries   int
	// ParallelLeaderWrite makes the leader write new entries to its own
	// log store while it replicates them (the Raft dissertation, §10.2.1;
	// Logbook's change to hashicorp/raft, third_party/hashicorp/raft). It
	// still commits only what it has written itself.
	ParallelLeaderWrite bool
}

// Config says how to open a Node.
type Config struct {
	ID        string // this member's Raft server id
	ClusterID string // checked by the transport's handshake
	// Dir is the Raft directory (<data-dir>/raft): the log store, the
	// stable store and the snapshots.
	Dir string
	// BindAddr is where the transport listens; Advertise, when set, is
	// the address peers dial.
	BindAddr, Advertise string
	TLS                 *raftnet.TLS     // the transport's security; nil: plaintext
	Dial                raftnet.DialFunc // replaces the transport's dialer (tests: fault injection)
	// LogStore is the backend: LogStoreAuto (or empty), LogStoreWAL or
	// LogStoreBoltDB (chooseLogStore).
	LogStore string
	// WALPrefill writes every raft-wal segment full of zeros ahead of use
	// (walzero.go).
	WALPrefill bool
	// WALSegmentBytes, when set, replaces raft-wal's 64 MiB segments.
	WALSegmentBytes int
	Timing          Timing
	Logger          *slog.Logger
	// WrapLogs, when set, wraps the log store Raft writes through, under
	// the in-memory cache of recent entries (metrics).
	WrapLogs func(raft.LogStore) raft.LogStore
}

// Node is one member's Raft: its log and stable store, its snapshots, its
// transport and the hashicorp/raft instance over them.
type Node struct {
	cfg   Config
	log   *slog.Logger
	kind  string
	raft  *raft.Raft
	store LogStore
	snaps *raft.FileSnapshotStore
	trans *raft.NetworkTransport
	reads *readIndex

	restarted bool   // the store held Raft state at open
	lastIndex uint64 // the store's last index at open
}

// logCacheEntries is how many of the newest Raft entries are kept in
// memory (each holds one batch of appends).
const logCacheEntries = 512

// Open opens (creating when new) the log store, the snapshots and the
// transport under cfg.Dir and starts Raft over fsm. A store that holds
// state restarts from it; a new one waits for Bootstrap or for a leader
// to add it.
func Open(cfg Config, fsm raft.FSM) (_ *Node, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			n.Shutdown()
			n.CloseStore()
		}
	}()
	kind, err := chooseLogStore(cfg.Dir, cfg.LogStore)
	if err != nil {
		return nil, err
	}
	store, err := openLogStore(&cfg, cfg.Dir, kind)
	if err != nil {
		return nil, err
	}
	n.kind, n.store = kind, store
	n.log.Info("raft log store", "backend", kind, "dir", cfg.Dir)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 3, logging.HCLog(n.log, "snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	n.snaps = snaps
	stream, err := raftnet.ListenTLS(cfg.BindAddr, cfg.Advertise, cfg.ClusterID, cfg.TLS, n.log.With("component", "raftnet"))
	if err != nil {
		return nil, fmt.Errorf("raftnode: raft listener: %w", err)
	}
	if cfg.Dial != nil {
		stream.SetDialFunc(cfg.Dial)
	}
	tc := &raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 4,
		Timeout: 10 * time.Second,
		Logger:  logging.HCLog(n.log, "raft-net"),
	}
	if cfg.TLS != nil {
		tc.AuthorizeRPC = raftnet.AuthorizeMember(n.log.With("component", "raftnet"))
	}
	n.trans = raft.NewNetworkTransportWithConfig(tc)
	if n.restarted, err = raft.HasExistingState(store, store, snaps); err != nil {
		return nil, fmt.Errorf("raftnode: inspect raft state: %w", err)
	}
	if n.restarted {
		if n.lastIndex, err = store.LastIndex(); err != nil {
			return nil, fmt.Errorf("raftnode: raft log: %w", err)
		}
	}
	var logs raft.LogStore = store
	if cfg.WrapLogs != nil {
		logs = cfg.WrapLogs(store)
	}
	// Recent entries from memory: replication to followers and a
	// follower's apply read the entries just written, and without the cache
	// each read goes to the store and decodes the entry again.
	cached, err := raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		return nil, fmt.Errorf("raftnode: raft log cache: %w", err)
	}
	r, err := raft.NewRaft(n.raftConfig(), fsm, cached, store, snaps, n.trans)
	if err != nil {
		return nil, fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.raft = r
	n.reads = newReadIndex(r)
	return n, nil
}

func (n *Node) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	t := n.cfg.Timing
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.SnapshotThreshold = t.SnapshotThreshold
	rc.SnapshotInterval = t.SnapshotInterval
	rc.TrailingLogs = t.TrailingLogs
	rc.MaxAppendEntries = t.MaxAppendEntries
	// Unbuffered: a future is handed to the leader loop, which answers it
	// even when it steps down; the journal batcher already groups commits.
	rc.BatchApplyCh = false
	rc.ShutdownOnRemove = true
	rc.NoLegacyTelemetry = true
	rc.ParallelLeaderWrite = t.ParallelLeaderWrite
	rc.Logger = logging.HCLog(n.log, "raft")
	return rc
}

// Raft is the hashicorp/raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Store is the log and stable store under Raft (without the cache).
func (n *Node) Store() LogStore { return n.store }

// Snapshots is the snapshot store.
func (n *Node) Snapshots() *raft.FileSnapshotStore { return n.snaps }

// Backend is the log store backend in use: LogStoreWAL or LogStoreBoltDB.
func (n *Node) Backend() string { return n.kind }

// Restarted reports whether the store held Raft state when it opened, and
// its last index then (what startup replay counts towards).
func (n *Node) Restarted() (bool, uint64) { return n.restarted, n.lastIndex }

// Bootstrap forms a new cluster of servers. It reports false, with no
// error, when this member already holds Raft state.
func (n *Node) Bootstrap(servers []raft.Server) (bool, error) {
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	return true, nil
}

// Voters counts the voters of the latest configuration (0 when it cannot
// be read).
func (n *Node) Voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	v := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}

// Shutdown stops Raft and closes the transport at once: peers' RPCs to a
// stopped Raft would otherwise wait for their I/O timeout. The store stays
// open (CloseStore) for whatever still reads it.
func (n *Node) Shutdown() error {
	var err error
	if n.reads != nil {
		n.reads.close()
	}
	if n.raft != nil {
		err = n.raft.Shutdown().Error()
	}
	if n.trans != nil {
		n.trans.CloseStreams()
		n.trans.Close()
	}
	return err
}

// CloseStore closes the log store, after Shutdown.
func (n *Node) CloseStore() error {
	if n.store == nil {
		return nil
	}
	return n.store.Close()
}

// Await waits for a Raft future or for done to close, whichever comes
// first. hashicorp/raft does not answer futures that are still queued (in
// applyCh or on the way to the FSM) when it shuts down, so every wait on a
// request path must also watch the server's own shutdown. If done wins, the
// helper goroutine ends when raft answers, or never if raft never does; that
// happens only while the member shuts down.
func Await(done <-chan struct{}, f raft.Future) error {
	res := make(chan error, 1)
	go func() { res <- f.Error() }()
	select {
	case err := <-res:
		return err
	case <-done:
		return raft.ErrRaftShutdown
	}
}

// SegmentStats counts the raft-wal segments this node made from a zeroed
// spare and those it had to fallocate instead (walzero.go); both are 0
// unless WALPrefill is on and the backend is raft-wal.
func (n *Node) SegmentStats() (zeroed, fallocated int64) {
	if ws, ok := n.store.(*walStore); ok {
		return ws.vfs.zeroed.Load(), ws.vfs.fallocated.Load()
	}
	return 0, 0
}
