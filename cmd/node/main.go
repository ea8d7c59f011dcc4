// Command node runs a Logbook storage node (node serve): block replicas on
// local volumes, the write pipeline, reads, transfers and the replica side
// of block recovery.
//
// Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.
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
	os.Exit(execute(context.Background(), os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, lookup: os.LookupEnv}))
}

// env is what one invocation talks to; tests substitute buffers and a fake
// environment.
type env struct {
	stdout, stderr io.Writer
	lookup         func(string) (string, bool)
	// started, when set (tests), receives the running server's addresses.
	started func(grpcAddr, httpAddr string)
}

// exitError carries the exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// execute runs one node invocation and returns its exit code.
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
	fmt.Fprintf(e.stderr, "node: %s\n", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
	if code == 2 && cmd != nil {
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

func newRootCmd(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "node",
		Short: "Logbook storage node",
		Long: `node runs a Logbook storage node (serve): it stores block replicas on local
volumes and serves the DataNode gRPC service (write pipeline, reads,
transfers, block recovery) with /metrics and /healthz over HTTP.

Every serve flag has a LOGBOOK_* environment equivalent (--grpc-addr is
LOGBOOK_GRPC_ADDR). A flag given on the command line beats the environment,
which beats the default.

Exit codes: 0 ok, 1 failure, 2 usage or configuration error.`,
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
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	root.AddCommand(newServeCmd(e), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the node version",
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
