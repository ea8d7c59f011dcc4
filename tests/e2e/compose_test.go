//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// project is one compose project: a uniquely named copy of a compose file's
// services, with their container ids and network. It knows nothing of
// Logbook beyond the service names; cluster adds that.
type project struct {
	name     string
	file     string
	services []string
	// env is added to the environment of every compose command (compose
	// file variables such as LOGBOOK_FAILPOINT_RECOVERY_PAUSE).
	env []string

	// Filled by up; container ids and the network do not change when a
	// container is killed, restarted or reconnected.
	ids     map[string]string
	network string
	// tlsDir holds the cluster CA (ca.pem) and the client certificate of
	// the user admin (admin.pem, admin-key.pem) that the compose file's
	// setup step (service tls-init) made; tlsConf is the client TLS
	// configuration from them, which every dial of the test uses.
	tlsDir  string
	tlsConf *tls.Config
	// extra are containers a test started on the project's network
	// outside compose (runNode); down removes them first.
	extraMu sync.Mutex
	extra   []string

	downOnce sync.Once
	downErr  error
}

// cmdTimeout bounds every docker and compose command but up and down.
const cmdTimeout = time.Minute

func newProject(file string, services []string) (*project, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &project{
		name:     "logbook-e2e-" + hex.EncodeToString(b[:]),
		file:     filepath.Join(repoRoot, "deploy", "compose", file),
		services: services,
	}, nil
}

// execOut runs a command and returns its trimmed stdout; the error carries
// stderr.
func execOut(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// compose runs a compose subcommand for this project.
func (p *project) compose(ctx context.Context, args ...string) (string, error) {
	full := append(append(composeCLI[1:len(composeCLI):len(composeCLI)], "-p", p.name, "-f", p.file), args...)
	return execOut(ctx, append([]string{"LOGBOOK_IMAGE=" + image}, p.env...), composeCLI[0], full...)
}

// docker runs a docker CLI command bounded by cmdTimeout.
func docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return execOut(ctx, nil, "docker", args...)
}

// up starts every service and records container ids and the network. The
// project is registered for downAll before anything is created.
func (p *project) up(ctx context.Context) error {
	register(p)
	if _, err := p.compose(ctx, "up", "-d", "--no-build"); err != nil {
		return err
	}
	p.ids = map[string]string{}
	for _, s := range p.services {
		id, err := p.compose(ctx, "ps", "-a", "-q", s)
		if err != nil {
			return err
		}
		if id == "" || strings.Contains(id, "\n") {
			return fmt.Errorf("service %s: want one container, got %q", s, id)
		}
		p.ids[s] = id
	}
	if err := p.fetchTLS(); err != nil {
		return err
	}
	nets, err := docker("inspect", "--format", `{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}`, p.ids[p.services[0]])
	if err != nil {
		return err
	}
	if f := strings.Fields(nets); len(f) != 1 {
		return fmt.Errorf("want one network, got %q", nets)
	} else {
		p.network = f[0]
	}
	return nil
}

// tlsService is the compose files' setup step: it writes the CA and every
// certificate into the volume tls and exits.
const tlsService = "tls-init"

// TLS files the test needs, out of the volume tls.
var tlsFiles = []string{"ca.pem", "admin.pem", "admin-key.pem", "acl-bootstrap.token"}

// fetchTLS copies the CA and admin's certificate and key out of the
// exited setup container (docker cp reads a stopped container's volumes)
// and loads them.
func (p *project) fetchTLS() error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	id, err := p.compose(ctx, "ps", "-a", "-q", tlsService)
	if err != nil {
		return err
	}
	if id == "" || strings.Contains(id, "\n") {
		return fmt.Errorf("service %s: want one container, got %q", tlsService, id)
	}
	state, err := docker("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", id)
	if err != nil {
		return err
	}
	if state != "exited 0" {
		return fmt.Errorf("service %s: %s, want exited 0", tlsService, state)
	}
	dir, err := os.MkdirTemp("", p.name+"-tls-")
	if err != nil {
		return err
	}
	p.tlsDir = dir
	for _, f := range tlsFiles {
		if _, err := docker("cp", id+":/tls/"+f, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	// The CA key (volume tls-ca, which tls-init mounts at /data and no
	// member does): tests issue certificates of their own with it.
	if _, err := docker("cp", id+":/data/ca-key.pem", filepath.Join(dir, "ca-key.pem")); err != nil {
		return err
	}
	p.tlsConf, err = client.LoadTLS(p.tlsFile("admin.pem"), p.tlsFile("admin-key.pem"), p.tlsFile("ca.pem"))
	return err
}

// tlsFile is the path of one of tlsFiles on the host.
func (p *project) tlsFile(name string) string { return filepath.Join(p.tlsDir, name) }

// creds is the dial option of a raw gRPC connection to a published port:
// TLS with admin's certificate.
func (p *project) creds() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(p.tlsConf))
}

