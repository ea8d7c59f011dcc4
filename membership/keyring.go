package membership

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	_ "unsafe" // go:linkname

	"github.com/hashicorp/memberlist"
	"github.com/logbookhq/logbook/internal/durable"
)

// MaxKeys bounds a keyring: a rotation needs two keys, a few more cover
// overlapping ones; memberlist tries every installed key on every packet it
// cannot decrypt with the primary.
const MaxKeys = 16

// Keyring errors. Callers match them with errors.Is.
var (
	// ErrInvalidKey: not base64, not 16, 24 or 32 bytes, a duplicate, or
	// an empty or malformed list of keys.
	ErrInvalidKey = errors.New("invalid gossip key")
	// ErrKeyNotInstalled: Use of a key the keyring does not hold.
	ErrKeyNotInstalled = errors.New("gossip key is not installed")
	// ErrRemovePrimary: Remove of the key in use.
	ErrRemovePrimary = errors.New("the primary gossip key cannot be removed; use another key first")
	// ErrKeyringFull: Install beyond MaxKeys keys.
	ErrKeyringFull = fmt.Errorf("the gossip keyring holds at most %d keys", MaxKeys)
	// ErrNotEncrypted: keyring operations on a member gossiping in clear.
	ErrNotEncrypted = errors.New("gossip is not encrypted on this member (no gossip key configured)")
)

// Keyring is the set of gossip keys of one member, primary first: the
// primary encrypts what the member sends, every key is tried on what it
// receives (memberlist's Keyring, Consul's keyring semantics). With a file
// every change is written to it (fsync, atomic rename) before it takes
// effect, so a restart keeps a rotation. One Keyring may serve successive
// Memberlists of a process. Its methods are safe for concurrent use.
type Keyring struct {
	mu   sync.Mutex // serialises changes: memberlist's Keyring only locks its own fields
	ring *memberlist.Keyring
	path string
}

// GenerateKey returns a fresh random 32-byte (AES-256) key.
func GenerateKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return k
}

// EncodeKey is the text form of a key: standard base64, as Consul's.
func EncodeKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

// ParseKey decodes and checks the base64 text of a key.
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %v", ErrInvalidKey, err)
	}
	if err := checkKey(k); err != nil {
		return nil, err
	}
	return k, nil
}

func checkKey(k []byte) error {
	if err := memberlist.ValidateKey(k); err != nil {
		return fmt.Errorf("%w: %d bytes, want 16, 24 or 32", ErrInvalidKey, len(k))
	}
	return nil
}

// ValidateKeys checks a keyring's keys: at least one, at most MaxKeys, each
// 16, 24 or 32 bytes, no duplicates.
func ValidateKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: the keyring is empty", ErrInvalidKey)
	}
	if len(keys) > MaxKeys {
		return fmt.Errorf("%w: %d keys, at most %d", ErrInvalidKey, len(keys), MaxKeys)
	}
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("key %d: %w", i+1, err)
		}
		for _, o := range keys[:i] {
			if bytes.Equal(o, k) {
				return fmt.Errorf("%w: key %d is a duplicate", ErrInvalidKey, i+1)
			}
		}
	}
	return nil
}

// ParseKeyringFile decodes a keyring file: a JSON array of base64 keys,
// primary first (Consul's local.keyring).
func ParseKeyringFile(data []byte) ([][]byte, error) {
	var texts []string
	if err := json.Unmarshal(data, &texts); err != nil {
		return nil, fmt.Errorf("%w: want a JSON array of base64 keys: %v", ErrInvalidKey, err)
	}
	keys := make([][]byte, len(texts))
	for i, s := range texts {
		k, err := ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		keys[i] = k
	}
	if err := ValidateKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// ReadKeyringFile reads and checks a keyring file; a missing file is
// reported as fs.ErrNotExist.
func ReadKeyringFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeyringFile(data)
	if err != nil {
		return nil, fmt.Errorf("keyring file %s: %w", path, err)
	}
	return keys, nil
}

// WriteKeyringFile replaces path with keys (0600, fsynced, renamed into
// place, directory fsynced).
func WriteKeyringFile(path string, keys [][]byte) error {
	texts := make([]string, len(keys))
	for i, k := range keys {
		texts[i] = EncodeKey(k)
	}
	data, _ := json.MarshalIndent(texts, "", "  ")
	data = append(data, '\n')
	if err := durable.WriteFileMode(path, data, 0o600); err != nil {
		return fmt.Errorf("write keyring file: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write keyring file: %w", err)
	}
	return nil
}

// NewKeyring returns an in-memory keyring of keys, primary first.
func NewKeyring(keys [][]byte) (*Keyring, error) {
	if err := ValidateKeys(keys); err != nil {
		return nil, err
	}
	keys = cloneKeys(keys)
	ring, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return &Keyring{ring: ring}, nil
}

