package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

// File-system benchmarks: coord bench write (end-to-end write and read
// throughput through the SDK) and coord bench recovery (lease and block
// recovery of files abandoned by dead writers).

const (
	// benchNodesWait bounds how long a file bench waits for enough live
	// storage nodes before it starts.
	benchNodesWait = 10 * time.Second
	// benchAfterTimeout bounds the verification, journal read and cleanup
	// that follow the measured phases (they run even when --timeout ran out).
	benchAfterTimeout = 2 * time.Minute
	mb                = 1e6
)

// byteSize is a flag holding a byte count: 4096, 4KiB, 8MiB, 1GiB (k, M, G
// are binary multiples too).
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Type() string { return "bytes" }

func (b *byteSize) Set(s string) error {
	v := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(v)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(lower, u.suffix) {
			v, mult = strings.TrimSpace(v[:len(v)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q: want a byte count such as 4096, 64KiB or 8MiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// randomBenchDir is a fresh directory name under /bench.
func randomBenchDir(kind string) string {
	var b [6]byte
	rand.Read(b[:])
	return "/bench/" + kind + "-" + hex.EncodeToString(b[:])
}

// benchData is the deterministic content of file i of a run: a ChaCha8
// stream keyed by the run's seed and i, regenerated to verify reads.
func benchData(seed uint64, i int) *mrand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(i))
	return mrand.NewChaCha8(key)
}

// benchFilePath is the path of file i under dir.
func benchFilePath(dir string, i int) string { return fmt.Sprintf("%s/f%06d", dir, i) }

// durationsMs returns the p50 and p99 (nearest rank) of ds in milliseconds.
func durationsMs(ds []time.Duration) (p50, p99 float64) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 0.50), percentile(s, 0.99)
}

// connectClients opens n SDK clients concurrently.
func connectClients(ctx context.Context, cfg client.Config, n int) ([]*client.Client, error) {
	cs := make([]*client.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = client.New(ctx, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeClients(cs)
		return nil, fmt.Errorf("connect: %w", err)
	}
	return cs, nil
}

func closeClients(cs []*client.Client) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// waitLiveNodes waits up to benchNodesWait until the leader counts at least
// want live storage nodes.
func waitLiveNodes(ctx context.Context, c *client.Client, want int) error {
	ctx, cancel := context.WithTimeout(ctx, benchNodesWait)
	defer cancel()
	var last error
	for {
		r, err := c.Nodes(ctx)
		if err == nil {
			live := 0
			for _, n := range r.GetNodes() {
				if n.GetLive() {
					live++
				}
			}
			if live >= want {
				return nil
			}
			last = fmt.Errorf("%d live storage nodes, want %d for --replication (coord dev runs 3 with --nodes 3)", live, want)
		} else {
			last = err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("storage nodes not ready within %s: %w", benchNodesWait, last)
		case <-t.C:
		}
	}
}

// forEach runs fn(worker, i) for i in [0, n) on workers goroutines, each
// taking the next index; it returns once all are done.
func forEach(n, workers int, fn func(worker, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

// errCounter counts errors and keeps the first.
type errCounter struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *errCounter) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
}

func (e *errCounter) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *errCounter) firstErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// removeBenchDir deletes dir and everything under it.
func removeBenchDir(ctx context.Context, c *client.Client, dir string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchAfterTimeout)
	defer cancel()
	_, err := c.FS().Delete(ctx, dir, true)
	if errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}

// ---- coord bench write ----

type benchWriteOptions struct {
	files       int
	size        byteSize
	blockSize   byteSize
	chunk       byteSize
	replication uint32
	clients     int
	dir         string
	keep        bool
}

func (o benchWriteOptions) validate() error {
	switch {
	case o.files < 1 || o.files > 1_000_000:
		return usageErrorf("--files %d: want 1..1000000", o.files)
	case o.size < 0:
		return usageErrorf("--size %d: want >= 0", o.size)
	case o.blockSize <= 0 || o.blockSize%512 != 0:
		return usageErrorf("--block-size %d: want a positive multiple of 512", o.blockSize)
	case o.chunk < 1 || o.chunk > 64<<20:
		return usageErrorf("--chunk %d: want 1..64MiB", o.chunk)
	case o.replication < 1 || o.replication > 16:
		return usageErrorf("--replication %d: want 1..16", o.replication)
	case o.clients < 1 || o.clients > 1024:
		return usageErrorf("--clients %d: want 1..1024", o.clients)
	case !strings.HasPrefix(o.dir, "/") || o.dir == "/":
		return usageErrorf("--dir %q: want an absolute path below /", o.dir)
	}
	return nil
}

