// Package gossipkeys is what coordinators and storage nodes share about
// gossip encryption: the --gossip-key and --gossip-keyring-file flags, and
// one member's side of a keyring operation (the Peer and DataNode
// GossipKeyring calls) with its errors as gRPC statuses.
package gossipkeys

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/membership"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Flags are the parsed gossip encryption flags.
type Flags struct {
	Key         string
	KeyFile     string
	KeyringFile string
}

// Add registers --gossip-key, --gossip-key-file and --gossip-keyring-file
// on fs.
func Add(fs *pflag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Key, "gossip-key", "", "encrypt gossip with this key: base64 of 16, 24 or 32 bytes (coord gossip keygen); every member needs it. With --gossip-keyring-file it only seeds a missing file")
	fs.StringVar(&f.KeyFile, "gossip-key-file", "", "read --gossip-key from this file (base64 on its first line): for containers that get secrets as files")
	fs.StringVar(&f.KeyringFile, "gossip-keyring-file", "", "gossip keyring file, a JSON array of base64 keys, primary first: read at start if it exists (it wins over --gossip-key), created from --gossip-key if not, and rewritten by every coord gossip keyring change so a restart keeps rotated keys")
	return f
}

// Seed returns the decoded --gossip-key (or the key in --gossip-key-file),
// nil when neither is given.
func (f *Flags) Seed() ([]byte, error) {
	key := f.Key
	if f.KeyFile != "" {
		if key != "" {
			return nil, errors.New("--gossip-key and --gossip-key-file: give one")
		}
		b, err := os.ReadFile(f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		key, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	if key == "" {
		return nil, nil
	}
	k, err := membership.ParseKey(strings.TrimSpace(key))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: %w", err)
	}
	return k, nil
}

// CheckFile validates the keyring file at path, if it exists, so that a
// bad one is a configuration error before anything starts (the servers'
// Config.Validate).
func CheckFile(path string) error {
	if _, err := membership.ReadKeyringFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--gossip-keyring-file: %w", err)
	}
	return nil
}

// Open returns the member's keyring from a keyring file and a seed key
// (membership.OpenKeyring); nil without either: gossip in clear.
func Open(path string, seed []byte, log *slog.Logger) (*membership.Keyring, error) {
	var seeds [][]byte
	if len(seed) > 0 {
		seeds = [][]byte{seed}
	}
	return membership.OpenKeyring(path, seeds, log)
}

// Apply performs op with key on kr, one member's side of GossipKeyring,
// and returns the keys after it. Errors are gRPC statuses: bad input
// InvalidArgument (and nothing changes), a key not installed, removal of
// the primary and a member in clear FailedPrecondition.
func Apply(kr *membership.Keyring, log *slog.Logger, op pb.GossipKeyringOp, key []byte) ([][]byte, error) {
	if kr == nil {
		return nil, status.Error(codes.FailedPrecondition, membership.ErrNotEncrypted.Error())
	}
	var err error
	switch op {
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST:
		return kr.Keys(), nil
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL:
		err = kr.Install(key)
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE:
		err = kr.Use(key)
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE:
		err = kr.Remove(key)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "gossip keyring: unknown operation %v", op)
	}
	if err != nil {
		return nil, Status(err)
	}
	log.Info("gossip keyring changed", "op", OpName(op), "keys", len(kr.Keys()), "file", kr.Path())
	return kr.Keys(), nil
}

// Status maps a membership keyring error to a gRPC status.
func Status(err error) error {
	switch {
	case errors.Is(err, membership.ErrInvalidKey), errors.Is(err, membership.ErrKeyringFull):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, membership.ErrKeyNotInstalled), errors.Is(err, membership.ErrRemovePrimary),
		errors.Is(err, membership.ErrNotEncrypted):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Errorf(codes.Internal, "gossip keyring: %v", err)
}

// OpName is the CLI's name of op.
func OpName(op pb.GossipKeyringOp) string {
	switch op {
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_LIST:
		return "list"
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_INSTALL:
		return "install"
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_USE:
		return "use"
	case pb.GossipKeyringOp_GOSSIP_KEYRING_OP_REMOVE:
		return "remove"
	}
	return op.String()
}