// OpenKeyring returns the keyring of the file at path, or, when the file
// does not exist, a keyring of seed written to it. A file that exists wins
// over seed: if seed's primary is not the file's primary a warning says so
// (the file holds the keys rotated since). Without a file and without seed
// it returns nil: gossip in clear. An empty path means no file (seed alone).
func OpenKeyring(path string, seed [][]byte, log *slog.Logger) (*Keyring, error) {
	if log == nil {
		log = slog.Default()
	}
	if len(seed) > 0 {
		if err := ValidateKeys(seed); err != nil {
			return nil, err
		}
	}
	if path == "" {
		if len(seed) == 0 {
			return nil, nil
		}
		return NewKeyring(seed)
	}
	keys, err := ReadKeyringFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(seed) == 0 {
			return nil, nil
		}
		if err := WriteKeyringFile(path, seed); err != nil {
			return nil, err
		}
		log.Info("membership: gossip keyring file created from the gossip key", "file", path)
		keys = seed
	case err != nil:
		return nil, err
	case len(seed) > 0 && !bytes.Equal(seed[0], keys[0]):
		log.Warn("membership: the gossip key differs from the keyring file's primary key; the file wins (it holds the keys rotated since)",
			"file", path, "gossip_key_installed", slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, seed[0]) }))
	}
	kr, err := NewKeyring(keys)
	if err != nil {
		return nil, err
	}
	kr.path = path
	return kr, nil
}

// Path is the keyring's file, "" for none.
func (k *Keyring) Path() string { return k.path }

// Keys returns copies of the keys, primary first.
func (k *Keyring) Keys() [][]byte {
	return cloneKeys(k.ring.GetKeys())
}

// Primary returns a copy of the key in use.
func (k *Keyring) Primary() []byte { return slices.Clone(k.ring.GetPrimaryKey()) }

// Install adds key for decryption; the primary stays. Installing a key the
// keyring holds is a no-op.
func (k *Keyring) Install(key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.ring.GetKeys()
	if containsKey(cur, key) {
		return nil
	}
	if len(cur) >= MaxKeys {
		return ErrKeyringFull
	}
	return k.replace(append(cloneKeys(cur), slices.Clone(key)))
}

// Use makes an installed key the primary.
func (k *Keyring) Use(key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.ring.GetKeys()
	if !containsKey(cur, key) {
		return ErrKeyNotInstalled
	}
	if bytes.Equal(cur[0], key) {
		return nil
	}
	next := [][]byte{key}
	for _, c := range cur {
		if !bytes.Equal(c, key) {
			next = append(next, c)
		}
	}
	return k.replace(cloneKeys(next))
}

// Remove drops a key that is not the primary. Removing a key the keyring
// does not hold is a no-op, so a repeated rotation step succeeds.
func (k *Keyring) Remove(key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.ring.GetKeys()
	if bytes.Equal(cur[0], key) {
		return ErrRemovePrimary
	}
	if !containsKey(cur, key) {
		return nil
	}
	return k.replace(slices.DeleteFunc(cloneKeys(cur), func(c []byte) bool { return bytes.Equal(c, key) }))
}

// replace writes keys (primary first, fresh slices nobody else holds) to
// the file, if there is one, then makes them the ring's. A failed write
// changes nothing.
func (k *Keyring) replace(keys [][]byte) error {
	if k.path != "" {
		if err := WriteKeyringFile(k.path, keys); err != nil {
			return err
		}
	}
	ringInstallKeys(k.ring, keys, keys[0])
	return nil
}

// ringInstallKeys is memberlist v0.5.4's (*Keyring).installKeys, which
// swaps in a new key slice under the ring's lock. Its public RemoveKey
// instead shifts the keys in place, inside the slice GetKeys has handed
// to goroutines decrypting packets at that moment: a data race. Building
// every new key list here and installing it whole avoids it. A memberlist
// upgrade that renames the method fails the build, not at run time.
//
//go:linkname ringInstallKeys github.com/hashicorp/memberlist.(*Keyring).installKeys
func ringInstallKeys(k *memberlist.Keyring, keys [][]byte, primaryKey []byte)

func containsKey(keys [][]byte, key []byte) bool {
	return slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) })
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = slices.Clone(k)
	}
	return out
}

// Keyring returns the member's keyring, nil when gossip is in clear.
func (m *Memberlist) Keyring() *Keyring { return m.keyring }

// ListKeys returns the installed keys, primary first.
func (m *Memberlist) ListKeys() ([][]byte, error) {
	if m.keyring == nil {
		return nil, ErrNotEncrypted
	}
	return m.keyring.Keys(), nil
}

// InstallKey adds key to the keyring (Keyring.Install).
func (m *Memberlist) InstallKey(key []byte) error {
	return m.keyringOp("install", key, (*Keyring).Install)
}

// UseKey makes an installed key the primary (Keyring.Use).
func (m *Memberlist) UseKey(key []byte) error { return m.keyringOp("use", key, (*Keyring).Use) }

// RemoveKey drops a key that is not the primary (Keyring.Remove).
func (m *Memberlist) RemoveKey(key []byte) error {
	return m.keyringOp("remove", key, (*Keyring).Remove)
}

func (m *Memberlist) keyringOp(op string, key []byte, fn func(*Keyring, []byte) error) error {
	if m.keyring == nil {
		return ErrNotEncrypted
	}
	if err := fn(m.keyring, key); err != nil {
		return err
	}
	m.log.Info("membership: gossip keyring changed", "op", op, "keys", len(m.keyring.Keys()))
	return nil
}
