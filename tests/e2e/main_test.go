//go:build e2e

// Package e2e runs Logbook coordinators as containers (deploy/compose) and
// injects faults with the docker CLI: SIGKILL, stop/start, pause, network
// disconnect. Run it with tests/e2e/run.sh, or:
//
//	go test -tags e2e -count=1 -timeout 25m ./tests/e2e/
//
// TestMain builds the binary and the image once; each test starts its own
// uniquely named compose project and always removes it (containers, network,
// volumes), also on SIGINT and shortly before the -timeout panic.
//
// Comments cite docs/design.md as "design §…"; the "spec §1.4" of a
// TestFSRecovery message is its §R1.4.
package e2e

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// image is the tag TestMain builds and every project runs;
// LOGBOOK_E2E_IMAGE names another, so that two checkouts can run the
// suite side by side.
var image = cmp.Or(os.Getenv("LOGBOOK_E2E_IMAGE"), "logbook-coord:e2e")

var (
	// repoRoot is the module root (two levels above this package).
	repoRoot string
	// composeCLI is the compose command: the docker plugin when it
	// answers, else docker-compose.
	composeCLI []string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigc
		fmt.Fprintf(os.Stderr, "e2e: %v: removing compose projects\n", s)
		downAll()
		os.Exit(130)
	}()
	// The -timeout panic skips every t.Cleanup: tear down shortly before it.
	if d := testTimeout(); d > 2*time.Minute {
		time.AfterFunc(d-time.Minute, func() {
			fmt.Fprintln(os.Stderr, "e2e: -timeout is near: removing compose projects")
			downAll()
		})
	}

	code := m.Run()
	downAll() // normally a no-op: every test removes its own project
	os.Exit(code)
}

func setup() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	if err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").Run(); err != nil {
		return fmt.Errorf("docker daemon unreachable (docker info): %w", err)
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		composeCLI = []string{"docker", "compose"}
	} else if p, err := exec.LookPath("docker-compose"); err == nil {
		composeCLI = []string{p}
	} else {
		return fmt.Errorf("neither `docker compose` nor docker-compose is available")
	}
	start := time.Now()
	if err := run(10*time.Minute, "bash", filepath.Join(repoRoot, "deploy", "compose", "build.sh"), image); err != nil {
		return fmt.Errorf("build the image: %w", err)
	}
	fmt.Printf("e2e: built %s in %s; compose: %v\n", image, time.Since(start).Round(100*time.Millisecond), composeCLI)
	return nil
}

// run runs a setup command with its output on stderr.
func run(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String())
	return d
}

// live holds every compose project that is up, for downAll.
var live struct {
	mu       sync.Mutex
	projects map[*project]bool
}

func register(p *project) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.projects == nil {
		live.projects = map[*project]bool{}
	}
	live.projects[p] = true
}

func unregister(p *project) {
	live.mu.Lock()
	defer live.mu.Unlock()
	delete(live.projects, p)
}

// downAll removes every live project, concurrently.
func downAll() {
	live.mu.Lock()
	ps := make([]*project, 0, len(live.projects))
	for p := range live.projects {
		ps = append(ps, p)
	}
	live.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.down(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: down %s: %v\n", p.name, err)
			}
		}()
	}
	wg.Wait()
}
