package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/spf13/cobra"
)

func newAclCmd() *cobra.Command {
	c := groupCmd("acl", "Access control: bootstrap, tokens, roles and the roles bound to users",
		newAclBootstrapCmd(),
		newAclWhoAmICmd(),
		groupCmd("token", "Create, list or revoke bearer tokens",
			newAclTokenCreateCmd(), newAclTokenLsCmd(), newAclTokenRevokeCmd(), newAclTokenGenCmd()),
		groupCmd("role", "Create, list or delete roles",
			newAclRolePutCmd(), newAclRoleLsCmd(), newAclRoleRmCmd()),
		newAclBindCmd(true),
		newAclBindCmd(false),
	)
	c.Long = `The cluster holds its access control (log format 12): roles, the roles bound
to each user, and bearer tokens (only a SHA-256 of each secret). Coordinators
started with --acl-enabled enforce it: a user call needs a token (--token) or
a client certificate (--tls-cert) whose user a bound role allows. A
certificate's user is its name; a token's user is the one it was made for.

  bootstrap                 once: the first token, its user bound to admin
  whoami                    who the cluster takes you for, and your grants
  token create --user U     a new token (shown once)
  token ls | revoke ACC     list tokens, revoke one by its accessor
  token gen                 print a fresh token, offline (for serve's
                            --acl-bootstrap-token-file)
  role put NAME --grant G   create or replace a role
  role ls | rm NAME         list roles with their users, delete one
  bind USER ROLE            bind a role to a user
  unbind USER ROLE          remove it

Built-in roles: reader (read everything), writer (read and write
everything), admin (everything, ACLs included). A grant is
LEVEL[:SCOPE[:PREFIX,...]]: read, write or admin on all, journal (event-type
prefixes, "app." covers "app.orders") or fs (path prefixes by component,
"/data" covers "/data/x", not "/database"). docs/security.md has the table
of what each level allows.`
	return c
}

