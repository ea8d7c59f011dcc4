package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/testports"
	"github.com/logbookhq/logbook/membership"
)

// gossipFlagCases are bad --gossip-key / --gossip-keyring-file values and
// what the configuration error must say; shared with cmd/node's test in
// spirit (the flags are internal/gossipkeys').
func gossipFlagCases(t *testing.T) map[string]struct {
	args []string
	want string
} {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := membership.EncodeKey(make([]byte, 32))
	return map[string]struct {
		args []string
		want string
	}{
		"key not base64":  {[]string{"--gossip-key", "not base64!"}, "--gossip-key: invalid gossip key: not base64"},
		"key length":      {[]string{"--gossip-key", membership.EncodeKey(make([]byte, 20))}, "--gossip-key: invalid gossip key: 20 bytes, want 16, 24 or 32"},
		"malformed JSON":  {[]string{"--gossip-keyring-file", file("bad.json", `["`+k)}, "want a JSON array of base64 keys"},
		"empty keyring":   {[]string{"--gossip-keyring-file", file("empty.json", `[]`)}, "the keyring is empty"},
		"duplicate keys":  {[]string{"--gossip-keyring-file", file("dup.json", `["`+k+`","`+k+`"]`)}, "key 2 is a duplicate"},
		"bad key in file": {[]string{"--gossip-keyring-file", file("short.json", `["AAAA"]`)}, "key 1: invalid gossip key: 3 bytes"},
		"unreadable file": {[]string{"--gossip-keyring-file", dir}, "--gossip-keyring-file"},
	}
}

