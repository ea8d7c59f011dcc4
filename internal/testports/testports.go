// Package testports hands tests loopback addresses to listen on.
//
// A port found free by listening on port 0 and closing again is in the
// kernel's ephemeral range, where any process's next outgoing connection
// may take it as its local port before the test binds it; and test
// binaries run side by side (go test ./... runs packages at once), so two
// of them probing the same range can both find one port free. Both have
// failed CI here ("bind: address already in use" while a test cluster
// started). So ports come from below Linux's default ephemeral range
// (32768-60999), where no outgoing connection lands, and each one handed
// out is claimed with an advisory lock on a file under the temporary
// directory, held until this process exits: no two test processes on the
// machine hand out the same port at the same time. A port some other
// program listens on fails the probe and is skipped.
package testports

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/logbookhq/logbook/internal/portprobe"
)

// base and span: ports handed out are base..base+span-1.
const (
	base = 20000
	span = 12000
)

var (
	mu   sync.Mutex
	next = rand.IntN(span)
	// dir holds the lock files, created on first use.
	dir string
	// held keeps the claims (open, locked files) for the life of the
	// process; the kernel drops the locks when it exits.
	held []*os.File
)

// Port returns a loopback port free for TCP (and UDP with udp) right now
// and claimed for this process. It never returns the same port twice in
// one process.
func Port(t testing.TB, udp bool) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d := filepath.Join(os.TempDir(), "logbook-test-ports")
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatalf("testports: %v", err)
		}
		dir = d
	}
	for range span {
		next = (next + 1) % span
		p := base + next
		f, ok := claim(filepath.Join(dir, fmt.Sprint(p)))
		if !ok {
			continue // another test process holds it
		}
		if !portprobe.Free(p, udp) {
			f.Close()
			continue
		}
		held = append(held, f)
		return p
	}
	t.Fatal("testports: no free port")
	return 0
}

// Addr is Port as "127.0.0.1:PORT".
func Addr(t testing.TB, udp bool) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Port(t, udp))
}