// benchWriteResult is the JSON shape of coord bench write.
type benchWriteResult struct {
	firstErr      error   // reported on stderr, not in the JSON
	Dir           string  `json:"dir"`
	Files         int     `json:"files"`
	SizeBytes     int64   `json:"size_bytes"`
	BlockSize     int64   `json:"block_size"`
	Replication   uint32  `json:"replication"`
	Clients       int     `json:"clients"`
	WrittenFiles  int     `json:"written_files"`
	WrittenBytes  int64   `json:"written_bytes"`
	WriteS        float64 `json:"write_s"`
	WriteMBPerS   float64 `json:"write_mb_per_sec"`
	WriteP50Ms    float64 `json:"write_p50_ms"`
	WriteP99Ms    float64 `json:"write_p99_ms"`
	VerifiedFiles int     `json:"verified_files"`
	VerifiedBytes int64   `json:"verified_bytes"`
	ReadS         float64 `json:"read_s"`
	ReadMBPerS    float64 `json:"read_mb_per_sec"`
	ReadP50Ms     float64 `json:"read_p50_ms"`
	ReadP99Ms     float64 `json:"read_p99_ms"`
	Errors        int     `json:"errors"`
	Kept          bool    `json:"kept"`
}

// benchWriteFile creates path, writes size bytes of file i's data in chunk
// writes and closes it.
func benchWriteFile(ctx context.Context, fs *client.FS, o benchWriteOptions, seed uint64, i int) error {
	path := benchFilePath(o.dir, i)
	w, err := fs.Create(ctx, path, client.CreateOptions{Replication: o.replication, BlockSize: uint64(o.blockSize)})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	src := benchData(seed, i)
	buf := make([]byte, min(int64(o.chunk), max(int64(o.size), 1)))
	for left := int64(o.size); left > 0; {
		n := min(left, int64(len(buf)))
		src.Read(buf[:n])
		if _, err := w.WriteContext(ctx, buf[:n]); err != nil {
			w.Abort()
			return fmt.Errorf("write %s: %w", path, err)
		}
		left -= n
	}
	if err := w.Close(ctx); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// benchVerifyFile reads file i back and compares every byte with the data
// written.
func benchVerifyFile(ctx context.Context, fs *client.FS, dir string, seed uint64, i int, size int64, chunk int64) error {
	path := benchFilePath(dir, i)
	r, err := fs.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer r.Close()
	if r.Size() != size {
		return fmt.Errorf("read %s: size %d, want %d", path, r.Size(), size)
	}
	src := benchData(seed, i)
	n := min(chunk, max(size, 1))
	got, want := make([]byte, n), make([]byte, n)
	for off := int64(0); off < size; {
		k := min(size-off, n)
		if _, err := io.ReadFull(r, got[:k]); err != nil {
			return fmt.Errorf("read %s at %d: %w", path, off, err)
		}
		src.Read(want[:k])
		if !bytes.Equal(got[:k], want[:k]) {
			return fmt.Errorf("read %s: bytes differ from what was written in [%d, %d)", path, off, off+k)
		}
		off += k
	}
	if k, err := r.Read(got[:1]); k != 0 || err != io.EOF {
		return fmt.Errorf("read %s: %d bytes past the end (%v), want EOF", path, k, err)
	}
	return nil
}

// runBenchWrite writes o.files files from o.clients clients, then reads
// and verifies them all, then (unless keep) deletes the directory.
func runBenchWrite(ctx context.Context, cfg client.Config, o benchWriteOptions, timeout time.Duration) (res benchWriteResult, err error) {
	res = benchWriteResult{Dir: o.dir, Files: o.files, SizeBytes: int64(o.size), BlockSize: int64(o.blockSize),
		Replication: o.replication, Clients: o.clients, Kept: o.keep}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	clients, err := connectClients(runCtx, cfg, o.clients)
	if err != nil {
		return res, err
	}
	defer closeClients(clients)
	if err := waitLiveNodes(runCtx, clients[0], int(o.replication)); err != nil {
		return res, err
	}
	fss := make([]*client.FS, len(clients))
	for i, c := range clients {
		fss[i] = c.FS()
	}
	if !o.keep {
		defer func() {
			if err := removeBenchDir(ctx, clients[0], o.dir); err != nil {
				res.Kept = true
				if res.firstErr == nil {
					res.firstErr = fmt.Errorf("remove %s: %w", o.dir, err)
				}
			}
		}()
	}
	seed := mrand.Uint64()
	var errs errCounter
	writeLat := make([]time.Duration, o.files)
	written := make([]bool, o.files)
	start := time.Now()
	forEach(o.files, o.clients, func(w, i int) {
		t0 := time.Now()
		if err := benchWriteFile(runCtx, fss[w], o, seed, i); err != nil {
			errs.add(err)
			return
		}
		writeLat[i], written[i] = time.Since(t0), true
	})
	res.WriteS = time.Since(start).Seconds()

	readLat := make([]time.Duration, o.files)
	verified := make([]bool, o.files)
	start = time.Now()
	forEach(o.files, o.clients, func(w, i int) {
		if !written[i] {
			return
		}
		t0 := time.Now()
		if err := benchVerifyFile(runCtx, fss[w], o.dir, seed, i, int64(o.size), int64(o.chunk)); err != nil {
			errs.add(err)
			return
		}
		readLat[i], verified[i] = time.Since(t0), true
	})
	res.ReadS = time.Since(start).Seconds()

	var wl, rl []time.Duration
	for i := range written {
		if written[i] {
			res.WrittenFiles++
			wl = append(wl, writeLat[i])
		}
		if verified[i] {
			res.VerifiedFiles++
			rl = append(rl, readLat[i])
		}
	}
	res.WrittenBytes = int64(res.WrittenFiles) * int64(o.size)
	res.VerifiedBytes = int64(res.VerifiedFiles) * int64(o.size)
	if res.WriteS > 0 {
		res.WriteMBPerS = float64(res.WrittenBytes) / mb / res.WriteS
	}
	if res.ReadS > 0 {
		res.ReadMBPerS = float64(res.VerifiedBytes) / mb / res.ReadS
	}
	res.WriteP50Ms, res.WriteP99Ms = durationsMs(wl)
	res.ReadP50Ms, res.ReadP99Ms = durationsMs(rl)
	res.Errors = errs.count()
	res.firstErr = errs.firstErr()
	return res, nil
}

func newBenchWriteCmd() *cobra.Command {
	var (
		o    *clientOpts
		opts = benchWriteOptions{size: 8 << 20, blockSize: 4 << 20, chunk: 1 << 20}
	)
	cmd := &cobra.Command{
		Use:   "write",
		Short: "Measure file write and read throughput through storage-node pipelines",
		Long: `Write --files files of --size bytes each (random data, in --chunk writes)
from --clients concurrent writers, each its own SDK client: Create, Write,
Close, through a pipeline of --replication storage nodes. Then read every
file back (Open, Read) and compare every byte with what was written. The
files go under --dir, which is deleted afterwards unless --keep.

Prints write and read throughput (MB/s, 10^6 bytes, of file data: each byte
is stored --replication times), the p50/p99 latency per file of the write
(Create to Close) and of the read (Open to the last byte verified), and the
errors. Sizes take KiB, MiB and GiB suffixes. Needs a cluster with storage
nodes (coord dev --nodes 3); waits up to 10s for --replication live nodes.
Exit 1 when any file failed to write or to verify.`,
		Example: `  coord bench write
  coord bench write --files 32 --size 4MiB --clients 8 --json`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if opts.dir == "" {
				opts.dir = randomBenchDir("write")
			}
			if err := opts.validate(); err != nil {
				return err
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			res, err := runBenchWrite(cmd.Context(), cfg, opts, o.timeout)
			if err != nil {
				return o.explain(err)
			}
			if res.firstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench write: %d errors; first: %v\n", res.Errors, res.firstErr)
			}
			w := cmd.OutOrStdout()
			if o.json {
				err = writeJSON(w, res)
			} else {
				t := newTable(w)
				fmt.Fprintf(t, "dir\t%s\nfiles\t%d of %d B (block size %d, replication %d)\nclients\t%d\n", res.Dir, res.Files, res.SizeBytes, res.BlockSize, res.Replication, res.Clients)
				fmt.Fprintf(t, "write\t%.1f MB/s (%d files, %d B in %.2f s)\nwrite per file\tp50 %.1f ms, p99 %.1f ms\n", res.WriteMBPerS, res.WrittenFiles, res.WrittenBytes, res.WriteS, res.WriteP50Ms, res.WriteP99Ms)
				fmt.Fprintf(t, "read\t%.1f MB/s (%d files verified, %d B in %.2f s)\nread per file\tp50 %.1f ms, p99 %.1f ms\n", res.ReadMBPerS, res.VerifiedFiles, res.VerifiedBytes, res.ReadS, res.ReadP50Ms, res.ReadP99Ms)
				fmt.Fprintf(t, "errors\t%d\nkept\t%v\n", res.Errors, res.Kept)
				err = t.Flush()
			}
			if err != nil {
				return err
			}
			if res.Errors > 0 || res.VerifiedFiles != res.Files {
				return fmt.Errorf("%d of %d files written and verified (%d errors)", res.VerifiedFiles, res.Files, res.Errors)
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.files, "files", 64, "number of files")
	fs.Var(&opts.size, "size", "bytes per file")
	fs.Var(&opts.blockSize, "block-size", "block size, a multiple of 512")
	fs.Var(&opts.chunk, "chunk", "bytes per Write and per Read call")
	fs.Uint32Var(&opts.replication, "replication", client.DefaultReplication, "replicas of every block")
	fs.IntVar(&opts.clients, "clients", 4, "concurrent writers (and then readers), each its own SDK client")
	fs.StringVar(&opts.dir, "dir", "", "directory of the files (default: a new /bench/write-<random>)")
	fs.BoolVar(&opts.keep, "keep", false, "keep the files instead of deleting --dir at the end")
	o = addClientFlags(cmd, 5*time.Minute, "deadline for writing and reading every file (cleanup has its own)")
	return cmd
}

// ---- coord bench recovery ----

const (
	triggerRecoverLease = "recover-lease"
	triggerHardLimit    = "hard-limit"
)

type benchRecoveryOptions struct {
	files       int
	bytes       byteSize
	blockSize   byteSize
	replication uint32
	clients     int
	trigger     string
	dir         string
	keep        bool
	poll        time.Duration
}

func (o benchRecoveryOptions) validate() error {
	switch {
	case o.files < 1 || o.files > 1_000_000:
		return usageErrorf("--files %d: want 1..1000000", o.files)
	case o.blockSize <= 0 || o.blockSize%512 != 0:
		return usageErrorf("--block-size %d: want a positive multiple of 512", o.blockSize)
	case o.bytes < 1 || o.bytes >= o.blockSize:
		return usageErrorf("--bytes %d: want 1..%d (below --block-size: the writer dies mid-block)", o.bytes, o.blockSize-1)
	case o.replication < 1 || o.replication > 16:
		return usageErrorf("--replication %d: want 1..16", o.replication)
	case o.clients < 1 || o.clients > 1024:
		return usageErrorf("--clients %d: want 1..1024", o.clients)
	case o.trigger != triggerRecoverLease && o.trigger != triggerHardLimit:
		return usageErrorf("--trigger %q: want %s or %s", o.trigger, triggerRecoverLease, triggerHardLimit)
	case !strings.HasPrefix(o.dir, "/") || o.dir == "/":
		return usageErrorf("--dir %q: want an absolute path below /", o.dir)
	case o.poll <= 0:
		return usageErrorf("--poll %s: want > 0", o.poll)
	}
	return nil
}

// benchRecoveryResult is the JSON shape of coord bench recovery.
type benchRecoveryResult struct {
	firstErr    error   // reported on stderr, not in the JSON
	Dir         string  `json:"dir"`
	Files       int     `json:"files"`
	BytesSynced int64   `json:"bytes_per_file"`
	Replication uint32  `json:"replication"`
	Writers     int     `json:"writers"`
	Trigger     string  `json:"trigger"`
	SetupS      float64 `json:"setup_s"`
	// OpenAtDeath: files still under construction when the writers died
	// (fewer than Files: a lease ran out during the setup).
	OpenAtDeath int `json:"open_at_death"`
	// RecoverLeaseS: time to issue one RecoverLease per file
	// (recover-lease); ClosedByCall: calls that answered closed at once.
	RecoverLeaseS      float64 `json:"recover_lease_calls_s,omitempty"`
	ClosedByCall       int     `json:"recover_lease_closed_at_once"`
	RecoverLeaseErrors int     `json:"recover_lease_errors"`
	// AllClosedS: from the writers' death (hard-limit) or the first
	// RecoverLease (recover-lease) until every file is closed.
	AllClosedS       float64 `json:"time_to_all_closed_s"`
	CloseP50Ms       float64 `json:"close_p50_ms"`
	CloseP99Ms       float64 `json:"close_p99_ms"`
	RecoveriesPerSec float64 `json:"recoveries_per_sec"`
	StillOpen        int     `json:"still_open"`
	ListErrors       int     `json:"list_errors"`
	// The journal over the recovery phase.
	JournalFrom       uint64         `json:"journal_from_seq"`
	JournalTo         uint64         `json:"journal_to_seq"`
	JournalEvents     int            `json:"journal_events"`
	EventTypes        map[string]int `json:"journal_event_types"`
	EventsPerRecovery float64        `json:"journal_events_per_recovery"`
	RecoveryAttempts  int            `json:"recovery_attempts"`
	RecoveriesDone    int            `json:"recoveries_committed"`
	// Primaries: the primary named by each attempt started.
	Primaries map[string]int `json:"recovery_primaries"`
	// JournalSpanS: leader timestamps of the first recovery started and
	// the last committed in the range.
	JournalSpanS float64 `json:"journal_recovery_span_s"`
	// After the fact: closed files, lengths at least the synced bytes and
	// the synced bytes read back intact.
	Closed        int  `json:"closed"`
	LengthOK      int  `json:"length_ok"`
	VerifiedFiles int  `json:"verified_files"`
	Errors        int  `json:"errors"`
	Kept          bool `json:"kept"`
}

// isFSEventType: the event types counted per recovery.
func isFSEventType(typ string) bool {
	for _, p := range []string{"logbook.recovery.", "logbook.lease.", "logbook.fs."} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// benchDeadWriter is one writer process: its own client holding open
// files, killed by closing the client.
type benchDeadWriter struct {
	c       *client.Client
	writers []*client.FileWriter
}

// die closes the client: its connections drop (the pipelines break, as a
// killed process's would) and nothing renews its lease or completes its
// files. Abort then only stops the writers' renewal goroutines, which can
// no longer reach the cluster.
func (d *benchDeadWriter) die() {
	d.c.Close()
	for _, w := range d.writers {
		w.Abort()
	}
}

// benchAbandonFile creates path, writes n bytes of file i's data and syncs
// them, so every pipeline node holds an RBW replica of that length.
func benchAbandonFile(ctx context.Context, fs *client.FS, o benchRecoveryOptions, seed uint64, i int) (*client.FileWriter, error) {
	path := benchFilePath(o.dir, i)
	w, err := fs.Create(ctx, path, client.CreateOptions{Replication: o.replication, BlockSize: uint64(o.blockSize)})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	buf := make([]byte, o.bytes)
	benchData(seed, i).Read(buf)
	if _, err := w.WriteContext(ctx, buf); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Sync(ctx); err != nil {
		w.Abort()
		return nil, fmt.Errorf("sync %s: %w", path, err)
	}
	return w, nil
}

// listOpen lists dir and returns the paths still under construction and
// how many entries it holds.
func listOpen(ctx context.Context, fs *client.FS, dir string) (open map[string]bool, entries int, err error) {
	es, err := fs.List(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	open = map[string]bool{}
	for _, e := range es {
		if !e.Dir && e.UnderConstruction {
			open[e.Path] = true
		}
	}
	return open, len(es), nil
}

// runBenchRecovery sets the abandoned files up, kills their writers,
// triggers and times the recoveries, reads the journal of the recovery
// phase and verifies every file.
func runBenchRecovery(ctx context.Context, cfg client.Config, o benchRecoveryOptions, timeout time.Duration) (res benchRecoveryResult, err error) {
	res = benchRecoveryResult{Dir: o.dir, Files: o.files, BytesSynced: int64(o.bytes), Replication: o.replication,
		Writers: o.clients, Trigger: o.trigger, EventTypes: map[string]int{}, Primaries: map[string]int{}, Kept: o.keep}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// after bounds what follows the measured phases, even past --timeout.
	after := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), benchAfterTimeout)
	}
	ctl, err := client.New(runCtx, cfg) // the bench's own, live client
	if err != nil {
		return res, err
	}
	defer ctl.Close()
	cfs := ctl.FS()
	if err := waitLiveNodes(runCtx, ctl, int(o.replication)); err != nil {
		return res, err
	}
	var errs errCounter
	defer func() {
		res.Errors += errs.count()
		if res.firstErr == nil {
			res.firstErr = errs.firstErr()
		}
	}()
	if !o.keep {
		defer func() {
			if err := removeBenchDir(ctx, ctl, o.dir); err != nil {
				res.Kept = true
				errs.add(fmt.Errorf("remove %s: %w", o.dir, err))
			}
		}()
	}
	// A consumer holds the recovery phase's events against automatic trim
	// until they are counted.
	consumer := fmt.Sprintf("bench-recovery-%d", time.Now().UnixNano())
	if _, err := ctl.Journal().Consumers().Register(runCtx, consumer, 0); err != nil {
		return res, fmt.Errorf("register the holding consumer: %w", err)
	}
	defer func() {
		actx, acancel := after()
		defer acancel()
		ctl.Journal().Consumers().Remove(actx, consumer)
	}()

	// Setup: o.clients writer processes, each its own client holding every
	// o.clients-th file open with o.bytes synced.
	clients, err := connectClients(runCtx, cfg, o.clients)
	if err != nil {
		return res, err
	}
	dead := make([]*benchDeadWriter, o.clients)
	for g, c := range clients {
		dead[g] = &benchDeadWriter{c: c}
	}
	killed := false
	defer func() {
		if !killed {
			for _, d := range dead {
				d.die()
			}
		}
	}()
	seed := mrand.Uint64()
	start := time.Now()
	var wg sync.WaitGroup
	setupErrs := make([]error, o.clients)
	for g, d := range dead {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs := d.c.FS()
			for i := g; i < o.files; i += o.clients {
				w, err := benchAbandonFile(runCtx, fs, o, seed, i)
				if err != nil {
					setupErrs[g] = err
					return
				}
				d.writers = append(d.writers, w)
			}
		}()
	}
	wg.Wait()
	res.SetupS = time.Since(start).Seconds()
	if err := errors.Join(setupErrs...); err != nil {
		return res, fmt.Errorf("setup: %w", err)
	}

	// The recovery phase starts here: every event from the next seq on is
	// the recoveries' (or another client's: shown by type).
	pos, err := ctl.Journal().Positions(runCtx)
	if err != nil {
		return res, err
	}
	res.JournalFrom = pos.SafePos + 1
	for _, d := range dead {
		d.die()
	}
	killed = true
	death := time.Now()
	open, _, err := listOpen(runCtx, cfs, o.dir)
	if err != nil {
		return res, err
	}
	res.OpenAtDeath = len(open)

	t0 := death
	closedAt := map[string]time.Duration{}
	var retry []int // files whose RecoverLease failed
	var mu sync.Mutex
	recoverLease := func(idx []int) {
		forEach(len(idx), o.clients, func(_, k int) {
			i := idx[k]
			path := benchFilePath(o.dir, i)
			closed, err := cfs.RecoverLease(runCtx, path)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && runCtx.Err() == nil:
				res.RecoverLeaseErrors++
				if res.firstErr == nil {
					res.firstErr = fmt.Errorf("recover lease %s: %w", path, err)
				}
				retry = append(retry, i)
			case err == nil && closed:
				res.ClosedByCall++
				if _, ok := closedAt[path]; !ok {
					closedAt[path] = time.Since(t0)
				}
			}
		})
	}
	if o.trigger == triggerRecoverLease {
		t0 = time.Now()
		all := make([]int, o.files)
		for i := range all {
			all[i] = i
		}
		recoverLease(all)
		res.RecoverLeaseS = time.Since(t0).Seconds()
	}

	// Poll until every file is closed.
	tick := time.NewTicker(o.poll)
	defer tick.Stop()
	for {
		open, n, err := listOpen(runCtx, cfs, o.dir)
		if err == nil {
			now := time.Since(t0)
			for i := 0; i < o.files; i++ {
				p := benchFilePath(o.dir, i)
				if _, ok := closedAt[p]; !ok && !open[p] {
					closedAt[p] = now
				}
			}
			if n < o.files {
				return res, fmt.Errorf("%s holds %d entries, want %d", o.dir, n, o.files)
			}
			res.StillOpen = len(open)
			if len(open) == 0 {
				res.AllClosedS = now.Seconds()
				break
			}
		} else if runCtx.Err() == nil {
			res.ListErrors++ // polled again: a leader change is no failure
			if res.firstErr == nil {
				res.firstErr = fmt.Errorf("list %s: %w", o.dir, err)
			}
		}
		if runCtx.Err() != nil {
			errs.add(fmt.Errorf("%d of %d files still open after %s (--timeout): %w", res.StillOpen, o.files, timeout, runCtx.Err()))
			break
		}
		if len(retry) > 0 {
			again := retry
			retry = nil
			recoverLease(again)
		}
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
	}
	var lat []time.Duration
	for _, d := range closedAt {
		lat = append(lat, d)
	}
	res.CloseP50Ms, res.CloseP99Ms = durationsMs(lat)
	if res.AllClosedS > 0 {
		res.RecoveriesPerSec = float64(o.files) / res.AllClosedS
	}

	actx, acancel := after()
	defer acancel()
	if err := countRecoveryEvents(actx, ctl, &res); err != nil {
		errs.add(fmt.Errorf("read the journal: %w", err))
	}
	verifyRecovered(actx, cfs, o, seed, &res, &errs)
	return res, nil
}

