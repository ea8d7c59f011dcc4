package testports

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestPortsAreDistinctAndBindable: ports come from below the ephemeral
// range, never repeat, and can be bound for TCP and UDP.
func TestPortsAreDistinctAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := Port(t, true)
		if p < base || p >= base+span {
			t.Fatalf("port %d outside %d..%d", p, base, base+span-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	addr := Addr(t, true)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u.Close()
}

// TestClaimsHoldAcrossProcesses: a port this process claimed is never
// handed out by another test process running at the same time, even one
// that walks the range from the same start (the claimed ports are not
// bound, so the probe alone would hand them out again).
func TestClaimsHoldAcrossProcesses(t *testing.T) {
	if start := os.Getenv("TESTPORTS_CHILD"); start != "" {
		mu.Lock()
		next, _ = strconv.Atoi(start)
		mu.Unlock()
		var out []string
		for range 200 {
			out = append(out, strconv.Itoa(Port(t, false)))
		}
		os.Stdout.WriteString("PORTS " + strings.Join(out, " ") + "\n")
		return
	}
	mu.Lock()
	start := next
	mu.Unlock()
	mine := map[string]bool{}
	for range 200 {
		mine[strconv.Itoa(Port(t, false))] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimsHoldAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTPORTS_CHILD="+strconv.Itoa(start))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	_, list, ok := strings.Cut(string(b), "PORTS ")
	if !ok {
		t.Fatalf("child printed no ports:\n%s", b)
	}
	theirs := strings.Fields(strings.SplitN(list, "\n", 2)[0])
	if len(theirs) != 200 {
		t.Fatalf("child handed out %d ports, want 200", len(theirs))
	}
	for _, p := range theirs {
		if mine[p] {
			t.Fatalf("port %s handed out by both processes", p)
		}
	}
}
