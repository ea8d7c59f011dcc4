package membership

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func keyN(n byte, size int) []byte { return bytes.Repeat([]byte{n}, size) }

func TestKeyringOps(t *testing.T) {
	a, b, c := keyN(1, 32), keyN(2, 16), keyN(3, 24)
	kr, err := NewKeyring([][]byte{a})
	if err != nil {
		t.Fatal(err)
	}
	if err := kr.Install(b); err != nil {
		t.Fatal(err)
	}
	if err := kr.Install(b); err != nil { // again: a no-op
		t.Fatal(err)
	}
	if got := kr.Keys(); len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) {
		t.Fatalf("keys after install = %x", got)
	}
	if err := kr.Use(c); !errors.Is(err, ErrKeyNotInstalled) {
		t.Fatalf("use of a key not installed: %v", err)
	}
	if err := kr.Remove(a); !errors.Is(err, ErrRemovePrimary) {
		t.Fatalf("remove of the primary: %v", err)
	}
	for _, bad := range [][]byte{nil, keyN(4, 10), keyN(4, 33)} {
		for name, op := range map[string]func([]byte) error{"install": kr.Install, "use": kr.Use, "remove": kr.Remove} {
			if err := op(bad); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("%s of a %d-byte key: %v", name, len(bad), err)
			}
		}
	}
	if err := kr.Use(b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kr.Primary(), b) {
		t.Fatalf("primary = %x, want b", kr.Primary())
	}
	if err := kr.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := kr.Remove(a); err != nil { // again: a no-op
		t.Fatal(err)
	}
	if got := kr.Keys(); len(got) != 1 || !bytes.Equal(got[0], b) {
		t.Fatalf("keys after rotation = %x", got)
	}
	// Keys returns copies.
	kr.Keys()[0][0] = 99
	if !bytes.Equal(kr.Primary(), b) {
		t.Fatal("Keys returned the ring's own slices")
	}
	for i := 1; i < MaxKeys; i++ {
		if err := kr.Install(keyN(byte(10+i), 16)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kr.Install(keyN(200, 16)); !errors.Is(err, ErrKeyringFull) {
		t.Fatalf("install beyond %d keys: %v", MaxKeys, err)
	}
}

func TestValidateKeys(t *testing.T) {
	many := make([][]byte, MaxKeys+1)
	for i := range many {
		many[i] = keyN(byte(i), 16)
	}
	for name, keys := range map[string][][]byte{
		"empty":      nil,
		"bad length": {keyN(1, 16), keyN(2, 7)},
		"duplicate":  {keyN(1, 16), keyN(1, 16)},
		"too many":   many,
	} {
		if err := ValidateKeys(keys); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := NewKeyring(keys); err == nil {
			t.Errorf("NewKeyring accepted %s", name)
		}
	}
}

func TestParseKeyringFile(t *testing.T) {
	a, b := EncodeKey(keyN(1, 32)), EncodeKey(keyN(2, 16))
	keys, err := ParseKeyringFile([]byte(`["` + a + `", "` + b + `"]`))
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], keyN(1, 32)) {
		t.Fatalf("ParseKeyringFile = %x, %v", keys, err)
	}
	for name, text := range map[string]string{
		"malformed JSON": `["` + a,
		"not an array":   `{"keys": []}`,
		"empty list":     `[]`,
		"not base64":     `["!!!"]`,
		"wrong length":   `["` + EncodeKey(keyN(1, 20)) + `"]`,
		"duplicate":      `["` + a + `","` + a + `"]`,
	} {
		if _, err := ParseKeyringFile([]byte(text)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParseKey("AAAA"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("ParseKey of 3 bytes: %v", err)
	}
	if k := GenerateKey(); len(k) != 32 || bytes.Equal(k, GenerateKey()) {
		t.Fatalf("GenerateKey = %x", k)
	}
}

// TestKeyringFileRoundTrip: a missing file is created from the seed, every
// change is written to it, and a keyring opened again on it has the
// rotated keys whatever the seed says (with a warning).
func TestKeyringFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gossip.keyring")
	a, b := keyN(1, 32), keyN(2, 32)
	if kr, err := OpenKeyring(path, nil, nil); kr != nil || err != nil {
		t.Fatalf("no file, no seed: %v, %v; want gossip in clear", kr, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file created without a seed: %v", err)
	}
	kr, err := OpenKeyring(path, [][]byte{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadKeyringFile(path); err != nil || len(got) != 1 || !bytes.Equal(got[0], a) {
		t.Fatalf("seeded file = %x, %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", fi.Mode().Perm())
	}
	for _, step := range []func() error{
		func() error { return kr.Install(b) },
		func() error { return kr.Use(b) },
		func() error { return kr.Remove(a) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	h := &recordingHandler{}
	again, err := OpenKeyring(path, [][]byte{a}, slog.New(h))
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Keys(); len(got) != 1 || !bytes.Equal(got[0], b) {
		t.Fatalf("reopened keys = %x, want the rotated b", got)
	}
	warned := false
	for _, r := range h.snapshot() {
		warned = warned || r.Level == slog.LevelWarn && strings.Contains(r.Message, "differs from the keyring file")
	}
	if !warned {
		t.Fatal("no warning that --gossip-key and the file disagree")
	}

	// A failed write changes nothing.
	if err := os.Chmod(filepath.Dir(path), 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Dir(path), 0o700) })
	if os.Geteuid() != 0 {
		if err := again.Install(a); err == nil {
			t.Fatal("install succeeded though the file cannot be written")
		}
		if got := again.Keys(); len(got) != 1 {
			t.Fatalf("keys after a failed write = %x", got)
		}
	}

	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.keyring")
	_ = os.WriteFile(bad, []byte("[]"), 0o600)
	if _, err := OpenKeyring(bad, [][]byte{a}, nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("empty keyring file: %v", err)
	}
}

// TestGossipKeyRotation rotates the key of a running three-member cluster:
// install the new key on all, use it on all, remove the old one from all.
// Nobody is suspected, declared dead or left on the way, and a member that
// kept only the old key is shut out at the end.
func TestGossipKeyRotation(t *testing.T) {
	oldKey, newKey := keyN(1, 32), keyN(2, 32)
	var ms []*Memberlist
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(id)
		kr, err := NewKeyring([][]byte{oldKey})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keyring = kr
		if len(ms) > 0 {
			cfg.Join = []string{ms[0].LocalAddr()}
		}
		ms = append(ms, start(t, cfg))
	}
	defer logViewsOnFailure(t, ms)
	waitConverged(t, ms, "a", "b", "c")
	for _, m := range ms {
		for len(m.Events()) > 0 {
			<-m.Events()
		}
	}

	stepNo := 0
	step := func(name string, op func(*Memberlist) error) {
		t.Helper()
		for _, m := range ms {
			if err := op(m); err != nil {
				t.Fatalf("%s on %s: %v", name, m.cfg.Meta.ID, err)
			}
		}
		// Every member gossips a new meta under the new keys; all must
		// see every one.
		stepNo++
		addr := "127.0.0.1:" + strconv.Itoa(9000+stepNo)
		for _, m := range ms {
			if err := m.UpdateMeta(func(meta *Meta) { meta.HTTPAddr = addr }); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 10*time.Second, "metas gossiped after "+name, func() bool {
			for _, m := range ms {
				for _, o := range ms {
					if mem, ok := member(m, o.cfg.Meta.ID); !ok || mem.Meta.HTTPAddr != addr {
						return false
					}
				}
			}
			return true
		})
		for _, m := range ms {
			if got := names(m); !sameNames(got, []string{"a", "b", "c"}) {
				t.Fatalf("after %s, %s sees %v", name, m.cfg.Meta.ID, got)
			}
			for _, mem := range m.Members() {
				if mem.State != StateAlive {
					t.Fatalf("after %s, %s sees %s %v", name, m.cfg.Meta.ID, mem.Name, mem.State)
				}
			}
		}
	}
	step("install", func(m *Memberlist) error { return m.InstallKey(newKey) })
	step("use", func(m *Memberlist) error { return m.UseKey(newKey) })
	step("remove", func(m *Memberlist) error { return m.RemoveKey(oldKey) })
	for _, m := range ms {
		for len(m.Events()) > 0 {
			if ev := <-m.Events(); ev.Type != EventUpdate {
				t.Fatalf("%s: event %+v during the rotation", m.cfg.Meta.ID, ev)
			}
		}
		if keys, _ := m.ListKeys(); len(keys) != 1 || !bytes.Equal(keys[0], newKey) {
			t.Fatalf("%s keys = %x", m.cfg.Meta.ID, keys)
		}
	}

	stale := testConfig("s", ms[0].LocalAddr())
	stale.SecretKey = oldKey
	s := start(t, stale)
	waitFor(t, 10*time.Second, "failed joins with the old key", func() bool { return s.joinAttempts.Load() >= 3 })
	if got := names(ms[0]); !sameNames(got, []string{"a", "b", "c"}) {
		t.Fatalf("a member with the removed key got in: %v", got)
	}
}

// TestWrongKeyLogged: a member with another key is not admitted and the
// log says, at warn level, that the gossip key did not match.
func TestWrongKeyLogged(t *testing.T) {
	h := &recordingHandler{}
	acfg := testConfig("a")
	acfg.SecretKey = keyN(1, 16)
	acfg.Logger = slog.New(h)
	a := start(t, acfg)
	xh := &recordingHandler{}
	xcfg := testConfig("x", a.LocalAddr())
	xcfg.SecretKey = keyN(2, 16)
	xcfg.Logger = slog.New(xh)
	x := start(t, xcfg)
	said := func(h *recordingHandler) bool {
		for _, r := range h.snapshot() {
			if r.Level >= slog.LevelWarn && strings.Contains(r.Message, "gossip key mismatch") {
				return true
			}
		}
		return false
	}
	waitFor(t, 10*time.Second, "both sides to log the key mismatch", func() bool { return said(h) && said(xh) })
	if got := names(a); !sameNames(got, []string{"a"}) {
		t.Fatalf("a sees %v", got)
	}
	if got := names(x); !sameNames(got, []string{"x"}) {
		t.Fatalf("x sees %v", got)
	}
	if _, err := start(t, testConfig("p")).ListKeys(); !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("ListKeys in clear: %v", err)
	}
}