func newAclBootstrapCmd() *cobra.Command {
	var o *clientOpts
	var user, desc string
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create the first admin token, once per cluster",
		Long: `Create the cluster's first token, for --user (default admin), and bind that
user to the admin role. It works once (Consul's acl bootstrap): after, it is
refused with ALREADY_BOOTSTRAPPED and an admin makes tokens with
coord acl token create. It needs a client certificate of the cluster CA
(--tls-cert, --tls-key, --tls-ca); a certificate named like --user is an
admin from then on too. The token is printed once: keep it.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Acl().Bootstrap(ctx, user, desc)
				if err != nil {
					return err
				}
				return writeNewToken(cmd.OutOrStdout(), o.json, t)
			})
		}),
	}
	cmd.Flags().StringVar(&user, "user", "admin", "the user of the first token, bound to admin")
	cmd.Flags().StringVar(&desc, "description", "bootstrap", "a note kept with the token")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func writeNewToken(w io.Writer, asJSON bool, t client.NewToken) error {
	if asJSON {
		return writeJSON(w, map[string]any{"secret": t.Secret, "token": tokenJSON(t.Token), "index": t.Index})
	}
	fmt.Fprintf(w, "token %s for user %q", t.Accessor, t.User)
	if !t.Expires.IsZero() {
		fmt.Fprintf(w, ", expires %s", t.Expires.UTC().Format(time.RFC3339))
	}
	_, err := fmt.Fprintf(w, "\nsecret (shown once): %s\n", t.Secret)
	return err
}

func tokenJSON(t client.Token) map[string]any {
	m := map[string]any{"accessor": t.Accessor, "user": t.User, "description": t.Description, "created": t.Created.UTC().Format(time.RFC3339), "created_by": t.CreatedBy, "expired": t.Expired}
	if !t.Expires.IsZero() {
		m["expires"] = t.Expires.UTC().Format(time.RFC3339)
	}
	return m
}

func newAclWhoAmICmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the cluster takes you for, your roles and grants",
		Args:  cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				id, err := c.Acl().WhoAmI(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, id)
				}
				fmt.Fprintf(w, "user %q (%s", id.Name, id.Kind)
				if id.CertificateRole != "" {
					fmt.Fprintf(w, " of role %s", id.CertificateRole)
				}
				fmt.Fprintf(w, ")\nroles: %s\n", orNone(strings.Join(id.Roles, ", ")))
				for _, g := range id.Grants {
					fmt.Fprintf(w, "  %s\n", grantString(g))
				}
				_, err = fmt.Fprintf(w, "enforced here: %v, bootstrapped: %v\n", id.Enforced, id.Bootstrapped)
				return err
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func grantString(g client.Grant) string {
	s := g.Level + " on " + g.Scope
	if len(g.Prefixes) > 0 {
		s += " under " + strings.Join(g.Prefixes, ", ")
	}
	return s
}

func newAclTokenCreateCmd() *cobra.Command {
	var o *clientOpts
	var user, desc string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create --user USER",
		Short: "Create a bearer token for a user (admin)",
		Long: `Create a token for --user; the secret is printed once (the cluster keeps
only its SHA-256). The user needs roles (coord acl bind) for the token to
allow anything. --ttl makes it expire (checked by each coordinator's
clock); 0 never expires.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return usageErrorf("--user is required")
			}
			if ttl < 0 {
				return usageErrorf("--ttl %s: want 0 or more", ttl)
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Acl().CreateToken(ctx, user, desc, ttl)
				if err != nil {
					return err
				}
				return writeNewToken(cmd.OutOrStdout(), o.json, t)
			})
		}),
	}
	cmd.Flags().StringVar(&user, "user", "", "the token's user")
	cmd.Flags().StringVar(&desc, "description", "", "a note kept with the token")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "expire after this long (0: never)")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclTokenLsCmd() *cobra.Command {
	var o *clientOpts
	var user string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (admin): accessor, user, expiry; never secrets",
		Args:  cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				toks, boot, enforced, err := c.Acl().Tokens(ctx, user)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					list := make([]map[string]any, 0, len(toks))
					for _, t := range toks {
						list = append(list, tokenJSON(t))
					}
					return writeJSON(w, map[string]any{"tokens": list, "bootstrapped": boot, "enforced": enforced})
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ACCESSOR\tUSER\tCREATED\tEXPIRES\tCREATED BY\tDESCRIPTION")
				for _, t := range toks {
					exp := "never"
					if !t.Expires.IsZero() {
						exp = t.Expires.UTC().Format(time.RFC3339)
						if t.Expired {
							exp += " (expired)"
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Accessor, t.User, t.Created.UTC().Format(time.RFC3339), exp, t.CreatedBy, t.Description)
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().StringVar(&user, "user", "", "only this user's tokens")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclTokenRevokeCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "revoke ACCESSOR",
		Short: "Revoke a token by its accessor (admin)",
		Long: `Revoke a token: every coordinator refuses it (Unauthenticated,
TOKEN_UNKNOWN) once it applied the index printed.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				idx, err := c.Acl().RevokeToken(ctx, args[0])
				return changed(cmd.OutOrStdout(), o.json, "revoked token "+args[0], idx, err)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func changed(w io.Writer, asJSON bool, what string, idx uint64, err error) error {
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, map[string]any{"index": idx})
	}
	_, err = fmt.Fprintf(w, "%s (index %d)\n", what, idx)
	return err
}

func newAclRolePutCmd() *cobra.Command {
	var o *clientOpts
	var grants []string
	cmd := &cobra.Command{
		Use:   "put NAME --grant LEVEL[:SCOPE[:PREFIX,...]] ...",
		Short: "Create or replace a role (admin)",
		Long: `Create or replace role NAME with the grants given (--grant, repeatable, none:
a role that grants nothing yet). A grant is LEVEL[:SCOPE[:PREFIX,...]]:
LEVEL read, write or admin (each includes the ones before); SCOPE all (the
default), journal or fs; PREFIX event-type prefixes for journal, path
prefixes for fs. Examples:

  coord acl role put orders --grant write:journal:app.orders.
  coord acl role put data-ro --grant read:fs:/data,/shared`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var gs []client.Grant
			for _, s := range grants {
				g, err := client.ParseGrant(s)
				if err != nil {
					return usageErrorf("--grant %q: %v", s, err)
				}
				gs = append(gs, g)
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				idx, err := c.Acl().PutRole(ctx, args[0], gs)
				return changed(cmd.OutOrStdout(), o.json, "role "+args[0]+" put", idx, err)
			})
		}),
	}
	cmd.Flags().StringArrayVar(&grants, "grant", nil, "a grant LEVEL[:SCOPE[:PREFIX,...]] (repeatable)")
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclRoleLsCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List roles with their grants and users (admin)",
		Args:  cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				roles, bindings, err := c.Acl().Roles(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.json {
					return writeJSON(w, map[string]any{"roles": roles, "bindings": bindings})
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ROLE\tGRANTS\tUSERS")
				for _, r := range roles {
					var gs []string
					for _, g := range r.Grants {
						gs = append(gs, grantString(g))
					}
					name := r.Name
					if r.Builtin {
						name += " (built in)"
					}
					users := append([]string(nil), r.Users...)
					sort.Strings(users)
					fmt.Fprintf(tw, "%s\t%s\t%s\n", name, orNone(strings.Join(gs, "; ")), orNone(strings.Join(users, ", ")))
				}
				return tw.Flush()
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclRoleRmCmd() *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a role bound to nobody (admin)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				idx, err := c.Acl().DeleteRole(ctx, args[0])
				return changed(cmd.OutOrStdout(), o.json, "role "+args[0]+" deleted", idx, err)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclBindCmd(bind bool) *cobra.Command {
	var o *clientOpts
	use, short := "bind USER ROLE", "Bind a role to a user (admin)"
	if !bind {
		use, short = "unbind USER ROLE", "Remove a role from a user (admin)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if bind {
					idx, err := c.Acl().Bind(ctx, args[0], args[1])
					return changed(cmd.OutOrStdout(), o.json, fmt.Sprintf("bound %s to %s", args[1], args[0]), idx, err)
				}
				idx, err := c.Acl().Unbind(ctx, args[0], args[1])
				return changed(cmd.OutOrStdout(), o.json, fmt.Sprintf("unbound %s from %s", args[1], args[0]), idx, err)
			})
		}),
	}
	o = addClientFlags(cmd, 10*time.Second, clientTimeoutHelp)
	return cmd
}

func newAclTokenGenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gen",
		Short: "Print a fresh random token, offline (for --acl-bootstrap-token-file)",
		Long: `Print a fresh token (lbt_<accessor>_<secret>) from the operating system's
random source, without a cluster: the content of the file coord serve's
--acl-bootstrap-token-file bootstraps the ACLs with. The cluster knows it
only once a coordinator bootstrapped with it.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			t, err := authz.NewToken()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), t.String())
			return err
		}),
	}
}
