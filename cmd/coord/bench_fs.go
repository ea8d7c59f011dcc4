package main

// coord bench write and coord bench recovery: the file-system workloads
// (bench.RunWrite, bench.RunRecovery) as commands.

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/logbookhq/logbook/bench"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
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

func newBenchWriteCmd() *cobra.Command {
	var (
		o   *clientOpts
		cfg = bench.DefaultWriteConfig()
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
			if err := benchUsage(cfg.Validate()); err != nil {
				return err
			}
			ccfg, err := o.config()
			if err != nil {
				return err
			}
			cfg.Client, cfg.Timeout = ccfg, o.timeout
			res, err := bench.RunWrite(cmd.Context(), cfg)
			if err != nil {
				return o.explain(err)
			}
			if res.FirstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench write: %d errors; first: %v\n", res.Errors, res.FirstErr)
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
	fs.IntVar(&cfg.Files, "files", cfg.Files, "number of files")
	fs.Var((*byteSize)(&cfg.Size), "size", "bytes per file")
	fs.Var((*byteSize)(&cfg.BlockSize), "block-size", "block size, a multiple of 512")
	fs.Var((*byteSize)(&cfg.Chunk), "chunk", "bytes per Write and per Read call")
	fs.Uint32Var(&cfg.Replication, "replication", cfg.Replication, "replicas of every block")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent writers (and then readers), each its own SDK client")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory of the files (default: a new /bench/write-<random>)")
	fs.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the files instead of deleting --dir at the end")
	o = addClientFlags(cmd, cfg.Timeout, "deadline for writing and reading every file (cleanup has its own)")
	return cmd
}

// writeRecoveryTable prints coord bench recovery's result as a table.
func writeRecoveryTable(w io.Writer, res bench.RecoveryResult) error {
	t := newTable(w)
	fmt.Fprintf(t, "dir\t%s\nfiles\t%d, %d B synced each (replication %d) by %d writers\ntrigger\t%s\n", res.Dir, res.Files, res.BytesSynced, res.Replication, res.Writers, res.Trigger)
	fmt.Fprintf(t, "setup\t%.2f s (%d files open when the writers died)\n", res.SetupS, res.OpenAtDeath)
	if res.Trigger == bench.TriggerRecoverLease {
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
		o   *clientOpts
		cfg = bench.DefaultRecoveryConfig()
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
			if err := benchUsage(cfg.Validate()); err != nil {
				return err
			}
			ccfg, err := o.config()
			if err != nil {
				return err
			}
			cfg.Client, cfg.Timeout = ccfg, o.timeout
			res, err := bench.RunRecovery(cmd.Context(), cfg)
			if err != nil {
				return o.explain(err)
			}
			if res.FirstErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "coord: bench recovery: %d errors, %d failed calls retried; first: %v\n", res.Errors, res.RecoverLeaseErrors+res.ListErrors, res.FirstErr)
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
	fs.IntVar(&cfg.Files, "files", cfg.Files, "number of abandoned files")
	fs.Var((*byteSize)(&cfg.Bytes), "bytes", "bytes written and synced to each file before its writer dies")
	fs.Var((*byteSize)(&cfg.BlockSize), "block-size", "block size, a multiple of 512 above --bytes")
	fs.Uint32Var(&cfg.Replication, "replication", cfg.Replication, "replicas of every block")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "writer processes (each its own SDK client) and the concurrency of the RecoverLease calls and checks")
	fs.StringVar(&cfg.Trigger, "trigger", cfg.Trigger, "what starts the recoveries: recover-lease or hard-limit")
	fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "how often to list --dir while waiting for the files to close")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory of the files (default: a new /bench/recovery-<random>)")
	fs.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the files instead of deleting --dir at the end")
	o = addClientFlags(cmd, cfg.Timeout, "deadline for the setup and the recoveries (the checks and cleanup have their own)")
	return cmd
}
