package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbookhq/logbook/client"
)

// What starts the recoveries (RecoveryConfig.Trigger).
const (
	// TriggerRecoverLease: the workload's own client calls RecoverLease on
	// every file, as HBase's log splitting does.
	TriggerRecoverLease = "recover-lease"
	// TriggerHardLimit: nothing is called; the coordinators' lease monitor
	// recovers the files once their lease passes the hard limit.
	TriggerHardLimit = "hard-limit"
)

// RecoveryConfig is the lease and block recovery workload (coord bench
// recovery): Files files abandoned mid-block by Clients writers that die.
type RecoveryConfig struct {
	// Client is the cluster: its Endpoints at least. It needs storage
	// nodes, at least Replication of them live.
	Client client.Config
	// Files files, each written and synced Bytes bytes (below BlockSize,
	// a multiple of 512: the writer dies mid-block), stored Replication
	// times.
	Files       int
	Bytes       int64
	BlockSize   int64
	Replication uint32
	// Clients is how many writer processes (each its own SDK client, each
	// holding every Clients-th file) there are, and the concurrency of the
	// RecoverLease calls and checks.
	Clients int
	// Trigger is TriggerRecoverLease or TriggerHardLimit.
	Trigger string
	// Dir holds the files: an absolute path below /, or "" for a new
	// /bench/recovery-<random>. It is deleted at the end unless Keep.
	Dir  string
	Keep bool
	// Poll is how often Dir is listed while waiting for the files to close.
	Poll time.Duration
	// Timeout bounds the setup and the recoveries (the checks and cleanup
	// have their own deadline).
	Timeout time.Duration
}

// DefaultRecoveryConfig is coord bench recovery's defaults (no Client).
func DefaultRecoveryConfig() RecoveryConfig {
	return RecoveryConfig{Files: 1000, Bytes: 4 << 10, BlockSize: 1 << 20, Replication: client.DefaultReplication,
		Clients: 16, Trigger: TriggerRecoverLease, Poll: 100 * time.Millisecond, Timeout: 10 * time.Minute}
}

// Validate refuses a config out of range with a *ConfigError. It does not
// check Client: connecting does.
func (c RecoveryConfig) Validate() error {
	switch {
	case c.Files < 1 || c.Files > 1_000_000:
		return configErrorf("--files %d: want 1..1000000", c.Files)
	case c.BlockSize <= 0 || c.BlockSize%512 != 0:
		return configErrorf("--block-size %d: want a positive multiple of 512", c.BlockSize)
	case c.Bytes < 1 || c.Bytes >= c.BlockSize:
		return configErrorf("--bytes %d: want 1..%d (below --block-size: the writer dies mid-block)", c.Bytes, c.BlockSize-1)
	case c.Replication < 1 || c.Replication > 16:
		return configErrorf("--replication %d: want 1..16", c.Replication)
	case c.Clients < 1 || c.Clients > 1024:
		return configErrorf("--clients %d: want 1..1024", c.Clients)
	case c.Trigger != TriggerRecoverLease && c.Trigger != TriggerHardLimit:
		return configErrorf("--trigger %q: want %s or %s", c.Trigger, TriggerRecoverLease, TriggerHardLimit)
	case !validDir(c.Dir):
		return configErrorf("--dir %q: want an absolute path below /", c.Dir)
	case c.Poll <= 0:
		return configErrorf("--poll %s: want > 0", c.Poll)
	case c.Timeout <= 0:
		return configErrorf("--timeout %s: want a positive duration", c.Timeout)
	}
	return nil
}