// down removes containers, network and volumes; it runs once however many
// callers (t.Cleanup, SIGINT, the timeout watchdog) ask.
func (p *project) down() error {
	p.downOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// A container compose did not make would keep the network in use.
		p.extraMu.Lock()
		extra := p.extra
		p.extraMu.Unlock()
		if len(extra) > 0 {
			if _, err := execOut(ctx, nil, "docker", append([]string{"rm", "-f", "-v"}, extra...)...); err != nil {
				p.downErr = err
			}
		}
		_, err := p.compose(ctx, "down", "-v", "--remove-orphans", "-t", "2")
		p.downErr = errors.Join(p.downErr, err)
		if p.tlsDir != "" {
			os.RemoveAll(p.tlsDir)
		}
		unregister(p)
	})
	return p.downErr
}

// logs returns the last lines of every service's log.
func (p *project) logs(tail int) string {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := p.compose(ctx, "logs", "--no-color", "--tail", fmt.Sprint(tail))
	if err != nil {
		return "logs: " + err.Error()
	}
	return out
}

// port is the published 127.0.0.1 address of a container port. A
// restarted or reconnected container gets a new one.
func (p *project) port(service string, containerPort int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := p.compose(ctx, "port", service, fmt.Sprint(containerPort))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(out, "127.0.0.1:") {
		return "", fmt.Errorf("service %s port %d: published as %q, want 127.0.0.1:PORT", service, containerPort, out)
	}
	return out, nil
}

// health is the container's healthcheck status: starting, healthy,
// unhealthy, or the container state when it is not running.
func (p *project) health(service string) (string, error) {
	out, err := docker("inspect", "--format", `{{if .State.Running}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}`, p.ids[service])
	return out, err
}

// ip is the container's address on the project's network ("" while it is
// not running).
func (p *project) ip(service string) (string, error) {
	return docker("inspect", "--format", `{{with index .NetworkSettings.Networks "`+p.network+`"}}{{.IPAddress}}{{end}}`, p.ids[service])
}

// exitedAt waits until the service's container has stopped and returns
// the time the daemon saw its process exit.
func (p *project) exitedAt(service string) (time.Time, error) {
	var at time.Time
	err := poll(30*time.Second, 20*time.Millisecond, func(context.Context) error {
		out, err := docker("inspect", "--format", `{{.State.Running}} {{.State.FinishedAt}}`, p.ids[service])
		if err != nil {
			return err
		}
		running, finished, _ := strings.Cut(out, " ")
		if running != "false" {
			return fmt.Errorf("%s still running", service)
		}
		at, err = time.Parse(time.RFC3339Nano, finished)
		return err
	})
	return at, err
}

// Faults. Each acts on one service's container.

func (p *project) kill(service string) error {
	_, err := docker("kill", "--signal", "KILL", p.ids[service])
	return err
}

func (p *project) stop(service string) error {
	_, err := docker("stop", "--time", "10", p.ids[service])
	return err
}

func (p *project) start(service string) error {
	_, err := docker("start", p.ids[service])
	return err
}

func (p *project) pause(service string) error {
	_, err := docker("pause", p.ids[service])
	return err
}

func (p *project) unpause(service string) error {
	_, err := docker("unpause", p.ids[service])
	return err
}

func (p *project) disconnect(service string) error {
	_, err := docker("network", "disconnect", p.network, p.ids[service])
	return err
}

// connect reattaches the container with its service name as DNS alias, as
// compose did: the members dial each other by service name.
func (p *project) connect(service string) error {
	_, err := docker("network", "connect", "--alias", service, p.network, p.ids[service])
	return err
}
