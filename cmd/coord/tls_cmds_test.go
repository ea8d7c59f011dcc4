package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/poll"
	"github.com/logbookhq/logbook/internal/tlsflag"
)

func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	if code, out, stderr := run(t, nil, "tls", "ca", "create", "--dir", dir); code != 0 || !strings.Contains(out, "ca.pem") {
		t.Fatalf("ca create: exit %d %s %s", code, out, stderr)
	}
	if st, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v, %v", st, err)
	}
	ca := filepath.Join(dir, "ca.pem")
	for _, c := range []struct{ name, role string }{{"coord1", "coordinator"}, {"node1", "node"}, {"alice", "client"}} {
		if code, out, stderr := run(t, nil, "tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", c.name, "--role", c.role, "--ip", "10.1.2.3"); code != 0 {
			t.Fatalf("cert create %s: exit %d %s %s", c.name, code, out, stderr)
		}
		code, out, _ := run(t, nil, "tls", "cert", "show", "--json", filepath.Join(dir, c.name+".pem"))
		var got certJSON
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("cert show %s: exit %d %v %s", c.name, code, err, out)
		}
		if got.Role != c.role || got.Name != c.name || got.Expired || got.IsCA || len(got.IPs) != 1 || got.IPs[0] != "10.1.2.3" {
			t.Fatalf("cert show %s: %+v", c.name, got)
		}
	}
	// Refusals: nothing is written.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tls", "ca", "create", "--dir", dir}, 1, "refusing to overwrite"},
		{[]string{"tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", "alice", "--role", "client"}, 1, "refusing to overwrite"},
		{[]string{"tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", "bob", "--role", "root"}, 2, "want coordinator, node or client"},
		{[]string{"tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", "bob", "--role", "client", "--ip", "nope"}, 2, "not an IP address"},
		{[]string{"tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", "b/ob", "--role", "client"}, 2, "without spaces or slashes"},
		{[]string{"tls", "cert", "create", "--ca", ca, "--dir", dir, "--name", "bob", "--role", "client", "--days", "0"}, 2, "days 0"},
		{[]string{"tls", "cert", "create", "--ca", filepath.Join(dir, "alice.pem"), "--dir", dir, "--name", "bob", "--role", "client"}, 1, "not a CA"},
		{[]string{"tls", "cert", "create", "--dir", dir, "--role", "client"}, 2, "name"},
	} {
		code, _, stderr := run(t, nil, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d %q, want %d with %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bob.pem")); err == nil {
		t.Error("a refused cert create wrote bob.pem")
	}
}

