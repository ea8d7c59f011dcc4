//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestTLSRefusesUnauthenticated runs the compose cluster, which runs with
// TLS by default, and calls every member's published port as three
// clients that must be refused: plaintext (Unavailable: the handshake
// fails), TLS trusting the cluster CA but without a client certificate
// (Unauthenticated), and TLS with a client certificate of another CA:
// as the SDK loads it (Unauthenticated: Go's TLS client does not send a
// certificate the server's CA list does not name) and sent regardless
// (Unavailable: the server refuses the handshake), an expired
// certificate of the cluster CA (Unavailable), a malformed token
// (Unauthenticated) and a reader's token (PermissionDenied). Each tries an
// append, Journal.Trim and Journal.Reset; afterwards every event read back
// is as before, but for the logbook.acl.denied audit events of the
// reader's refusals.
func TestTLSRefusesUnauthenticated(t *testing.T) {
	cl := startCluster(t, "docker-compose.yml", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Events and a trim point worth protecting.
	err := cl.withClient(ctx, func(c *client.Client) error {
		for i := range 20 {
			if _, err := c.Journal().Append(ctx, client.Event{Type: "tls-e2e", Payload: fmt.Appendf(nil, "event-%d", i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append as admin: %v", err)
	}
	before := journalState(ctx, t, cl)
	cl.logf("journal before: %+v, %d events", before.pos, len(before.events))

	// A client certificate of a CA the cluster does not know.
	other := t.TempDir()
	ca, caFiles, err := pki.NewCA("another CA", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.WriteFiles(other, "ca", caFiles, false); err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue(pki.Request{Name: "admin", Role: pki.RoleClient, Days: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.WriteFiles(other, "admin", is, false); err != nil {
		t.Fatal(err)
	}
	// It trusts the cluster CA: only the server's refusal stops it.
	foreign, err := client.LoadTLS(filepath.Join(other, "admin.pem"), filepath.Join(other, "admin-key.pem"), cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// Go's TLS client sends a certificate only when the server's list of
	// acceptable CAs names its issuer: LoadTLS's foreign certificate is
	// never sent, and the server sees a call without one. forced sends it
	// anyway, so the server's own verification is what refuses it.
	forced := foreign.Clone()
	cert := forced.Certificates[0]
	forced.Certificates = nil
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	caOnly, err := client.LoadTLS("", "", cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}

	// An expired certificate of the cluster CA, issued with tls-init's CA
	// key two days back for one day.
	clusterCA, err := pki.LoadCA(cl.tlsFile("ca.pem"), cl.tlsFile("ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := clusterCA.Issue(pki.Request{Name: "admin", Role: pki.RoleClient, Days: 1}, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.WriteFiles(other, "expired", old, false); err != nil {
		t.Fatal(err)
	}
	expired, err := client.LoadTLS(filepath.Join(other, "expired.pem"), filepath.Join(other, "expired-key.pem"), cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// A reader's token: the admin makes it and binds the user to reader.
	var reader string
	err = cl.withClient(ctx, func(c *client.Client) error {
		tok, err := c.Acl().CreateToken(ctx, "e2e-reader", "tls e2e", time.Hour)
		if err != nil {
			return err
		}
		reader = tok.Secret
		_, err = c.Acl().Bind(ctx, "e2e-reader", "reader")
		return err
	})
	if err != nil {
		t.Fatalf("a reader's token: %v", err)
	}
	for _, m := range cl.members { // every member applied the binding
		conn, err := grpc.NewClient(cl.addr(m), grpc.WithTransportCredentials(credentials.NewTLS(caOnly)), grpc.WithPerRPCCredentials(bearer(reader)))
		if err != nil {
			t.Fatal(err)
		}
		err = poll(30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
			who, err := pb.NewAclClient(conn).WhoAmI(ctx, &pb.WhoAmIRequest{})
			if err == nil && (len(who.Roles) != 1 || who.Roles[0] != "reader") {
				err = fmt.Errorf("%s: roles %v", m, who.Roles)
			}
			return err
		})
		conn.Close()
		if err != nil {
			t.Fatalf("the reader on %s: %v", m, err)
		}
	}
	before = journalState(ctx, t, cl)
	clients := []struct {
		name  string
		creds grpc.DialOption
		want  codes.Code
		token string
	}{
		{"plaintext", grpc.WithTransportCredentials(insecure.NewCredentials()), codes.Unavailable, ""},
		{"expired certificate of the cluster CA", grpc.WithTransportCredentials(credentials.NewTLS(expired)), codes.Unavailable, ""},
		{"a reader's token", grpc.WithTransportCredentials(credentials.NewTLS(caOnly)), codes.PermissionDenied, reader},
		{"a malformed token", grpc.WithTransportCredentials(credentials.NewTLS(caOnly)), codes.Unauthenticated, "lbt_nonsense"},
		{"CA only, no certificate", grpc.WithTransportCredentials(credentials.NewTLS(caOnly)), codes.Unauthenticated, ""},
		{"certificate of another CA (LoadTLS: not sent)", grpc.WithTransportCredentials(credentials.NewTLS(foreign)), codes.Unauthenticated, ""},
		{"certificate of another CA (sent)", grpc.WithTransportCredentials(credentials.NewTLS(forced)), codes.Unavailable, ""},
	}
	calls := []struct {
		name string
		call func(ctx context.Context, j pb.JournalClient) error
	}{
		{"Append", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Append(ctx, &pb.AppendRequest{Events: []*pb.Event{{Type: "intruder", Payload: []byte("x")}}})
			return err
		}},
		{"Trim", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Trim(ctx, &pb.TrimRequest{})
			return err
		}},
		{"Reset", func(ctx context.Context, j pb.JournalClient) error {
			_, err := j.Reset(ctx, &pb.ResetRequest{Confirm: true})
			return err
		}},
	}
	for _, m := range cl.members {
		for _, c := range clients {
			opts := []grpc.DialOption{c.creds}
			if c.token != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
			}
			conn, err := grpc.NewClient(cl.addr(m), opts...)
			if err != nil {
				t.Fatal(err)
			}
			j := pb.NewJournalClient(conn)
			for _, call := range calls {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				err := call.call(cctx, j)
				ccancel()
				if got := status.Code(err); got != c.want {
					t.Errorf("%s, %s on %s: %v (code %s), want %s", c.name, call.name, m, err, got, c.want)
				} else {
					cl.logf("%s, %s on %s: refused, %s", c.name, call.name, m, got)
				}
			}
			conn.Close()
		}
	}
	if t.Failed() {
		return
	}

	// The control: the same raw calls with admin's certificate pass
	// authentication (a read, so the journal stays as it is).
	conn, err := grpc.NewClient(cl.addr(cl.members[0]), cl.creds())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewJournalClient(conn).Positions(ctx, &pb.PositionsRequest{}); err != nil {
		t.Fatalf("Positions as admin on the same path: %v", err)
	}

	// The refusals of the reader journaled logbook.acl.denied audit
	// events and nothing else.
	after := journalState(ctx, t, cl)
	if after.pos.TrimmedPos != before.pos.TrimmedPos || after.pos.ExpirePos != before.pos.ExpirePos {
		t.Errorf("positions changed: before %+v, after %+v", before.pos, after.pos)
	}
	kept := after.events[:0:0]
	for _, e := range after.events {
		if e.Seq > before.pos.SafePos && e.Type == "logbook.acl.denied" {
			continue
		}
		kept = append(kept, e)
	}
	if err := sameEvents(before.events, kept); err != nil {
		t.Errorf("events changed: %v", err)
	}
	cl.logf("journal after: %+v, %d events, identical", after.pos, len(after.events))
}

// bearer sends a token with every call, as the SDK does.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{pb.MDAuthorization: "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// positions are the journal positions that only appends, trims and
// resets move (not the applied index, which other entries advance).
type positions struct {
	WritePos, SafePos, ExpirePos, TrimmedPos, EventCount, SegmentCount uint64
}

type journalSnapshot struct {
	pos    positions
	events []client.StoredEvent
}

// journalState is the leader's positions and a linearizable read of every
// retained event, as admin.
func journalState(ctx context.Context, t *testing.T, cl *cluster) journalSnapshot {
	t.Helper()
	var s journalSnapshot
	err := cl.withClient(ctx, func(c *client.Client) error {
		p, err := c.Journal().Positions(ctx)
		if err != nil {
			return err
		}
		s.pos = positions{p.WritePos, p.SafePos, p.ExpirePos, p.TrimmedPos, p.EventCount, p.SegmentCount}
		s.events = s.events[:0]
		return c.Journal().ReadRange(ctx, 1, 0, func(e client.StoredEvent) error {
			s.events = append(s.events, e)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("journal state as admin: %v", err)
	}
	if len(s.events) == 0 {
		t.Fatal("journal state: no events")
	}
	return s
}
