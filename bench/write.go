package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"time"

	"github.com/logbookhq/logbook/client"
)

// WriteConfig is the file write and read workload (coord bench write).
type WriteConfig struct {
	// Client is the cluster: its Endpoints at least. It needs storage
	// nodes, at least Replication of them live.
	Client client.Config
	// Files files of Size bytes each, written in Chunk writes (and read
	// in Chunk reads), with blocks of BlockSize bytes (a multiple of 512)
	// stored Replication times.
	Files       int
	Size        int64
	BlockSize   int64
	Chunk       int64
	Replication uint32
	// Clients is how many concurrent writers (and then readers) there
	// are, each its own SDK client.
	Clients int
	// Dir holds the files: an absolute path below /, or "" for a new
	// /bench/write-<random>. It is deleted at the end unless Keep.
	Dir  string
	Keep bool
	// Timeout bounds writing and reading every file (the cleanup has its
	// own deadline).
	Timeout time.Duration
}

// DefaultWriteConfig is coord bench write's defaults (no Client).
func DefaultWriteConfig() WriteConfig {
	return WriteConfig{Files: 64, Size: 8 << 20, BlockSize: 4 << 20, Chunk: 1 << 20, Replication: client.DefaultReplication,
		Clients: 4, Timeout: 5 * time.Minute}
}

// Validate refuses a config out of range with a *ConfigError. It does not
// check Client: connecting does.
func (c WriteConfig) Validate() error {
	switch {
	case c.Files < 1 || c.Files > 1_000_000:
		return configErrorf("--files %d: want 1..1000000", c.Files)
	case c.Size < 0:
		return configErrorf("--size %d: want >= 0", c.Size)
	case c.BlockSize <= 0 || c.BlockSize%512 != 0:
		return configErrorf("--block-size %d: want a positive multiple of 512", c.BlockSize)
	case c.Chunk < 1 || c.Chunk > 64<<20:
		return configErrorf("--chunk %d: want 1..64MiB", c.Chunk)
	case c.Replication < 1 || c.Replication > 16:
		return configErrorf("--replication %d: want 1..16", c.Replication)
	case c.Clients < 1 || c.Clients > 1024:
		return configErrorf("--clients %d: want 1..1024", c.Clients)
	case !validDir(c.Dir):
		return configErrorf("--dir %q: want an absolute path below /", c.Dir)
	case c.Timeout <= 0:
		return configErrorf("--timeout %s: want a positive duration", c.Timeout)
	}
	return nil
}

// WriteResult is the figures of a write run; its JSON is coord bench
// write's. Throughputs are MB/s (10^6 bytes) of file data; latencies are
// per file, Create to Close and Open to the last byte verified.
type WriteResult struct {
	// FirstErr is the first failure (Errors counts them): a file not
	// written or not verified, or the cleanup.
	FirstErr      error   `json:"-"`
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
	// Kept: Dir was left in place (Keep, or its removal failed).
	Kept bool `json:"kept"`
}

// RunWrite writes cfg.Files files from cfg.Clients clients, then reads and
// verifies them all, then (unless Keep) deletes the directory. A file that
// fails is counted in the result; RunWrite fails only when cfg is invalid,
// the clients cannot connect or the storage nodes are not ready.
func RunWrite(ctx context.Context, cfg WriteConfig) (res WriteResult, err error) {
	if err := cfg.Validate(); err != nil {
		return WriteResult{}, err
	}
	if cfg.Dir == "" {
		cfg.Dir = randomDir("write")
	}
	res = WriteResult{Dir: cfg.Dir, Files: cfg.Files, SizeBytes: cfg.Size, BlockSize: cfg.BlockSize,
		Replication: cfg.Replication, Clients: cfg.Clients, Kept: cfg.Keep}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	clients, err := connectClients(runCtx, cfg.Client, cfg.Clients)
	if err != nil {
		return res, err
	}
	defer closeClients(clients)
	if err := waitLiveNodes(runCtx, clients[0], int(cfg.Replication)); err != nil {
		return res, err
	}
	fss := make([]*client.FS, len(clients))
	for i, c := range clients {
		fss[i] = c.FS()
	}
	if !cfg.Keep {
		defer func() {
			if err := removeDir(ctx, clients[0], cfg.Dir); err != nil {
				res.Kept = true
				if res.FirstErr == nil {
					res.FirstErr = fmt.Errorf("remove %s: %w", cfg.Dir, err)
				}
			}
		}()
	}
	seed := mrand.Uint64()
	var errs errCounter
	writeLat := make([]time.Duration, cfg.Files)
	written := make([]bool, cfg.Files)
	start := time.Now()
	forEach(cfg.Files, cfg.Clients, func(w, i int) {
		t0 := time.Now()
		if err := writeFile(runCtx, fss[w], cfg, seed, i); err != nil {
			errs.add(err)
			return
		}
		writeLat[i], written[i] = time.Since(t0), true
	})
	res.WriteS = time.Since(start).Seconds()

	readLat := make([]time.Duration, cfg.Files)
	verified := make([]bool, cfg.Files)
	start = time.Now()
	forEach(cfg.Files, cfg.Clients, func(w, i int) {
		if !written[i] {
			return
		}
		t0 := time.Now()
		if err := verifyFile(runCtx, fss[w], cfg.Dir, seed, i, cfg.Size, cfg.Chunk); err != nil {
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
	res.WrittenBytes = int64(res.WrittenFiles) * cfg.Size
	res.VerifiedBytes = int64(res.VerifiedFiles) * cfg.Size
	if res.WriteS > 0 {
		res.WriteMBPerS = float64(res.WrittenBytes) / mb / res.WriteS
	}
	if res.ReadS > 0 {
		res.ReadMBPerS = float64(res.VerifiedBytes) / mb / res.ReadS
	}
	res.WriteP50Ms, res.WriteP99Ms = durationsMs(wl)
	res.ReadP50Ms, res.ReadP99Ms = durationsMs(rl)
	res.Errors = errs.count()
	res.FirstErr = errs.firstErr()
	return res, nil
}

// writeFile creates file i, writes its cfg.Size bytes of data in cfg.Chunk
// writes and closes it.
func writeFile(ctx context.Context, fs *client.FS, cfg WriteConfig, seed uint64, i int) error {
	path := filePath(cfg.Dir, i)
	w, err := fs.Create(ctx, path, client.CreateOptions{Replication: cfg.Replication, BlockSize: uint64(cfg.BlockSize)})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	src := fileData(seed, i)
	buf := make([]byte, min(cfg.Chunk, max(cfg.Size, 1)))
	for left := cfg.Size; left > 0; {
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

// verifyFile reads file i back and compares every byte with the data
// written.
func verifyFile(ctx context.Context, fs *client.FS, dir string, seed uint64, i int, size int64, chunk int64) error {
	path := filePath(dir, i)
	r, err := fs.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer r.Close()
	if r.Size() != size {
		return fmt.Errorf("read %s: size %d, want %d", path, r.Size(), size)
	}
	src := fileData(seed, i)
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
