package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/cliargs"
	"github.com/logbookhq/logbook/internal/durable"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/membership"
	"github.com/spf13/cobra"
)

func newTLSCmd() *cobra.Command {
	c := groupCmd("tls", "Create the cluster CA and the certificates of members, nodes and users",
		newTLSInitCmd(),
		groupCmd("ca", "The cluster CA", newTLSCACreateCmd()),
		groupCmd("cert", "Certificates signed by the cluster CA", newTLSCertCreateCmd(), newTLSCertShowCmd()))
	c.Long = `Certificates for a cluster that runs with TLS (docs/security.md), written
with Go's crypto/x509: ECDSA P-256 keys, PEM files, keys mode 0600.

  init --dir D --coordinator ..  a CA and every certificate a cluster needs, once
  ca create                      a new cluster CA: ca.pem, ca-key.pem
  cert create --name N --role R  a certificate signed by it: N.pem, N-key.pem
  cert show FILE                 the identity, names and expiry of a certificate

A certificate names one identity: its subject's CN is the member id of a
coordinator or storage node, or a user's name; its OU is the role
(coordinator, node or client). Certificates from another PKI (cfssl, Vault,
cert-manager) work the same when their subjects follow that rule.`
	return c
}

func newTLSCACreateCmd() *cobra.Command {
	var dir, name string
	var days int
	var force bool
	cmd := &cobra.Command{
		Use:   "create [--dir DIR] [--name NAME] [--days N]",
		Short: "Create a new cluster CA (DIR/ca.pem and DIR/ca-key.pem)",
		Long: `Create a self-signed ECDSA P-256 CA: DIR/ca.pem (give it to every process as
--tls-ca) and DIR/ca-key.pem (mode 0600; keep it off the cluster's
machines, it signs every certificate). Existing files are not overwritten
unless --force is given.`,
		Example: `  coord tls ca create --dir ./tls`,
		Args:    cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			_, is, err := pki.NewCA(name, days, time.Now())
			if err != nil {
				return usageErrorf("%v", err)
			}
			cp, kp, err := pki.WriteFiles(dir, "ca", is, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA certificate %s\nCA key         %s\n", cp, kp)
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", ".", "directory to write the files in")
	fs.StringVar(&name, "name", "Logbook cluster CA", "the CA's subject common name")
	fs.IntVar(&days, "days", pki.DefaultCADays, "validity in days")
	fs.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func newTLSCertCreateCmd() *cobra.Command {
	var dir, caCert, caKey, name, role string
	var dns, ips []string
	var days int
	var force bool
	cmd := &cobra.Command{
		Use:   "create --name NAME --role coordinator|node|client [flags]",
		Short: "Create a certificate signed by the cluster CA (DIR/NAME.pem, DIR/NAME-key.pem)",
		Long: `Create an ECDSA P-256 certificate signed by the CA for one identity: a
coordinator (NAME is its --id), a storage node (its --id) or a client
(NAME is the user). Coordinator and node certificates serve and dial and
carry --dns and --ip as subject alternative names; without either they get
NAME, localhost, 127.0.0.1 and ::1, which suits a local cluster and a
compose network whose host names are the member ids. Client certificates
only dial. A certificate never outlives its CA.`,
		Example: `  coord tls cert create --ca tls/ca.pem --name coord1 --role coordinator --dns coord1.example.com --ip 10.0.0.1 --dir tls
  coord tls cert create --ca tls/ca.pem --name alice --role client --days 30 --dir tls`,
		Args: cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			r, err := pki.ParseRole(role)
			if err != nil {
				return usageErrorf("--role: %v", err)
			}
			req := pki.Request{Name: name, Role: r, DNS: cleanList(dns), Days: days}
			for _, s := range cleanList(ips) {
				ip := net.ParseIP(s)
				if ip == nil {
					return usageErrorf("--ip %q: not an IP address", s)
				}
				req.IPs = append(req.IPs, ip)
			}
			if caKey == "" {
				caKey = strings.TrimSuffix(caCert, ".pem") + "-key.pem"
			}
			ca, err := pki.LoadCA(caCert, caKey)
			if err != nil {
				return err
			}
			is, err := ca.Issue(req, time.Now())
			if err != nil {
				return usageErrorf("%v", err)
			}
			cp, kp, err := pki.WriteFiles(dir, name, is, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificate %s (%s %s)\nkey         %s\n", cp, r, name, kp)
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&caCert, "ca", filepath.Join(".", "ca.pem"), "the CA certificate")
	fs.StringVar(&caKey, "ca-key", "", "the CA key (default: --ca with -key.pem for .pem)")
	fs.StringVar(&name, "name", "", "member id or user name (required)")
	fs.StringVar(&role, "role", "", "coordinator, node or client (required)")
	fs.StringSliceVar(&dns, "dns", nil, "DNS names the certificate serves, comma-separated")
	fs.StringSliceVar(&ips, "ip", nil, "IP addresses the certificate serves, comma-separated")
	fs.IntVar(&days, "days", pki.DefaultCertDays, "validity in days")
	fs.StringVar(&dir, "dir", ".", "directory to write the files in")
	fs.BoolVar(&force, "force", false, "overwrite existing files")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

// certJSON is the JSON shape of coord tls cert show.
type certJSON struct {
	Subject   string   `json:"subject"`
	Role      string   `json:"role,omitempty"`
	Name      string   `json:"name,omitempty"`
	Issuer    string   `json:"issuer"`
	IsCA      bool     `json:"is_ca"`
	DNS       []string `json:"dns,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	NotBefore string   `json:"not_before"`
	NotAfter  string   `json:"not_after"`
	Expired   bool     `json:"expired"`
}

func newTLSCertShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show FILE",
		Short: "Print a certificate's identity, names and validity",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			certs, err := pki.ParseCerts(b)
			if err != nil {
				return err
			}
			c := certs[0]
			out := certJSON{Subject: c.Subject.String(), Issuer: c.Issuer.String(), IsCA: c.IsCA, DNS: c.DNSNames,
				NotBefore: c.NotBefore.UTC().Format(time.RFC3339), NotAfter: c.NotAfter.UTC().Format(time.RFC3339), Expired: time.Now().After(c.NotAfter)}
			for _, ip := range c.IPAddresses {
				out.IPs = append(out.IPs, ip.String())
			}
			if id, err := pki.IdentityOf(c); err == nil {
				out.Role, out.Name = string(id.Role), id.Name
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, out)
			}
			fmt.Fprintf(w, "subject     %s\n", out.Subject)
			if out.Role != "" {
				fmt.Fprintf(w, "identity    %s %s\n", out.Role, out.Name)
			} else if !out.IsCA {
				fmt.Fprintln(w, "identity    none (needs OU coordinator, node or client and a CN)")
			}
			fmt.Fprintf(w, "issuer      %s\nCA          %v\n", out.Issuer, out.IsCA)
			if len(out.DNS)+len(out.IPs) > 0 {
				fmt.Fprintf(w, "names       %s\n", strings.Join(append(append([]string{}, out.DNS...), out.IPs...), ", "))
			}
			state := "valid"
			if out.Expired {
				state = "EXPIRED"
			}
			fmt.Fprintf(w, "valid       %s to %s (%s)\n", out.NotBefore, out.NotAfter, state)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTLSInitCmd() *cobra.Command {
	var dir, caDir, gossipFile, tokenFile string
	var coords, nodes, clients []string
	var days int
	cmd := &cobra.Command{
		Use:   "init --dir DIR [--ca-dir CADIR] [--coordinator N,...] [--node N,...] [--client N,...] [--gossip-key-file F] [--acl-bootstrap-token-file F]",
		Short: "Make a cluster's CA and certificates once; keep any that exist",
		Long: `Make everything a cluster needs to run with TLS, once: DIR/ca.pem, and
NAME.pem and NAME-key.pem in DIR for every coordinator, node and client
named. The CA's key stays in CADIR (default DIR): give the members DIR
only. Files that exist are kept, so running it again (compose up) changes
nothing; the CA is only needed when a certificate is missing. Coordinator
and node certificates name their id, localhost, 127.0.0.1 and ::1, which
suits a compose network whose host names are the member ids.
--gossip-key-file and --acl-bootstrap-token-file make a fresh gossip key
(coord gossip keygen) and ACL bootstrap token (coord acl token gen) in
those files (mode 0600) when they are missing, for serve's flags of the
same names.`,
		Example: `  coord tls init --dir /tls --ca-dir /data --coordinator coord1,coord2,coord3 --client admin`,
		Args:    cliargs.None,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if caDir == "" {
				caDir = dir
			}
			type want struct {
				name string
				role pki.Role
			}
			var wants []want
			seen := map[string]bool{}
			for _, g := range []struct {
				names []string
				role  pki.Role
			}{{cleanList(coords), pki.RoleCoordinator}, {cleanList(nodes), pki.RoleNode}, {cleanList(clients), pki.RoleClient}} {
				for _, n := range g.names {
					if err := pki.ValidateName(n); err != nil {
						return usageErrorf("%v", err)
					}
					if n == "ca" || seen[n] {
						return usageErrorf("name %q given twice (or reserved)", n)
					}
					seen[n] = true
					wants = append(wants, want{n, g.role})
				}
			}
			w := cmd.OutOrStdout()
			exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
			for _, sec := range []struct {
				what, path string
				gen        func() (string, error)
			}{
				{"gossip key", gossipFile, func() (string, error) { return membership.EncodeKey(membership.GenerateKey()), nil }},
				{"acl token", tokenFile, func() (string, error) { t, err := authz.NewToken(); return t.String(), err }},
			} {
				switch {
				case sec.path == "":
				case exists(sec.path):
					fmt.Fprintf(w, "%-11s %s (kept)\n", sec.what, sec.path)
				default:
					v, err := sec.gen()
					if err == nil {
						err = durable.WriteFileMode(sec.path, []byte(v+"\n"), 0o600)
					}
					if err != nil {
						return fmt.Errorf("%s: %w", sec.what, err)
					}
					fmt.Fprintf(w, "%-11s %s (new)\n", sec.what, sec.path)
				}
			}
			caCert, caKey := pki.CertFile(caDir, "ca"), pki.KeyFile(caDir, "ca")
			dirCA := pki.CertFile(dir, "ca")
			missing := !exists(dirCA)
			for _, x := range wants {
				missing = missing || !exists(pki.CertFile(dir, x.name)) || !exists(pki.KeyFile(dir, x.name))
			}
			if !missing {
				fmt.Fprintf(w, "every file is in %s already: nothing to do\n", dir)
				return nil
			}
			var ca *pki.CA
			switch {
			case exists(caCert) && exists(caKey):
				var err error
				if ca, err = pki.LoadCA(caCert, caKey); err != nil {
					return err
				}
				fmt.Fprintf(w, "CA  %s (kept)\n", caCert)
			case exists(caCert) || exists(caKey) || (exists(dirCA) && dirCA != caCert):
				return fmt.Errorf("certificates are missing in %s and the CA that signs them is not complete in %s (want ca.pem and ca-key.pem)", dir, caDir)
			default:
				c, is, err := pki.NewCA("Logbook cluster CA", pki.DefaultCADays, time.Now())
				if err != nil {
					return err
				}
				if _, _, err := pki.WriteFiles(caDir, "ca", is, false); err != nil {
					return err
				}
				ca = c
				fmt.Fprintf(w, "CA  %s (new)\n", caCert)
			}
			if !exists(dirCA) {
				b, err := os.ReadFile(caCert)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(dirCA, b, 0o644); err != nil {
					return err
				}
			}
			for _, x := range wants {
				if exists(pki.CertFile(dir, x.name)) && exists(pki.KeyFile(dir, x.name)) {
					fmt.Fprintf(w, "%-11s %s (kept)\n", x.role, pki.CertFile(dir, x.name))
					continue
				}
				is, err := ca.Issue(pki.Request{Name: x.name, Role: x.role, Days: days}, time.Now())
				if err != nil {
					return usageErrorf("%v", err)
				}
				cp, _, err := pki.WriteFiles(dir, x.name, is, true)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%-11s %s (new)\n", x.role, cp)
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", ".", "directory of ca.pem and the certificates and keys")
	fs.StringVar(&caDir, "ca-dir", "", "directory of the CA's ca.pem and ca-key.pem (default --dir)")
	fs.StringSliceVar(&coords, "coordinator", nil, "coordinator ids, comma-separated")
	fs.StringSliceVar(&nodes, "node", nil, "storage node ids, comma-separated")
	fs.StringSliceVar(&clients, "client", nil, "client (user) names, comma-separated")
	fs.IntVar(&days, "days", pki.DefaultCertDays, "validity of new certificates in days")
	fs.StringVar(&gossipFile, "gossip-key-file", "", "make a gossip key in this file if it is missing")
	fs.StringVar(&tokenFile, "acl-bootstrap-token-file", "", "make an ACL bootstrap token in this file if it is missing")
	return cmd
}
