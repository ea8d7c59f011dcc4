package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logbookhq/logbook/internal/tlsflag"
	"google.golang.org/grpc/credentials"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// clientOpts are the flags every client command has.
type clientOpts struct {
	endpoints  []string
	clusterID  string
	timeout    time.Duration
	addressMap []string
	json       bool
	// zeroTimeout lets --timeout 0 mean no deadline (journal tail).
	zeroTimeout bool
	tls         *tlsflag.Flags
	token       string
	tokenFile   string
}

// addClientFlags registers the client flags on cmd.
func addClientFlags(cmd *cobra.Command, timeout time.Duration, timeoutHelp string) *clientOpts {
	o := &clientOpts{}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.endpoints, "endpoints", []string{client.DefaultEndpoint}, "coordinator gRPC addresses, comma-separated")
	fs.StringVar(&o.clusterID, "cluster-id", "", "expected cluster id; coordinators of another cluster refuse the call")
	fs.DurationVar(&o.timeout, "timeout", timeout, timeoutHelp)
	fs.StringSliceVar(&o.addressMap, "address-map", nil, "translate advertised member addresses to reachable ones: adv=reach,...")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	o.tls = tlsflag.Add(fs, false)
	fs.StringVar(&o.token, "token", "", "a bearer token (lbt_..., coord acl token create) to call as its user; needs --tls-ca")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from this file instead")
	envflag.Bind(fs, "endpoints", "cluster-id", "address-map", "tls-cert", "tls-key", "tls-ca", "token", "token-file")
	return o
}

// tlsConfig is the TLS of the client flags: nil without --tls-ca, a client
// certificate with --tls-cert and --tls-key.
func (o *clientOpts) tlsConfig() (*tls.Config, error) {
	if !o.tls.Set() {
		return nil, nil
	}
	if o.tls.CA == "" {
		return nil, usageErrorf("--tls-cert and --tls-key need --tls-ca (the cluster CA)")
	}
	conf, err := client.LoadTLS(o.tls.Cert, o.tls.Key, o.tls.CA)
	if err != nil {
		return nil, usageErrorf("TLS: %w", err)
	}
	return conf, nil
}

func (o *clientOpts) validate() (endpoints []string, addrMap map[string]string, err error) {
	endpoints = cleanList(o.endpoints)
	if len(endpoints) == 0 {
		return nil, nil, usageErrorf("--endpoints: at least one address is required")
	}
	switch {
	case o.timeout < 0 && o.zeroTimeout:
		return nil, nil, usageErrorf("--timeout %s: want a positive duration, or 0 for no deadline", o.timeout)
	case o.timeout < 0, o.timeout == 0 && !o.zeroTimeout:
		return nil, nil, usageErrorf("--timeout %s: want a positive duration", o.timeout)
	}
	for _, kv := range cleanList(o.addressMap) {
		adv, reach, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(adv) == "" || strings.TrimSpace(reach) == "" {
			return nil, nil, usageErrorf("--address-map %q: want advertised=reachable", kv)
		}
		if addrMap == nil {
			addrMap = map[string]string{}
		}
		addrMap[strings.TrimSpace(adv)] = strings.TrimSpace(reach)
	}
	return endpoints, addrMap, nil
}

// config is the SDK config for these flags.
func (o *clientOpts) config() (client.Config, error) {
	endpoints, addrMap, err := o.validate()
	if err != nil {
		return client.Config{}, err
	}
	attempt := 5 * time.Second
	if o.timeout > 0 {
		attempt = min(attempt, o.timeout)
	}
	tlsConf, err := o.tlsConfig()
	if err != nil {
		return client.Config{}, err
	}
	token := strings.TrimSpace(o.token)
	if o.tokenFile != "" {
		if token != "" {
			return client.Config{}, usageErrorf("--token and --token-file: give one")
		}
		if token, err = client.LoadToken(o.tokenFile); err != nil {
			return client.Config{}, usageErrorf("%v", err)
		}
	}
	if token != "" && tlsConf == nil {
		return client.Config{}, usageErrorf("a token needs TLS: give --tls-ca (the cluster CA), or its %s", envflag.Name("tls-ca"))
	}
	return client.Config{
		Token:          token,
		TLS:            tlsConf,
		Endpoints:      endpoints,
		ClusterID:      strings.TrimSpace(o.clusterID),
		AddressMap:     addrMap,
		AttemptTimeout: attempt,
	}, nil
}

