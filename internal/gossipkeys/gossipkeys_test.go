package gossipkeys

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/membership"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestApplyCodes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b := membership.GenerateKey(), membership.GenerateKey()
	kr, err := membership.NewKeyring([][]byte{a})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kr   *membership.Keyring
		op   pb.GossipKeyringOp
		key  []byte
		want codes.Code
	}{
		{"in clear", nil, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST, nil, codes.FailedPrecondition},
		{"unknown op", kr, pb.GossipKeyringOp(9), a, codes.InvalidArgument},
		{"unspecified op", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_UNSPECIFIED, a, codes.InvalidArgument},
		{"bad length", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, make([]byte, 5), codes.InvalidArgument},
		{"use not installed", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE, b, codes.FailedPrecondition},
		{"remove primary", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE, a, codes.FailedPrecondition},
		{"install", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL, b, codes.OK},
		{"use", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE, b, codes.OK},
		{"remove", kr, pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE, a, codes.OK},
	} {
		keys, err := Apply(tc.kr, log, tc.op, tc.key)
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if err == nil && len(keys) == 0 {
			t.Errorf("%s: no keys returned", tc.name)
		}
	}
	if keys := kr.Keys(); len(keys) != 1 || string(keys[0]) != string(b) {
		t.Fatalf("keys after the rotation: %x", keys)
	}
}

func TestFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f := Add(fs)
	path := filepath.Join(t.TempDir(), "k.json")
	key := membership.EncodeKey(membership.GenerateKey())
	if err := fs.Parse([]string{"--gossip-key", key, "--gossip-keyring-file", path}); err != nil {
		t.Fatal(err)
	}
	if k, err := f.Seed(); err != nil || membership.EncodeKey(k) != key {
		t.Fatalf("Seed = %x, %v", k, err)
	}
	if err := CheckFile(f.KeyringFile); err != nil { // a missing file is fine: it is seeded
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(path); err == nil || !strings.Contains(err.Error(), "--gossip-keyring-file") {
		t.Fatalf("malformed file: %v", err)
	}
	f.Key = "AAAA"
	if _, err := f.Seed(); err == nil || !strings.Contains(err.Error(), "--gossip-key") {
		t.Fatalf("short key: %v", err)
	}
	f.Key = ""
	if k, err := f.Seed(); k != nil || err != nil {
		t.Fatalf("no key: %x, %v", k, err)
	}
	// From a file, as containers get secrets.
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte("  "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.KeyFile = keyFile
	if k, err := f.Seed(); err != nil || membership.EncodeKey(k) != key {
		t.Fatalf("key file: %x, %v", k, err)
	}
	f.Key = key
	if _, err := f.Seed(); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Fatalf("key and key file: %v", err)
	}
	f.Key, f.KeyFile = "", filepath.Join(t.TempDir(), "missing")
	if _, err := f.Seed(); err == nil || !strings.Contains(err.Error(), "--gossip-key-file") {
		t.Fatalf("missing key file: %v", err)
	}
}
