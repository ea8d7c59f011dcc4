package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/spf13/cobra"
)

func newFSCmd() *cobra.Command {
	c := groupCmd("fs", "Write, read and manage files kept on the storage nodes",
		newFSPutCmd(), newFSCatCmd(), newFSLsCmd(), newFSRmCmd(), newFSStatCmd(), newFSRecoverLeaseCmd())
	c.Long = `Write, read and manage files. The coordinators keep the namespace (files,
blocks, leases); the bytes go straight between this client and the storage
nodes' write pipelines. Paths are absolute (/dir/file).

  put LOCAL|- PATH    write a file (- streams stdin as it arrives)
  cat PATH            print a file
  ls [DIR]            list a directory (default /)
  rm PATH [-r]        remove a file, or a directory with -r
  stat PATH           a file with its blocks and their replicas (+cached:
                      held in a node's locked memory, see coord cache), or
                      a directory with its number of entries
  recover-lease PATH  take an open file's lease over and close it`
	return c
}

const fsTimeoutHelp = "deadline for the whole command, retries and data transfer included"

// fsPath checks that a command line path is absolute.
func fsPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", usageErrorf("path %q: want an absolute path (/dir/file)", p)
	}
	return p, nil
}

// ctxWriter writes to a FileWriter under ctx.
type ctxWriter struct {
	ctx context.Context
	w   *client.FileWriter
}

func (c ctxWriter) Write(p []byte) (int, error) { return c.w.WriteContext(c.ctx, p) }

func newFSPutCmd() *cobra.Command {
	var (
		o           *clientOpts
		replication uint32
		blockSize   uint64
		overwrite   bool
	)
	cmd := &cobra.Command{
		Use:   "put LOCAL|- PATH",
		Short: "Write a local file (or stdin, as it arrives) to PATH",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[1])
			if err != nil {
				return err
			}
			if blockSize%512 != 0 {
				return usageErrorf("--block-size %d: want a multiple of 512", blockSize)
			}
			if replication < 1 || replication > maxReplication {
				return usageErrorf("--replication %d: want 1 to %d", replication, maxReplication)
			}
			var src io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := openLocalSource(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				src = f
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				warnReplication(ctx, cmd.ErrOrStderr(), c, replication)
				w, err := c.FS().Create(ctx, path, client.CreateOptions{Replication: replication, BlockSize: blockSize, Overwrite: overwrite})
				if err != nil {
					return leaseHint(err, path)
				}
				n, err := io.Copy(ctxWriter{ctx, w}, src)
				if err == nil {
					if err = w.Close(ctx); err != nil {
						err = fmt.Errorf("close: %w", err)
					}
				}
				if err != nil {
					w.Abort()
					return fmt.Errorf("put %s: %w%s", path, err, abandon(c, path))
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Path   string `json:"path"`
						Length int64  `json:"length"`
					}{path, n})
				}
				return nil
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Minute, fsTimeoutHelp)
	fs := cmd.Flags()
	fs.Uint32Var(&replication, "replication", client.DefaultReplication, "replicas of every block, 1 to 16 (above the live storage nodes: a warning, and the blocks stay under-replicated)")
	fs.Uint64Var(&blockSize, "block-size", client.DefaultBlockSize, "block size in bytes (a multiple of 512)")
	fs.BoolVar(&overwrite, "overwrite", false, "replace an existing closed file")
	return cmd
}

func newFSCatCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "cat PATH",
		Short: "Print a file (an open one up to what its writer has synced)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[0])
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.FS().Open(ctx, path)
				if err != nil {
					return err
				}
				defer r.Close()
				_, err = io.Copy(cmd.OutOrStdout(), r)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Minute, fsTimeoutHelp)
	return cmd
}

// fsEntryJSON is one entry of coord fs ls.
type fsEntryJSON struct {
	Path              string `json:"path"`
	Dir               bool   `json:"dir"`
	Length            uint64 `json:"length"`
	Replication       uint32 `json:"replication"`
	BlockSize         uint64 `json:"block_size"`
	Blocks            uint32 `json:"blocks"`
	UnderConstruction bool   `json:"under_construction"`
}

func newFSLsCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "ls [DIR]",
		Short: "List a directory (default /)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dir := "/"
			if len(args) == 1 {
				var err error
				if dir, err = fsPath(args[0]); err != nil {
					return err
				}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				entries, err := c.FS().List(ctx, dir)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					out := make([]fsEntryJSON, 0, len(entries))
					for _, e := range entries {
						out = append(out, fsEntryJSON{Path: e.Path, Dir: e.Dir, Length: e.Length, Replication: e.Replication,
							BlockSize: e.BlockSize, Blocks: e.BlockCount, UnderConstruction: e.UnderConstruction})
					}
					return writeJSON(w, struct {
						Entries []fsEntryJSON `json:"entries"`
					}{out})
				}
				t := newTable(w)
				io.WriteString(t, "PATH\tTYPE\tLENGTH\tREPLICATION\tBLOCKS\tOPEN\n")
				for _, e := range entries {
					if e.Dir {
						fmt.Fprintf(t, "%s\tdir\t-\t-\t-\t-\n", e.Path)
						continue
					}
					open := "no"
					if e.UnderConstruction {
						open = "yes"
					}
					fmt.Fprintf(t, "%s\tfile\t%d\t%d\t%d\t%s\n", e.Path, e.Length, e.Replication, e.BlockCount, open)
				}
				return t.Flush()
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newFSRmCmd() *cobra.Command {
	var (
		o         *clientOpts
		recursive bool
	)
	cmd := &cobra.Command{
		Use:   "rm PATH",
		Short: "Remove a file, or with -r a directory and everything under it",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[0])
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				n, err := c.FS().Delete(ctx, path, recursive)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						RemovedFiles uint64 `json:"removed_files"`
					}{n})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed %d file(s)\n", n)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove a directory and everything under it")
	return cmd
}

