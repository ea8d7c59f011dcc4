package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

func newCacheCmd() *cobra.Command {
	c := groupCmd("cache", "Keep files' blocks cached in the storage nodes' locked memory",
		newCacheAddCmd(), newCacheLsCmd(), newCacheRmCmd())
	c.Long = `Cache directives (HDFS centralized cache management). A directive asks the
coordinators to keep the COMPLETE blocks of one file cached in the locked
memory of N storage nodes that hold a good replica; reads of a cached
replica are served from memory. Directives are replicated and journaled
(logbook.cache.added, logbook.cache.removed); the leader picks the nodes
(most free cache first) from the cache reports nodes send with every
heartbeat, within each node's node serve --max-locked-memory (0, the
default, caches nothing). A directive names a path: it outlives a delete of
the file and covers a file created there again. coord fs stat shows which
replicas are cached.

  add PATH [--replication N]  add a directive (one per path)
  ls                          list directives with how much is cached
  rm ID                       remove a directive (its blocks are uncached)`
	return c
}

// cacheDirectiveJSON is the JSON shape of a directive (coord cache add|ls).
type cacheDirectiveJSON struct {
	ID           uint64 `json:"id"`
	Path         string `json:"path"`
	Replication  uint32 `json:"replication"`
	Created      string `json:"created"`
	BlocksNeeded uint64 `json:"blocks_needed"`
	BlocksCached uint64 `json:"blocks_cached"`
	BytesNeeded  uint64 `json:"bytes_needed"`
	BytesCached  uint64 `json:"bytes_cached"`
}

func toCacheDirectiveJSON(d client.CacheDirective) cacheDirectiveJSON {
	return cacheDirectiveJSON{ID: d.ID, Path: d.Path, Replication: d.Replication, Created: d.Created.UTC().Format(time.RFC3339Nano),
		BlocksNeeded: d.BlocksNeeded, BlocksCached: d.BlocksCached, BytesNeeded: d.BytesNeeded, BytesCached: d.BytesCached}
}

func newCacheAddCmd() *cobra.Command {
	var (
		o           *clientOpts
		replication uint32
	)
	cmd := &cobra.Command{
		Use:   "add PATH",
		Short: "Cache a file's blocks on --replication nodes holding a replica",
		Long: `Add a cache directive for the file at PATH: the leader keeps each COMPLETE
block cached on --replication (1..the file's replication) nodes that hold a
good replica. A path with a directive already is refused (AlreadyExists:
remove it first); so is a path without a file (NotFound). Needs every
coordinator at log format 4 (FailedPrecondition LOG_FORMAT before).`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[0])
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				d, err := c.FS().AddCacheDirective(ctx, path, replication)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), toCacheDirectiveJSON(d))
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "directive %d: %s cached on %d node(s)\n", d.ID, d.Path, d.Replication)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	cmd.Flags().Uint32Var(&replication, "replication", 1, "cached replicas per block (1..the file's replication)")
	return cmd
}

func newCacheLsCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the cache directives with how much of each is cached",
		Long: `List the cache directives by id. Blocks: the file's COMPLETE blocks cached on
REPLICATION nodes (not dead) / all of them; bytes: of their cached replicas /
REPLICATION × their length (the leader's view, from the nodes' cache
reports; a new leader fills it in within a few heartbeats).`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				ds, err := c.FS().ListCacheDirectives(ctx)
				if err != nil {
					return err
				}
				out := struct {
					Directives []cacheDirectiveJSON `json:"directives"`
				}{Directives: []cacheDirectiveJSON{}}
				for _, d := range ds {
					out.Directives = append(out.Directives, toCacheDirectiveJSON(d))
				}
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, out)
				}
				t := newTable(w)
				fmt.Fprintln(t, "ID\tPATH\tREPLICATION\tBLOCKS CACHED\tBYTES CACHED")
				for _, d := range out.Directives {
					fmt.Fprintf(t, "%d\t%s\t%d\t%d / %d\t%d / %d\n", d.ID, d.Path, d.Replication, d.BlocksCached, d.BlocksNeeded, d.BytesCached, d.BytesNeeded)
				}
				return t.Flush()
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newCacheRmCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a cache directive; what only it covered is uncached",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return usageErrorf("directive id %q: want a positive number (coord cache ls)", args[0])
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.FS().RemoveCacheDirective(ctx, id); err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Removed uint64 `json:"removed"`
					}{id})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "directive %d removed\n", id)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
