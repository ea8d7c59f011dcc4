package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/membership"
	"github.com/spf13/cobra"
)

func newGossipCmd() *cobra.Command {
	c := groupCmd("gossip", "Gossip encryption keys: make one, rotate them on every member",
		newGossipKeygenCmd(),
		newKeyringCmd())
	c.Long = `Gossip (membership and failure detection, hashicorp/memberlist) is encrypted
with AES-GCM when coord serve and node serve get --gossip-key or
--gossip-keyring-file. Each member holds a keyring: the primary key encrypts
what it sends, every key decrypts what it receives.

  keygen                  print a fresh random 32-byte key (base64)
  keyring list            every member's keys, with how many hold each
  keyring install KEY     add KEY on every member (it decrypts only)
  keyring use KEY         make KEY the primary on every member
  keyring remove KEY      drop KEY from every member

Rotate without downtime in that order (docs/security.md): install the new
key on all, use it on all, remove the old one from all.`
	return c
}

func newGossipKeygenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen",
		Short: "Print a fresh random 32-byte gossip key, base64",
		Long: `Print a fresh random 32-byte key (AES-256), standard base64, from the
operating system's random source: the value for --gossip-key or for
coord gossip keyring install.`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), membership.EncodeKey(membership.GenerateKey()))
			return err
		}),
	}
}

func newKeyringCmd() *cobra.Command {
	c := groupCmd("keyring", "List, install, use or remove a gossip key on every member",
		newKeyringOpCmd("list", client.KeyringList, "List every member's gossip keys, with how many members hold each",
			`List the keys of every coordinator (of the Raft configuration) and every
storage node in the gossip: per member, its keys (primary first); per key,
how many of the N members asked hold it (n/N) and use it as primary. A
member that did not answer is listed with its error and the command exits 1.`),
		newKeyringOpCmd("install", client.KeyringInstall, "Add a gossip key on every member, for decryption only",
			`Add KEY to every member's keyring (and keyring file); the primary stays, so
nothing changes on the wire yet. Installing a key a member holds is a no-op
there. A keyring holds at most 16 keys: an install beyond is refused
before anything changes. Members that fail are listed (exit 1); run the
command again once they are back.`),
		newKeyringOpCmd("use", client.KeyringUse, "Make an installed gossip key the primary on every member",
			`Make KEY the primary (the key that encrypts) on every member. Nothing
changes unless every member answered and holds KEY: a member without it
could not decrypt the others' gossip any more. The members lacking it are
listed (exit 1): install it there first.`),
		newKeyringOpCmd("remove", client.KeyringRemove, "Remove a gossip key that is no member's primary",
			`Remove KEY from every member's keyring (and keyring file). A key that is the
primary of any member is refused (FailedPrecondition) before anything
changes: use another key first. Removing a key a member lacks is a no-op
there.`),
	)
	return c
}

func newKeyringOpCmd(name string, op client.KeyringOp, short, long string) *cobra.Command {
	var o *clientOpts
	cmd := &cobra.Command{
		Use:   name + " KEY",
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			key := ""
			if op != client.KeyringList {
				if _, err := membership.ParseKey(args[0]); err != nil {
					return usageErrorf("key: %v", err)
				}
				key = args[0]
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.Cluster().GossipKeyring(ctx, op, key)
				if err != nil {
					return err
				}
				if o.json {
					err = writeJSON(cmd.OutOrStdout(), toKeyringJSON(name, r))
				} else {
					err = writeKeyring(cmd.OutOrStdout(), name, r)
				}
				if err != nil {
					return err
				}
				if r.Failed > 0 {
					return fmt.Errorf("gossip keyring %s failed on %d of %d members", name, r.Failed, r.Total)
				}
				return nil
			})
		}),
	}
	if op == client.KeyringList {
		cmd.Use, cmd.Args = name, cliargs.None
	}
	o = addClientFlags(cmd, 30*time.Second, clientTimeoutHelp)
	return cmd
}

// keyringJSON is the JSON shape of coord gossip keyring.
type keyringJSON struct {
	Op         string              `json:"op"`
	AnsweredBy string              `json:"answered_by"`
	Total      int                 `json:"total"`
	Failed     int                 `json:"failed"`
	Keys       []keyringKeyJSON    `json:"keys"`
	Members    []keyringMemberJSON `json:"members"`
}

type keyringKeyJSON struct {
	Key string `json:"key"`
	// Members holding the key, and those of them using it as primary.
	Members int `json:"members"`
	Primary int `json:"primary"`
}

type keyringMemberJSON struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	OK    bool     `json:"ok"`
	Error string   `json:"error,omitempty"`
	Keys  []string `json:"keys"`
}

func toKeyringJSON(op string, r client.KeyringResult) keyringJSON {
	j := keyringJSON{Op: op, AnsweredBy: r.ResponderID, Total: r.Total, Failed: r.Failed, Keys: []keyringKeyJSON{}, Members: []keyringMemberJSON{}}
	for _, k := range r.Keys {
		j.Keys = append(j.Keys, keyringKeyJSON{Key: k.Key, Members: k.Members, Primary: k.Primary})
	}
	for _, m := range r.Members {
		keys := m.Keys
		if keys == nil {
			keys = []string{}
		}
		j.Members = append(j.Members, keyringMemberJSON{ID: m.ID, Role: m.Role, OK: m.OK, Error: m.Error, Keys: keys})
	}
	return j
}

// writeKeyring prints a keyring operation's outcome: Consul's "key (n/N)"
// lines, then one row per member.
func writeKeyring(w io.Writer, op string, r client.KeyringResult) error {
	fmt.Fprintf(w, "gossip keyring %s: %d of %d members ok (answered by %s)\n\nKeys:\n", op, r.Total-r.Failed, r.Total, r.ResponderID)
	if len(r.Keys) == 0 {
		fmt.Fprintln(w, "  -")
	}
	for _, k := range r.Keys {
		primary := ""
		if k.Primary > 0 {
			primary = fmt.Sprintf(", primary on %d", k.Primary)
		}
		fmt.Fprintf(w, "  %s (%d/%d%s)\n", k.Key, k.Members, r.Total, primary)
	}
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "ID\tROLE\tRESULT\tKEYS\tPRIMARY\tERROR")
	for _, m := range r.Members {
		result, primary := "ok", "-"
		if !m.OK {
			result = "FAILED"
		}
		if len(m.Keys) > 0 {
			primary = m.Keys[0]
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.Role, result, len(m.Keys), primary, orDash(m.Error))
	}
	return t.Flush()
}