func TestServeGossipFlagErrors(t *testing.T) {
	base := []string{"--id", "c1", "--data-dir", t.TempDir()}
	for name, tc := range gossipFlagCases(t) {
		_, err := serveConfig(append(base, tc.args...), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
		if code, _, stderr := run(t, nil, append(append([]string{"serve"}, base...), tc.args...)...); code != 2 || !strings.Contains(stderr, "invalid configuration") {
			t.Errorf("%s: serve exit %d, stderr %q; want 2", name, code, stderr)
		}
	}
	if code, _, stderr := run(t, map[string]string{"LOGBOOK_GOSSIP_KEY": "short"}, append([]string{"serve"}, base...)...); code != 2 || !strings.Contains(stderr, "--gossip-key") {
		t.Errorf("LOGBOOK_GOSSIP_KEY: exit %d, stderr %q", code, stderr)
	}

	key := membership.GenerateKey()
	path := filepath.Join(t.TempDir(), "gossip.keyring")
	cfg, err := serveConfig(append(base, "--gossip-key", membership.EncodeKey(key), "--gossip-keyring-file", path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Security.GossipKey, key) || cfg.Security.GossipKeyringFile != path {
		t.Fatalf("security %+v", cfg.Security)
	}
}

func TestGossipKeygen(t *testing.T) {
	code, out, _ := run(t, nil, "gossip", "keygen")
	k, err := membership.ParseKey(strings.TrimSpace(out))
	if code != 0 || err != nil || len(k) != 32 {
		t.Fatalf("keygen: exit %d, %q: %v", code, out, err)
	}
	_, again, _ := run(t, nil, "gossip", "keygen")
	if again == out {
		t.Fatal("keygen printed the same key twice")
	}
}

func TestGossipKeyringUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"gossip", "keyring", "install"},
		{"gossip", "keyring", "install", "not base64!"},
		{"gossip", "keyring", "use", membership.EncodeKey(make([]byte, 7))},
		{"gossip", "keyring", "remove", "a", "b"},
		{"gossip", "keyring", "list", "extra"},
		{"gossip", "keygen", "extra"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 2 || !strings.HasPrefix(stderr, "coord: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// goldenKeyring is a list after an install that missed a storage node.
func goldenKeyring() client.KeyringResult {
	a, b := "QUFBQUFBQUFBQUFBQUFBQQ==", "QkJCQkJCQkJCQkJCQkJCQg=="
	return client.KeyringResult{ResponderID: "c1", Total: 4, Failed: 1,
		Keys: []client.KeyringKey{{Key: a, Members: 3, Primary: 3}, {Key: b, Members: 2}},
		Members: []client.KeyringMember{
			{ID: "c1", Role: "coordinator", OK: true, Keys: []string{a, b}},
			{ID: "c2", Role: "coordinator", OK: true, Keys: []string{a, b}},
			{ID: "n1", Role: "node", OK: true, Keys: []string{a}},
			{ID: "n2", Role: "node", Error: "Unavailable: connection refused"},
		}}
}

func TestKeyringOutput(t *testing.T) {
	var b strings.Builder
	if err := writeKeyring(&b, "list", goldenKeyring()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "coord gossip keyring list", b.String(), `gossip keyring list: 3 of 4 members ok (answered by c1)

Keys:
  QUFBQUFBQUFBQUFBQUFBQQ== (3/4, primary on 3)
  QkJCQkJCQkJCQkJCQkJCQg== (2/4)

ID  ROLE         RESULT  KEYS  PRIMARY                   ERROR
c1  coordinator  ok      2     QUFBQUFBQUFBQUFBQUFBQQ==  -
c2  coordinator  ok      2     QUFBQUFBQUFBQUFBQUFBQQ==  -
n1  node         ok      1     QUFBQUFBQUFBQUFBQUFBQQ==  -
n2  node         FAILED  0     -                         Unavailable: connection refused
`)
	var j map[string]any
	var sb strings.Builder
	if err := writeJSON(&sb, toKeyringJSON("list", goldenKeyring())); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, sb.String(), &j)
	if k := jsonKeys(j); !reflect.DeepEqual(k, []string{"answered_by", "failed", "keys", "members", "op", "total"}) {
		t.Fatalf("json keys %v", k)
	}
}

// TestKeyringCommands runs coord gossip keyring against a one-coordinator
// cluster gossiping encrypted: list, a refused use, install, use, remove.
func TestKeyringCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator")
	}
	key, dir := membership.GenerateKey(), t.TempDir()
	c, err := coordserver.StartCluster(coordserver.ClusterOptions{
		Coordinators: 1, Dir: dir, ClusterID: "keys", CoordinatorPrefix: "c",
		Ports: coordserver.PortsFrom(func(udp bool) string { return testports.Addr(t, udp) }),
		Coordinator: func(_ int, cfg *coordserver.Config) {
			cfg.Security.GossipKey = key
			cfg.Security.GossipKeyringFile = filepath.Join(dir, "c1.keyring")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	eps := "--endpoints=" + strings.Join(c.Endpoints(), ",")
	coord := coordRunner(t)
	old, next := membership.EncodeKey(key), membership.EncodeKey(membership.GenerateKey())

	out, _ := coord(0, "gossip", "keyring", "list", eps)
	if !strings.Contains(out, old+" (1/1, primary on 1)") || !strings.Contains(out, "1 of 1 members ok") {
		t.Fatalf("list: %q", out)
	}
	out, stderr := coord(1, "gossip", "keyring", "use", next, eps)
	if !strings.Contains(out, "not installed") || !strings.Contains(stderr, "failed on 1 of 1 members") {
		t.Fatalf("use before install: %q %q", out, stderr)
	}
	coord(0, "gossip", "keyring", "install", next, eps)
	coord(0, "gossip", "keyring", "use", next, eps)
	_, stderr = coord(1, "gossip", "keyring", "remove", next, eps)
	if !strings.Contains(stderr, "FailedPrecondition") && !strings.Contains(stderr, "primary") {
		t.Fatalf("remove of the primary: %q", stderr)
	}
	coord(0, "gossip", "keyring", "remove", old, eps)
	out, _ = coord(0, "gossip", "keyring", "list", "--json", eps)
	var j keyringJSON
	decodeJSON(t, out, &j)
	if len(j.Keys) != 1 || j.Keys[0].Key != next || j.Total != 1 || j.Failed != 0 || j.Members[0].ID != "c1" {
		t.Fatalf("list --json: %s", out)
	}
	if keys, err := membership.ReadKeyringFile(filepath.Join(dir, "c1.keyring")); err != nil || len(keys) != 1 || membership.EncodeKey(keys[0]) != next {
		t.Fatalf("keyring file after the rotation: %v, %v", keys, err)
	}
}
