// Command coord runs a Logbook coordinator (coord serve), a whole local
// cluster (coord dev), and the operator CLI (status, members, raft,
// snapshot, health, journal, fs, nodes, cache, recovery, acl, gossip, tls,
// bench).
//
// Exit codes: 0 success, 1 runtime failure (an error from the cluster, a
// health check that is not SERVING), 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/spf13/cobra"
)

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookup: os.LookupEnv,
	}))
}

// env is what one invocation talks to; tests substitute buffers and a fake
// environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookup         func(string) (string, bool)
}

// exitError carries the exit code of a failed command. A nil err means the
// command has already reported the failure itself.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports a usage or configuration error (exit code 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// runE marks every error returned by fn as a runtime failure (exit code 1)
// unless fn chose a code itself. Errors cobra raises before RunE (unknown
// flags, wrong argument counts) are usage errors.
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: 1, err: err}
	}
}

// execute runs one coord invocation and returns its exit code.
func execute(ctx context.Context, args []string, e env) int {
	root := newRootCmd(e)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	code := 2
	var ee *exitError
	if errors.As(err, &ee) {
		code, err = ee.code, ee.err
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "coord: %s\n", oneLine(err))
		if code == 2 && cmd != nil {
			fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func newRootCmd(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "coord",
		Short: "Logbook coordinator and operator CLI",
		Long: `coord runs a Logbook coordinator (serve), a local cluster of coordinators
and storage nodes (dev), and talks to a running cluster: its members
(status, members, raft, snapshot, health), the metadata journal (journal),
files and storage nodes (fs, nodes, cache, recovery), security (acl,
gossip; tls makes certificates offline) and benchmarks (bench).

Every serve flag has a LOGBOOK_* environment equivalent (--raft-addr is
LOGBOOK_RAFT_ADDR); client commands read LOGBOOK_ENDPOINTS,
LOGBOOK_CLUSTER_ID and LOGBOOK_ADDRESS_MAP. A flag given on the command line
beats the environment, which beats the default.

Connection flags (--endpoints, --cluster-id, --address-map, --tls-*,
--token, --token-file) are accepted by every command; those that do not
talk to a cluster ignore them.

Exit codes, the same for every command: 0 ok; 1 the command ran and failed
(the cluster refused it or could not be reached, a local file to read or
write failed); 2 the command line or configuration is wrong (unknown
command or flag, a bad value, the wrong number of arguments, a bad
LOGBOOK_* variable, unreadable TLS or token files).`,
		Version:       buildVersion(),
		Args:          cliargs.None,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := envflag.Apply(cmd.Flags(), e.lookup); err != nil {
				return usageErrorf("environment: %w", err)
			}
			return nil
		},
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: 2, err: err}
	})
	root.AddCommand(
		newServeCmd(e),
		newDevCmd(e),
		newStatusCmd(),
		newMembersCmd(),
		newNodesCmd(),
		newRecoveryCmd(),
		newRaftCmd(),
		newSnapshotCmd(),
		newJournalCmd(),
		newFSCmd(),
		newCacheCmd(),
		newHealthCmd(),
		newTLSCmd(),
		newGossipCmd(),
		newAclCmd(),
		newBenchCmd(),
		newVersionCmd(),
	)
	acceptConnectionFlags(root)
	return root
}

// connectionFlags are the client flags that say how to reach a cluster
// (addClientFlags); their LOGBOOK_* variables are read by every command
// that talks to one and ignored by the others.
var connectionFlags = []string{"endpoints", "cluster-id", "address-map", "tls-cert", "tls-key", "tls-ca", "token", "token-file"}

// acceptConnectionFlags gives every command that does not reach a cluster
// (coord journal inspect, tls, version ...) the connection flags, hidden
// and ignored, so that a script or an alias that passes them to every
// command works: an offline command ignores what it does not need.
func acceptConnectionFlags(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		acceptConnectionFlags(sub)
	}
	fs := cmd.Flags()
	if fs.Lookup("endpoints") != nil {
		return
	}
	for _, name := range connectionFlags {
		if fs.Lookup(name) == nil && cmd.PersistentFlags().Lookup(name) == nil {
			fs.StringSlice(name, nil, "ignored: this command does not talk to a cluster")
			_ = fs.MarkHidden(name)
		}
	}
}

// groupCmd is a command that only holds subcommands: alone it prints its
// help, with an unknown subcommand it is a usage error.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cliargs.None,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(subs...)
	return c
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the coord version",
		Args:  cliargs.None,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildVersion())
			return err
		},
	}
}

// buildVersion is the main module's version, or "devel" for a build from a
// work tree.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}