// countRecoveryEvents reads the journal from res.JournalFrom to the safe
// position now and counts the events by type.
func countRecoveryEvents(ctx context.Context, c *client.Client, res *benchRecoveryResult) error {
	pos, err := c.Journal().Positions(ctx)
	if err != nil {
		return err
	}
	res.JournalTo = pos.SafePos
	var firstStart, lastCommit int64
	fsEvents := 0
	for from := res.JournalFrom; from <= res.JournalTo; {
		evs, _, err := c.Journal().Read(ctx, from, 1000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no event at seq %d, want events up to %d", from, res.JournalTo)
		}
		for _, e := range evs {
			if e.Seq > res.JournalTo {
				break
			}
			res.JournalEvents++
			res.EventTypes[e.Type]++
			if isFSEventType(e.Type) {
				fsEvents++
			}
			if e.Type != fsm.EventRecoveryStarted && e.Type != fsm.EventRecoveryCommitted {
				continue
			}
			var ev fsmpb.NamespaceEvent
			if err := proto.Unmarshal(e.Payload, &ev); err != nil {
				return fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
			}
			if e.Type == fsm.EventRecoveryStarted {
				res.RecoveryAttempts++
				res.Primaries[ev.GetResult().GetBlock().GetRecovery().GetPrimary()]++
				if firstStart == 0 {
					firstStart = ev.GetUnixNanos()
				}
			} else {
				res.RecoveriesDone++
				lastCommit = ev.GetUnixNanos()
			}
		}
		from = evs[len(evs)-1].Seq + 1
	}
	if res.Files > 0 {
		res.EventsPerRecovery = float64(fsEvents) / float64(res.Files)
	}
	if firstStart > 0 && lastCommit > firstStart {
		res.JournalSpanS = time.Duration(lastCommit - firstStart).Seconds()
	}
	return nil
}

