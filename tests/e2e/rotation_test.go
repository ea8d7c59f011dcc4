//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/pki"
)

// TestCertRotationDuringAppends: while clients append without pause,
// every coordinator in turn, the leader first, gets a fresh certificate of
// the cluster CA where it reads its --tls-cert and --tls-key (the volume
// tls). The leader and the last member are told with SIGHUP, the middle
// one is left to its file watcher (--tls-reload-interval, 10 s). Each must
// then present the new certificate (serial) on its published gRPC port.
// A member restarted afterwards reconnects to its peers with only new
// certificates on both sides and catches up. Every acknowledged append is
// then in every member's journal exactly once, at its seq.
func TestCertRotationDuringAppends(t *testing.T) {
	cl := startCluster(t, compose3, 3)
	ca, err := cl.clusterCA()
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]*x509.Certificate{}
	for _, m := range cl.members {
		c, err := servedCert(cl.addr(m), cl.tlsConf)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		old[m] = c
	}
	l := startLoad(cl, 3)
	l.waitCount(200, time.Minute)

	leader := cl.leader()
	order := append([]string{leader}, cl.others(leader)...)
	for i, m := range order {
		dir := t.TempDir()
		cert, err := issueInto(ca, dir, m, pki.RoleCoordinator)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.putTLS(dir); err != nil {
			t.Fatal(err)
		}
		before, since := l.count(), time.Now()
		trigger, logged, timeout := "SIGHUP", "trigger=SIGHUP", 30*time.Second
		if i == 1 {
			// The watcher looks every 10 s.
			trigger, logged, timeout = "its file watcher", `trigger="files changed"`, 45*time.Second
		} else if _, err := docker("kill", "--signal", "HUP", cl.ids[m]); err != nil {
			t.Fatal(err)
		}
		role := "follower"
		if m == leader {
			role = "leader"
		}
		err = poll(timeout, 200*time.Millisecond, func(context.Context) error {
			c, err := servedCert(cl.addr(m), cl.tlsConf)
			if err != nil {
				return err
			}
			if c.SerialNumber.Cmp(cert.SerialNumber) != 0 {
				return fmt.Errorf("%s presents serial %x, want the new %x (old %x)", m, c.SerialNumber, cert.SerialNumber, old[m].SerialNumber)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s (%s) did not take its new certificate through %s: %v", m, role, trigger, err)
		}
		var reloads []string
		for _, line := range strings.Split(containerLogsSince(cl.ids[m], since), "\n") {
			if strings.Contains(line, "TLS certificate and CA reloaded") {
				reloads = append(reloads, line)
			}
		}
		switch {
		case len(reloads) != 1:
			t.Errorf("%s's log of the reload: %q, want one line", m, reloads)
		case !strings.Contains(reloads[0], logged) && i == 1:
			t.Errorf("%s reloaded, not by its watcher: %q", m, reloads[0])
		case !strings.Contains(reloads[0], logged):
			// The watcher's tick fell between the copy and the signal.
			trigger = "its file watcher, just before SIGHUP"
		}
		cl.logf("%s (%s) presents its new certificate %x (was %x) after %s; %d appends acknowledged meanwhile",
			m, role, cert.SerialNumber, old[m].SerialNumber, trigger, l.count()-before)
		l.waitMore(200, time.Minute)
	}
	// Connections open before a rotation keep their handshake: restart a
	// follower so that it dials its peers, and they it, anew.
	f := cl.others(cl.leader())[0]
	cl.logf("restarting %s: new connections with the new certificates only", f)
	if err := cl.stop(f); err != nil {
		t.Fatal(err)
	}
	cl.restart(f)
	cl.waitRejoined(f)
	l.waitMore(300, time.Minute)
	l.stopAndVerify()
	for _, m := range cl.members {
		c, err := servedCert(cl.addr(m), cl.tlsConf)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if c.SerialNumber.Cmp(old[m].SerialNumber) == 0 {
			t.Errorf("%s presents its old certificate again", m)
		}
	}
}

// serviceID is the container id of any service of the project's file, one
// the test does not run as a member (tls-init) included.
func (p *project) serviceID(service string) (string, error) {
	if id := p.ids[service]; id != "" {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	id, err := p.compose(ctx, "ps", "-a", "-q", service)
	if err != nil {
		return "", err
	}
	if id == "" || strings.Contains(id, "\n") {
		return "", fmt.Errorf("service %s: want one container, got %q", service, id)
	}
	return id, nil
}

// clusterCA is the CA tls-init made, with its key: tests issue their own
// certificates with it.
func (p *project) clusterCA() (*pki.CA, error) {
	return pki.LoadCA(p.tlsFile("ca.pem"), p.tlsFile("ca-key.pem"))
}

// tlsVolumeFile reads a file of the volume tls (tls-init's /tls).
func (p *project) tlsVolumeFile(name string) ([]byte, error) {
	id, err := p.serviceID(tlsService)
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(p.tlsDir, "volume-"+name)
	if _, err := docker("cp", id+":/tls/"+name, dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// putTLS copies every file of dir into the volume tls, replacing those of
// the same name: the members mount it read-only at /tls, tls-init (exited)
// read-write, and docker cp writes a stopped container's volumes.
func (p *project) putTLS(dir string) error {
	id, err := p.serviceID(tlsService)
	if err != nil {
		return err
	}
	_, err = docker("cp", dir+string(filepath.Separator)+".", id+":/tls/")
	return err
}

// issueInto issues a certificate of role for name with ca and writes it
// into dir as NAME.pem and NAME-key.pem, readable by the containers' user
// (docker cp hands copied files to root, keeping their mode). It returns
// the certificate.
func issueInto(ca *pki.CA, dir, name string, role pki.Role) (*x509.Certificate, error) {
	is, err := ca.Issue(pki.Request{Name: name, Role: role, Days: 1}, time.Now())
	if err != nil {
		return nil, err
	}
	_, keyPath, err := pki.WriteFiles(dir, name, is, true)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(keyPath, 0o644); err != nil {
		return nil, err
	}
	certs, err := pki.ParseCerts(is.CertPEM)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// servedCert is the certificate the server at addr presents in a TLS
// handshake of its own (conf's trust and client certificate).
func servedCert(addr string, conf *tls.Config) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c := conf.Clone()
	c.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(d, "tcp", addr, c)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	peers := conn.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		return nil, errors.New("no server certificate")
	}
	return peers[0], nil
}