// withClient runs fn with a client and a context bounded by --timeout; SDK
// errors become one clear runtime error.
func (o *clientOpts) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	return o.withClientContext(cmd.Context(), fn)
}

// withClientContext is withClient under parent (--timeout 0, where allowed,
// leaves parent's deadline alone).
func (o *clientOpts) withClientContext(parent context.Context, fn func(ctx context.Context, c *client.Client) error) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	ctx, cancel := parent, context.CancelFunc(func() {})
	if o.timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, o.timeout)
	}
	defer cancel()
	c, err := client.New(ctx, cfg)
	if err != nil {
		return o.explain(err)
	}
	defer c.Close()
	return o.explain(fn(ctx, c))
}

// explain adds the deadline to a timed-out call's error.
func (o *clientOpts) explain(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s (--timeout): %w", o.timeout, err)
	}
	// A plaintext client of a TLS cluster, or the other way round, sees
	// only a transport error: say what it probably means.
	switch msg := err.Error(); {
	case !o.tls.Set() && strings.Contains(msg, "error reading server preface"):
		return fmt.Errorf("%w (the cluster may run with TLS: give --tls-ca, and --tls-cert and --tls-key, or their LOGBOOK_TLS_* variables)", err)
	case o.tls.Set() && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Errorf("%w (the cluster speaks plaintext: drop the --tls-* flags)", err)
	}
	if ee := (*client.EndpointsError)(nil); errors.As(err, &ee) {
		return fmt.Errorf("%w. %s", err, o.endpointsHint())
	}
	return err
}

// endpointsHint says how to point a command at the cluster, for an error
// where no endpoint answered.
func (o *clientOpts) endpointsHint() string {
	if eps := cleanList(o.endpoints); len(eps) == 1 && eps[0] == client.DefaultEndpoint {
		return fmt.Sprintf("No coordinator at the default endpoint: give the cluster's gRPC addresses with --endpoints host:port,... or %s", envflag.Name("endpoints"))
	}
	return fmt.Sprintf("Check the cluster's gRPC addresses in --endpoints (or %s)", envflag.Name("endpoints"))
}

const clientTimeoutHelp = "deadline for the whole command, retries included"

func newStatusCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster status: leader, term, indexes, members and the storage nodes' health",
		Args:  cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				j := toStatusJSON(st)
				if nodes, err := c.Nodes(ctx); err == nil {
					j.Storage = toStorageJSON(nodes)
					if j.Storage.MissingBlocks > 0 {
						j.Warnings = append(j.Warnings, fmt.Sprintf("%d blocks missing: no good replica on a live node", j.Storage.MissingBlocks))
					}
				}
				if o.json {
					return writeJSON(w, j)
				}
				return writeStatus(w, st, j)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newMembersCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the Raft members with their health",
		Args:  cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Members []memberJSON `json:"members"`
					}{toMembersJSON(st.Members)})
				}
				return writeMembersTable(cmd.OutOrStdout(), st.Members)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

type indexJSON struct {
	Index uint64 `json:"index"`
}