// verifyRecovered checks that every file is closed, at least as long as
// the synced bytes, and that those bytes read back as written.
func verifyRecovered(ctx context.Context, fs *client.FS, o benchRecoveryOptions, seed uint64, res *benchRecoveryResult, errs *errCounter) {
	var closed, lengthOK, verified atomic.Int64
	forEach(o.files, o.clients, func(_, i int) {
		path := benchFilePath(o.dir, i)
		info, err := fs.Stat(ctx, path)
		if err != nil {
			errs.add(fmt.Errorf("stat %s: %w", path, err))
			return
		}
		if info.UnderConstruction {
			errs.add(fmt.Errorf("%s is still open", path))
			return
		}
		closed.Add(1)
		if info.Length < uint64(o.bytes) {
			errs.add(fmt.Errorf("%s: length %d after recovery, below the %d bytes synced", path, info.Length, o.bytes))
			return
		}
		lengthOK.Add(1)
		r, err := fs.Open(ctx, path)
		if err != nil {
			errs.add(fmt.Errorf("open %s: %w", path, err))
			return
		}
		defer r.Close()
		got := make([]byte, o.bytes)
		if _, err := io.ReadFull(r, got); err != nil {
			errs.add(fmt.Errorf("read %s: %w", path, err))
			return
		}
		want := make([]byte, o.bytes)
		benchData(seed, i).Read(want)
		if !bytes.Equal(got, want) {
			errs.add(fmt.Errorf("%s: the synced bytes differ after recovery", path))
			return
		}
		verified.Add(1)
	})
	res.Closed, res.LengthOK, res.VerifiedFiles = int(closed.Load()), int(lengthOK.Load()), int(verified.Load())
}