// TestSecureDevCluster: coord dev --secure runs TLS everywhere; the CLI
// with the printed variables works, without a certificate it is refused.
func TestSecureDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d, err := startDevFreePorts(t, devOptions{Members: 1, Nodes: 1, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := d.waitReady(wctx); err != nil {
		t.Fatal(err)
	}
	f, err := d.c.TLS().Files(coordserver.ClusterUser, pki.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	ep := d.endpoints()[0]
	env := map[string]string{"LOGBOOK_TLS_CERT": f.Cert, "LOGBOOK_TLS_KEY": f.Key, "LOGBOOK_TLS_CA": f.CA}
	if code, out, stderr := run(t, env, "journal", "append", "--endpoints", ep, "--type", "t", "--payload", "p"); code != 0 || !strings.Contains(out, "appended seq") {
		t.Fatalf("append with the admin certificate: exit %d %s %s", code, out, stderr)
	}
	code, _, stderr := run(t, map[string]string{"LOGBOOK_TLS_CA": f.CA}, "journal", "append", "--endpoints", ep, "--type", "t", "--payload", "p")
	if code != 1 || !strings.Contains(stderr, "Unauthenticated") {
		t.Fatalf("append without a certificate: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, map[string]string{"LOGBOOK_TLS_CA": f.CA}, "health", "--endpoints", ep); code != 0 {
		t.Fatalf("health with the CA only: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, map[string]string{"LOGBOOK_TLS_CERT": f.Cert}, "status", "--endpoints", ep); code != 2 || !strings.Contains(stderr, "--tls-ca") {
		t.Fatalf("a certificate without a CA: exit %d %s", code, stderr)
	}
	code, out, _ := run(t, env, "journal", "read", "--endpoints", ep, "--from", "1", "--json")
	if code != 0 || strings.Count(out, `"type": "t"`) != 1 {
		t.Fatalf("read: exit %d %s (want exactly the one admin append)", code, out)
	}

	// ACLs are on and bootstrapped: the token in tls/admin.token is the
	// admin's, alone (with the CA) it is enough.
	tokenEnv := map[string]string{"LOGBOOK_TLS_CA": f.CA, "LOGBOOK_TOKEN_FILE": d.tokenFile}
	if code, out, stderr := run(t, tokenEnv, "acl", "whoami", "--endpoints", ep); code != 0 || !strings.Contains(out, `user "admin" (token)`) || !strings.Contains(out, "roles: admin") {
		t.Fatalf("whoami with the admin token: exit %d %s %s", code, out, stderr)
	}
	// The token alone reaches block data too: the storage node takes the
	// block access tokens the coordinator hands out.
	local := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(local, bytes.Repeat([]byte("secure dev "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if !poll.Within(60*time.Second, func() bool {
		known, required, keys := d.c.Node(0).BlockKeys()
		return known && required && keys > 0
	}) {
		t.Fatal("the node never received block keys")
	}
	if code, _, stderr := run(t, tokenEnv, "fs", "put", "--endpoints", ep, local, "/secure/f"); code != 0 {
		t.Fatalf("fs put with the token: exit %d %s", code, stderr)
	}
	if code, out, stderr := run(t, tokenEnv, "fs", "cat", "--endpoints", ep, "/secure/f"); code != 0 || out != strings.Repeat("secure dev ", 1000) {
		t.Fatalf("fs cat with the token: exit %d, %d bytes, %s", code, len(out), stderr)
	}
	code, out, stderr = run(t, tokenEnv, "acl", "token", "create", "--endpoints", ep, "--user", "rita", "--json")
	if code != 0 {
		t.Fatalf("token create: exit %d %s", code, stderr)
	}
	var made struct {
		Secret string         `json:"secret"`
		Token  map[string]any `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil || !strings.HasPrefix(made.Secret, "lbt_") {
		t.Fatalf("token create --json: %v %s", err, out)
	}
	if code, _, stderr := run(t, tokenEnv, "acl", "bind", "--endpoints", ep, "rita", "reader"); code != 0 {
		t.Fatalf("bind: exit %d %s", code, stderr)
	}
	rita := map[string]string{"LOGBOOK_TLS_CA": f.CA, "LOGBOOK_TOKEN": made.Secret}
	if code, _, stderr := run(t, rita, "journal", "append", "--endpoints", ep, "--type", "t", "--payload", "p"); code != 1 || !strings.Contains(stderr, "PermissionDenied") || !strings.Contains(stderr, `user \"rita\" lacks write`) && !strings.Contains(stderr, `user "rita" lacks write`) {
		t.Fatalf("a reader appends: exit %d %s", code, stderr)
	}
	if code, out, stderr := run(t, rita, "journal", "read", "--endpoints", ep, "--from", "1"); code != 0 || !strings.Contains(out, "logbook.acl.bootstrap") {
		t.Fatalf("a reader reads: exit %d %s %s", code, out, stderr)
	}
	if code, out, _ := run(t, tokenEnv, "acl", "token", "ls", "--endpoints", ep); code != 0 || !strings.Contains(out, "rita") || strings.Contains(out, made.Secret) {
		t.Fatalf("token ls: exit %d %s", code, out)
	}
	if code, out, _ := run(t, tokenEnv, "acl", "role", "ls", "--endpoints", ep); code != 0 || !strings.Contains(out, "reader (built in)") || !strings.Contains(out, "rita") {
		t.Fatalf("role ls: exit %d %s", code, out)
	}
	if code, _, stderr := run(t, tokenEnv, "acl", "role", "put", "--endpoints", ep, "x", "--grant", "root:all"); code != 2 || !strings.Contains(stderr, "grant level") {
		t.Fatalf("a bad grant: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, tokenEnv, "acl", "role", "put", "--endpoints", ep, "orders", "--grant", "write:journal:app.orders."); code != 0 {
		t.Fatalf("role put: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, map[string]string{"LOGBOOK_TOKEN": made.Secret}, "status", "--endpoints", ep); code != 2 || !strings.Contains(stderr, "a token needs TLS") {
		t.Fatalf("a token without TLS: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, tokenEnv, "acl", "bootstrap", "--endpoints", ep); code != 1 || !strings.Contains(stderr, "ALREADY_BOOTSTRAPPED") {
		t.Fatalf("a second bootstrap: exit %d %s", code, stderr)
	}
	acc, _ := made.Token["accessor"].(string)
	if code, _, stderr := run(t, tokenEnv, "acl", "token", "revoke", "--endpoints", ep, acc); code != 0 {
		t.Fatalf("revoke: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, rita, "journal", "read", "--endpoints", ep, "--from", "1"); code != 1 || !strings.Contains(stderr, "TOKEN_UNKNOWN") {
		t.Fatalf("a revoked token: exit %d %s", code, stderr)
	}
}

func TestExplainTLSMismatch(t *testing.T) {
	plain := &clientOpts{tls: &tlsflag.Flags{}}
	secure := &clientOpts{tls: &tlsflag.Flags{Files: pki.Files{CA: "ca.pem"}}}
	preface := errors.New(`Unavailable: connection error: desc = "error reading server preface: EOF"`)
	record := errors.New(`Unavailable: tls: first record does not look like a TLS handshake`)
	for _, c := range []struct {
		o    *clientOpts
		err  error
		hint string
	}{
		{plain, preface, "give --tls-ca"},
		{secure, record, "drop the --tls-* flags"},
		{secure, preface, ""},
		{plain, record, ""},
	} {
		got := c.o.explain(c.err).Error()
		if c.hint == "" && got != c.err.Error() || c.hint != "" && !strings.Contains(got, c.hint) {
			t.Errorf("explain(%q) with TLS %v = %q, want hint %q", c.err, c.o.tls.Set(), got, c.hint)
		}
	}
}

// TestTLSInit: tls init makes the CA (its key apart) and every certificate
// once, keeps what exists, re-issues only a missing one, and refuses to
// issue without the CA that signed the directory's ca.pem.
func TestTLSInit(t *testing.T) {
	root := t.TempDir()
	dir, caDir := filepath.Join(root, "tls"), filepath.Join(root, "ca")
	args := []string{"tls", "init", "--dir", dir, "--ca-dir", caDir, "--coordinator", "coord1,coord2", "--node", "node1", "--client", "admin"}
	if code, out, stderr := run(t, nil, args...); code != 0 || strings.Count(out, "(new)") != 5 {
		t.Fatalf("init: exit %d %s %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err == nil {
		t.Fatal("the CA key is in --dir")
	}
	for _, n := range []string{"coord1", "coord2", "node1", "admin"} {
		if st, err := os.Stat(pki.KeyFile(dir, n)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key of %s: %v, %v", n, st, err)
		}
	}
	code, out, _ := run(t, nil, "tls", "cert", "show", "--json", pki.CertFile(dir, "node1"))
	var got certJSON
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Role != "node" || got.Name != "node1" || !slices.Contains(got.DNS, "node1") || !slices.Contains(got.IPs, "127.0.0.1") {
		t.Fatalf("node1: exit %d %v %+v", code, err, got)
	}
	before, _ := os.ReadFile(pki.CertFile(dir, "coord1"))
	if code, out, stderr := run(t, nil, args...); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("init again: exit %d %s %s", code, out, stderr)
	}
	if err := os.Remove(pki.CertFile(dir, "coord2")); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, nil, args...); code != 0 || strings.Count(out, "(new)") != 1 || !strings.Contains(out, "coord2.pem (new)") {
		t.Fatalf("init with coord2 missing: exit %d %s %s", code, out, stderr)
	}
	if after, _ := os.ReadFile(pki.CertFile(dir, "coord1")); string(after) != string(before) {
		t.Fatal("init replaced an existing certificate")
	}
	if err := os.RemoveAll(caDir); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, nil, append(args, "--client", "bob")...); code != 1 || !strings.Contains(stderr, "CA that signs them") {
		t.Fatalf("init without the CA: exit %d %s", code, stderr)
	}

	// The secrets beside the certificates: made once, kept after.
	gk, tk := filepath.Join(dir, "gossip.key"), filepath.Join(dir, "acl.token")
	secrets := append(args, "--gossip-key-file", gk, "--acl-bootstrap-token-file", tk)
	if code, out, stderr := run(t, nil, secrets...); code != 0 || strings.Count(out, "(new)") != 2 {
		t.Fatalf("init with secrets: exit %d %s %s", code, out, stderr)
	}
	first, _ := os.ReadFile(tk)
	if _, err := authz.ParseToken(strings.TrimSpace(string(first))); err != nil {
		t.Fatalf("bootstrap token %q: %v", first, err)
	}
	for _, p := range []string{gk, tk} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, st, err)
		}
	}
	if code, out, _ := run(t, nil, secrets...); code != 0 || strings.Count(out, "(kept)") != 2 {
		t.Fatalf("init with secrets again: exit %d %s", code, out)
	}
	if again, _ := os.ReadFile(tk); string(again) != string(first) {
		t.Fatal("init replaced the bootstrap token")
	}
}