// membershipCmd builds raft add-voter, add-nonvoter and remove.
func membershipCmd(use, short string, nargs int, call func(ctx context.Context, c *client.Cluster, args []string) (uint64, error), done func(args []string, index uint64) string) *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(nargs),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				index, err := call(ctx, c.Cluster(), args)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), indexJSON{index})
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), done(args, index))
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newRaftCmd() *cobra.Command {
	addVoter := membershipCmd("add-voter ID RAFT_ADDR", "Add a voting member", 2,
		func(ctx context.Context, c *client.Cluster, a []string) (uint64, error) {
			return c.AddVoter(ctx, a[0], a[1])
		},
		func(a []string, i uint64) string {
			return fmt.Sprintf("added voter %s (%s) at raft index %d", a[0], a[1], i)
		})
	addNonvoter := membershipCmd("add-nonvoter ID RAFT_ADDR", "Add a member that replicates but does not vote", 2,
		func(ctx context.Context, c *client.Cluster, a []string) (uint64, error) {
			return c.AddNonvoter(ctx, a[0], a[1])
		},
		func(a []string, i uint64) string {
			return fmt.Sprintf("added nonvoter %s (%s) at raft index %d", a[0], a[1], i)
		})
	remove := membershipCmd("remove ID", "Remove a member (it stops and cannot rejoin with its data dir)", 1,
		func(ctx context.Context, c *client.Cluster, a []string) (uint64, error) {
			return c.RemoveServer(ctx, a[0])
		},
		func(a []string, i uint64) string { return fmt.Sprintf("removed %s at raft index %d", a[0], i) })

	var o *clientOpts
	transfer := &cobra.Command{
		Use:   "transfer-leader [ID]",
		Short: "Hand leadership to ID, or to the most up-to-date voter",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			target := ""
			if len(args) == 1 {
				target = args[0]
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				leader, err := c.Cluster().TransferLeadership(ctx, target)
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Leader string `json:"leader"`
					}{leader})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "leader is now %s\n", leader)
				return err
			})
		}),
	}
	o = addClientFlags(transfer, 10*time.Second, clientTimeoutHelp)
	return groupCmd("raft", "Change Raft membership and leadership", addVoter, addNonvoter, remove, transfer)
}

func newSnapshotCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Force a snapshot on the member at the first endpoint",
		Long: `Force a snapshot on the member at the first --endpoints address. Each
member snapshots its own state; run once per member to snapshot them all.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				ep := cleanList(o.endpoints)[0]
				index, term, err := c.Cluster().Snapshot(ctx, ep)
				if err != nil {
					return fmt.Errorf("snapshot on %s: %w", ep, err)
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						Index uint64 `json:"index"`
						Term  uint64 `json:"term"`
					}{index, term})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "snapshot of %s at index %d, term %d\n", ep, index, term)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newHealthCmd() *cobra.Command {
	var (
		o     *clientOpts
		ready bool
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check one coordinator with the gRPC health protocol (exit 0 when SERVING)",
		Long: `Check the coordinator at the first --endpoints address with the standard
gRPC health service: the process as a whole by default, or with --ready
whether it is ready to serve (a leader is known and its state caught up).
Exit 0 when SERVING, 1 otherwise. No other endpoint is tried, and nothing
but this binary is needed (suits healthchecks in FROM-scratch images).`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			endpoints, addrMap, err := o.validate()
			if err != nil {
				return err
			}
			ep := endpoints[0]
			if m, ok := addrMap[ep]; ok {
				ep = m
			}
			service := ""
			if ready {
				service = pb.ReadyService
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			if id := strings.TrimSpace(o.clusterID); id != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, pb.MDClusterID, id)
			}
			tlsConf, err := o.tlsConfig()
			if err != nil {
				return err
			}
			creds := insecure.NewCredentials()
			if tlsConf != nil {
				creds = credentials.NewTLS(tlsConf)
			}
			conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(creds))
			if err != nil {
				return fmt.Errorf("health %s: %w", ep, err)
			}
			defer conn.Close()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				st := status.Convert(err)
				if st.Code() == codes.Unavailable {
					return fmt.Errorf("health %s: %s: %s. %s", ep, st.Code(), st.Message(), o.endpointsHint())
				}
				return fmt.Errorf("health %s: %s: %s", ep, st.Code(), st.Message())
			}
			st := resp.GetStatus()
			w := cmd.OutOrStdout()
			if o.json {
				err = writeJSON(w, struct {
					Endpoint string `json:"endpoint"`
					Service  string `json:"service"`
					Status   string `json:"status"`
				}{ep, service, st.String()})
			} else {
				_, err = fmt.Fprintln(w, st.String())
			}
			if err != nil {
				return err
			}
			if st != healthpb.HealthCheckResponse_SERVING {
				return &exitError{code: 1}
			}
			return nil
		}),
	}
	o = addClientFlags(cmd, 2*time.Second, "deadline for the check")
	cmd.Flags().BoolVar(&ready, "ready", false, "check readiness ("+pb.ReadyService+") instead of liveness")
	return cmd
}