func writeRecoveryTable(w io.Writer, res benchRecoveryResult) error {
	t := newTable(w)
	fmt.Fprintf(t, "dir\t%s\nfiles\t%d, %d B synced each (replication %d) by %d writers\ntrigger\t%s\n", res.Dir, res.Files, res.BytesSynced, res.Replication, res.Writers, res.Trigger)
	fmt.Fprintf(t, "setup\t%.2f s (%d files open when the writers died)\n", res.SetupS, res.OpenAtDeath)
	if res.Trigger == triggerRecoverLease {
		fmt.Fprintf(t, "recover-lease calls\t%.2f s (%d closed at once, %d errors)\n", res.RecoverLeaseS, res.ClosedByCall, res.RecoverLeaseErrors)
	}
	fmt.Fprintf(t, "all closed after\t%.2f s (%d still open)\nper file closed after\tp50 %.0f ms, p99 %.0f ms\nrecoveries/s\t%.1f\n", res.AllClosedS, res.StillOpen, res.CloseP50Ms, res.CloseP99Ms, res.RecoveriesPerSec)
	fmt.Fprintf(t, "journal\tseqs %d..%d: %d events, %.2f per recovery; %d attempts started, %d committed, %.2f s from the first start to the last commit\n",
		res.JournalFrom, res.JournalTo, res.JournalEvents, res.EventsPerRecovery, res.RecoveryAttempts, res.RecoveriesDone, res.JournalSpanS)
	types := make([]string, 0, len(res.EventTypes))
	for k := range res.EventTypes {
		types = append(types, k)
	}
	sort.Strings(types)
	for _, k := range types {
		fmt.Fprintf(t, "  %s\t%d\n", k, res.EventTypes[k])
	}
	prims := make([]string, 0, len(res.Primaries))
	for k, n := range res.Primaries {
		prims = append(prims, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(prims)
	fmt.Fprintf(t, "attempts by primary\t%s\n", strings.Join(prims, ", "))
	fmt.Fprintf(t, "verified\t%d closed, %d with length >= %d, %d with the synced bytes intact\nerrors\t%d\nkept\t%v\n", res.Closed, res.LengthOK, res.BytesSynced, res.VerifiedFiles, res.Errors, res.Kept)
	return t.Flush()
}

func newBenchRecoveryCmd() *cobra.Command {
	var (
		o    *clientOpts
		opts = benchRecoveryOptions{bytes: 4 << 10, blockSize: 1 << 20}
	)
	cmd := &cobra.Command{
		Use:   "recovery",
		Short: "Measure lease and block recovery of files abandoned mid-block by dead writers",
		Long: `Abandon --files files mid-block and time their recovery. Setup: --clients
writer processes, each its own SDK client, create the files (every
--clients-th one each, one after another), write --bytes to each and Sync,
so every pipeline node holds an RBW replica. Then every writer dies: its
client is closed, so its pipelines break, nothing renews its lease and no
file is completed.

--trigger recover-lease (default): the bench's own client calls
RecoverLease on every file (as HBase's log splitting does), --clients at a
time, and retries the calls that failed. --trigger hard-limit: nothing is
called; the coordinators' lease monitor recovers the files once their
lease passes the hard limit (coord dev --lease-hard-limit; the default is
20 minutes). Either way the bench lists --dir every --poll until every file
is closed.

Prints the setup time, the time from the first RecoverLease (recover-lease)
or the writers' death (hard-limit) until every file is closed, per-file
close times at poll resolution, recoveries per second, and the journal
events of the recovery phase (every event from the writers' death until all
are closed, by type; per recovery counts the logbook.recovery.*,
logbook.lease.* and logbook.fs.* ones). Then it checks every file is closed
with a length of at least --bytes and reads the synced bytes back. --dir is
deleted afterwards unless --keep. Exit 1 when a file is not recovered intact.

Storage nodes get their recovery commands in heartbeat replies (and ask
again as soon as they have room): against coord dev with the default 3s
heartbeat 1000 files took 4-5 s (docs/benchmarks.md).`,
		Example: `  coord bench recovery --files 100
  coord bench recovery --json                                    # coord dev --heartbeat-interval 100ms
  coord bench recovery --trigger hard-limit --json               # and --lease-hard-limit 10s`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if opts.dir == "" {
				opts.dir = randomBenchDir("recovery")
			}
			if err := opts.validate(); err != nil {
				return err
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			res, err := runBenchRecovery(cmd.Context(), cfg, opts, o.timeout)
			if err != nil {
				return o.explain(err)
			}
			if res.firstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench recovery: %d errors, %d failed calls retried; first: %v\n", res.Errors, res.RecoverLeaseErrors+res.ListErrors, res.firstErr)
			}
			if o.json {
				err = writeJSON(cmd.OutOrStdout(), res)
			} else {
				err = writeRecoveryTable(cmd.OutOrStdout(), res)
			}
			if err != nil {
				return err
			}
			if res.Errors > 0 || res.VerifiedFiles != res.Files {
				return fmt.Errorf("%d of %d files recovered intact (%d errors)", res.VerifiedFiles, res.Files, res.Errors)
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.files, "files", 1000, "number of abandoned files")
	fs.Var(&opts.bytes, "bytes", "bytes written and synced to each file before its writer dies")
	fs.Var(&opts.blockSize, "block-size", "block size, a multiple of 512 above --bytes")
	fs.Uint32Var(&opts.replication, "replication", client.DefaultReplication, "replicas of every block")
	fs.IntVar(&opts.clients, "clients", 16, "writer processes (each its own SDK client) and the concurrency of the RecoverLease calls and checks")
	fs.StringVar(&opts.trigger, "trigger", triggerRecoverLease, "what starts the recoveries: recover-lease or hard-limit")
	fs.DurationVar(&opts.poll, "poll", 100*time.Millisecond, "how often to list --dir while waiting for the files to close")
	fs.StringVar(&opts.dir, "dir", "", "directory of the files (default: a new /bench/recovery-<random>)")
	fs.BoolVar(&opts.keep, "keep", false, "keep the files instead of deleting --dir at the end")
	o = addClientFlags(cmd, 10*time.Minute, "deadline for the setup and the recoveries (the checks and cleanup have their own)")
	return cmd
}