// RecoveryResult is the figures of a recovery run; its JSON is coord
// bench recovery's.
type RecoveryResult struct {
	// FirstErr is the first failure (Errors counts them), or else the
	// first failed call that was retried (RecoverLeaseErrors, ListErrors).
	FirstErr    error   `json:"-"`
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

// RunRecovery sets the abandoned files up, kills their writers, triggers
// and times the recoveries, reads the journal of the recovery phase and
// verifies every file. A file not recovered intact is counted in the
// result; RunRecovery fails when cfg is invalid, the setup fails, or the
// files cannot be listed as they should.
func RunRecovery(ctx context.Context, cfg RecoveryConfig) (res RecoveryResult, err error) {
	if err := cfg.Validate(); err != nil {
		return RecoveryResult{}, err
	}
	if cfg.Dir == "" {
		cfg.Dir = randomDir("recovery")
	}
	res = RecoveryResult{Dir: cfg.Dir, Files: cfg.Files, BytesSynced: cfg.Bytes, Replication: cfg.Replication,
		Writers: cfg.Clients, Trigger: cfg.Trigger, EventTypes: map[string]int{}, Primaries: map[string]int{}, Kept: cfg.Keep}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// after bounds what follows the measured phases, even past cfg.Timeout.
	after := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), afterTimeout)
	}
	ctl, err := client.New(runCtx, cfg.Client) // the bench's own, live client
	if err != nil {
		return res, err
	}
	defer ctl.Close()
	cfs := ctl.FS()
	if err := waitLiveNodes(runCtx, ctl, int(cfg.Replication)); err != nil {
		return res, err
	}
	var errs errCounter
	defer func() {
		res.Errors += errs.count()
		if res.FirstErr == nil {
			res.FirstErr = errs.firstErr()
		}
	}()
	if !cfg.Keep {
		defer func() {
			if err := removeDir(ctx, ctl, cfg.Dir); err != nil {
				res.Kept = true
				errs.add(fmt.Errorf("remove %s: %w", cfg.Dir, err))
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

	// Setup: cfg.Clients writer processes, each its own client holding every
	// cfg.Clients-th file open with cfg.Bytes synced.
	clients, err := connectClients(runCtx, cfg.Client, cfg.Clients)
	if err != nil {
		return res, err
	}
	dead := make([]*deadWriter, cfg.Clients)
	for g, c := range clients {
		dead[g] = &deadWriter{c: c}
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
	setupErrs := make([]error, cfg.Clients)
	for g, d := range dead {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs := d.c.FS()
			for i := g; i < cfg.Files; i += cfg.Clients {
				w, err := abandonFile(runCtx, fs, cfg, seed, i)
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
	open, _, err := listOpen(runCtx, cfs, cfg.Dir)
	if err != nil {
		return res, err
	}
	res.OpenAtDeath = len(open)

	t0 := death
	closedAt := map[string]time.Duration{}
	var retry []int // files whose RecoverLease failed
	var mu sync.Mutex
	recoverLease := func(idx []int) {
		forEach(len(idx), cfg.Clients, func(_, k int) {
			i := idx[k]
			path := filePath(cfg.Dir, i)
			closed, err := cfs.RecoverLease(runCtx, path)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && runCtx.Err() == nil:
				res.RecoverLeaseErrors++
				if res.FirstErr == nil {
					res.FirstErr = fmt.Errorf("recover lease %s: %w", path, err)
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
	if cfg.Trigger == TriggerRecoverLease {
		t0 = time.Now()
		all := make([]int, cfg.Files)
		for i := range all {
			all[i] = i
		}
		recoverLease(all)
		res.RecoverLeaseS = time.Since(t0).Seconds()
	}

	// Poll until every file is closed.
	tick := time.NewTicker(cfg.Poll)
	defer tick.Stop()
	for {
		open, n, err := listOpen(runCtx, cfs, cfg.Dir)
		if err == nil {
			now := time.Since(t0)
			for i := 0; i < cfg.Files; i++ {
				p := filePath(cfg.Dir, i)
				if _, ok := closedAt[p]; !ok && !open[p] {
					closedAt[p] = now
				}
			}
			if n < cfg.Files {
				return res, fmt.Errorf("%s holds %d entries, want %d", cfg.Dir, n, cfg.Files)
			}
			res.StillOpen = len(open)
			if len(open) == 0 {
				res.AllClosedS = now.Seconds()
				break
			}
		} else if runCtx.Err() == nil {
			res.ListErrors++ // polled again: a leader change is no failure
			if res.FirstErr == nil {
				res.FirstErr = fmt.Errorf("list %s: %w", cfg.Dir, err)
			}
		}
		if runCtx.Err() != nil {
			errs.add(fmt.Errorf("%d of %d files still open after %s (--timeout): %w", res.StillOpen, cfg.Files, cfg.Timeout, runCtx.Err()))
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
		res.RecoveriesPerSec = float64(cfg.Files) / res.AllClosedS
	}

	actx, acancel := after()
	defer acancel()
	if err := countRecoveryEvents(actx, ctl, &res); err != nil {
		errs.add(fmt.Errorf("read the journal: %w", err))
	}
	verifyRecovered(actx, cfs, cfg, seed, &res, &errs)
	return res, nil
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

// deadWriter is one writer process: its own client holding open
// files, killed by closing the client.
type deadWriter struct {
	c       *client.Client
	writers []*client.FileWriter
}

// die closes the client: its connections drop (the pipelines break, as a
// killed process's would) and nothing renews its lease or completes its
// files. Abort then only stops the writers' renewal goroutines, which can
// no longer reach the cluster.
func (d *deadWriter) die() {
	d.c.Close()
	for _, w := range d.writers {
		w.Abort()
	}
}

// abandonFile creates file i, writes the first cfg.Bytes bytes of its data
// and syncs them, so every pipeline node holds an RBW replica of that
// length.
func abandonFile(ctx context.Context, fs *client.FS, cfg RecoveryConfig, seed uint64, i int) (*client.FileWriter, error) {
	path := filePath(cfg.Dir, i)
	w, err := fs.Create(ctx, path, client.CreateOptions{Replication: cfg.Replication, BlockSize: uint64(cfg.BlockSize)})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	buf := make([]byte, cfg.Bytes)
	fileData(seed, i).Read(buf)
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

// countRecoveryEvents reads the journal from res.JournalFrom to the safe
// position now and counts the events by type.
func countRecoveryEvents(ctx context.Context, c *client.Client, res *RecoveryResult) error {
	pos, err := c.Journal().Positions(ctx)
	if err != nil {
		return err
	}
	res.JournalTo = pos.SafePos
	if res.JournalTo < res.JournalFrom {
		return nil // nothing journaled (ReadRange reads to the end with to 0)
	}
	var firstStart, lastCommit time.Time
	fsEvents := 0
	err = c.Journal().ReadRange(ctx, res.JournalFrom, res.JournalTo, func(e client.StoredEvent) error {
		res.JournalEvents++
		res.EventTypes[e.Type]++
		if isFSEventType(e.Type) {
			fsEvents++
		}
		ev, ok, err := client.DecodeRecoveryEvent(e)
		switch {
		case err != nil || !ok:
			return err
		case ev.Attempt != nil:
			res.RecoveryAttempts++
			res.Primaries[ev.Attempt.Primary]++
			if firstStart.IsZero() {
				firstStart = ev.Time
			}
		default:
			res.RecoveriesDone++
			lastCommit = ev.Time
		}
		return nil
	})
	if err != nil {
		return err
	}
	if res.Files > 0 {
		res.EventsPerRecovery = float64(fsEvents) / float64(res.Files)
	}
	if !firstStart.IsZero() && lastCommit.After(firstStart) {
		res.JournalSpanS = lastCommit.Sub(firstStart).Seconds()
	}
	return nil
}

// verifyRecovered checks that every file is closed, at least as long as
// the synced bytes, and that those bytes read back as written.
func verifyRecovered(ctx context.Context, fs *client.FS, cfg RecoveryConfig, seed uint64, res *RecoveryResult, errs *errCounter) {
	var closed, lengthOK, verified atomic.Int64
	forEach(cfg.Files, cfg.Clients, func(_, i int) {
		path := filePath(cfg.Dir, i)
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
		if info.Length < uint64(cfg.Bytes) {
			errs.add(fmt.Errorf("%s: length %d after recovery, below the %d bytes synced", path, info.Length, cfg.Bytes))
			return
		}
		lengthOK.Add(1)
		r, err := fs.Open(ctx, path)
		if err != nil {
			errs.add(fmt.Errorf("open %s: %w", path, err))
			return
		}
		defer r.Close()
		got := make([]byte, cfg.Bytes)
		if _, err := io.ReadFull(r, got); err != nil {
			errs.add(fmt.Errorf("read %s: %w", path, err))
			return
		}
		want := make([]byte, cfg.Bytes)
		fileData(seed, i).Read(want)
		if !bytes.Equal(got, want) {
			errs.add(fmt.Errorf("%s: the synced bytes differ after recovery", path))
			return
		}
		verified.Add(1)
	})
	res.Closed, res.LengthOK, res.VerifiedFiles = int(closed.Load()), int(lengthOK.Load()), int(verified.Load())
}