// fsStatJSON is the JSON shape of coord fs stat of a file.
type fsStatJSON struct {
	Path        string        `json:"path"`
	Length      uint64        `json:"length"`
	Closed      bool          `json:"closed"`
	Replication uint32        `json:"replication"`
	Blocks      []fsBlockJSON `json:"blocks"`
	// UnderReplicated counts the complete blocks with fewer reported
	// replicas than Replication (omitted when none).
	UnderReplicated int `json:"under_replicated_blocks,omitempty"`
}

// fsDirJSON is the JSON shape of coord fs stat of a directory.
type fsDirJSON struct {
	Path    string `json:"path"`
	Dir     bool   `json:"dir"`
	Entries uint64 `json:"entries"`
}

type fsBlockJSON struct {
	ID        uint64           `json:"id"`
	GS        uint64           `json:"gs"`
	Length    uint64           `json:"length"`
	State     string           `json:"state"`
	Locations []fsLocationJSON `json:"locations"`
}

type fsLocationJSON struct {
	Node   string `json:"node"`
	State  string `json:"state"`
	GS     uint64 `json:"gs"`
	Length int64  `json:"length"`
	// Cached: the node holds the replica in locked memory (coord cache).
	Cached bool `json:"cached"`
}

func toFSStatJSON(info client.FileInfo) fsStatJSON {
	out := fsStatJSON{Path: info.Path, Length: info.Length, Closed: !info.UnderConstruction, Replication: info.Replication, Blocks: []fsBlockJSON{}}
	for _, b := range info.Blocks {
		bj := fsBlockJSON{ID: b.ID, GS: b.GS, Length: b.Length, State: b.State.String(), Locations: []fsLocationJSON{}}
		for _, r := range b.Reported {
			bj.Locations = append(bj.Locations, fsLocationJSON{Node: r.Node, State: r.State.String(), GS: r.GS, Length: r.Length, Cached: r.Cached})
		}
		out.Blocks = append(out.Blocks, bj)
		if b.State == client.BlockComplete && len(b.Reported) < int(info.Replication) {
			out.UnderReplicated++
		}
	}
	return out
}

func newFSStatCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Show a file with its blocks and the replicas the leader saw reported, or a directory",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[0])
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.FS().Stat(ctx, path)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if info.Dir {
					d := fsDirJSON{Path: info.Path, Dir: true, Entries: info.Entries}
					if o.json {
						return writeJSON(w, d)
					}
					t := newTable(w)
					fmt.Fprintf(t, "path\t%s\ntype\tdirectory\nentries\t%d\n", d.Path, d.Entries)
					return t.Flush()
				}
				st := toFSStatJSON(info)
				if o.json {
					return writeJSON(w, st)
				}
				t := newTable(w)
				fmt.Fprintf(t, "path\t%s\nlength\t%d\nclosed\t%v\nreplication\t%d\nblock size\t%d\n", st.Path, st.Length, st.Closed, st.Replication, info.BlockSize)
				if info.LeaseHolder != "" {
					fmt.Fprintf(t, "lease holder\t%s\n", info.LeaseHolder)
				}
				if st.UnderReplicated > 0 {
					fmt.Fprintf(t, "under-replicated\t%d of %d blocks have fewer than %d replicas\n", st.UnderReplicated, len(st.Blocks), st.Replication)
				}
				t.Flush()
				if len(st.Blocks) == 0 {
					return nil
				}
				fmt.Fprintln(w)
				t = newTable(w)
				io.WriteString(t, "BLOCK\tGS\tLENGTH\tSTATE\tLOCATIONS\n")
				for _, b := range st.Blocks {
					locs := make([]string, 0, len(b.Locations))
					for _, l := range b.Locations {
						loc := l.Node + ":" + l.State + "@" + strconv.FormatUint(l.GS, 10) + "/" + strconv.FormatInt(l.Length, 10)
						if l.Cached {
							loc += "+cached"
						}
						locs = append(locs, loc)
					}
					fmt.Fprintf(t, "%d\t%d\t%d\t%s\t%s\n", b.ID, b.GS, b.Length, b.State, orDash(strings.Join(locs, " ")))
				}
				return t.Flush()
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newFSRecoverLeaseCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "recover-lease PATH",
		Short: "Take an open file's lease over and start its recovery (closed: done; else call again)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			path, err := fsPath(args[0])
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				closed, err := c.FS().RecoverLease(ctx, path)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Closed bool `json:"closed"`
					}{closed})
				}
				msg := "closed"
				if !closed {
					msg = "recovery in progress: run again to check"
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}
