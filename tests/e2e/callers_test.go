//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// caller is a way of calling a secure cluster's published ports that it
// must refuse: TLS configuration (nil: plaintext) and bearer token.
type caller struct {
	name  string
	conf  *tls.Config
	token string
	// coord is the code a coordinator answers a user call of it with.
	coord codes.Code
}

// node is the code a storage node answers its calls of this caller with
// when they need an identity: nodes hold no roles and take no bearer
// tokens, so every caller that passes the handshake arrives without one.
func (c caller) node() codes.Code {
	if c.coord == codes.Unavailable {
		return codes.Unavailable
	}
	return codes.Unauthenticated
}

// dial opens a connection to addr as c.
func (c caller) dial(addr string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if c.conf != nil {
		creds = credentials.NewTLS(c.conf)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	return grpc.NewClient(addr, opts...)
}

// strangers are the callers every destructive call must be refused to,
// made from the cluster's TLS files, with the code a coordinator answers:
//
//   - plaintext: Unavailable (the TLS handshake fails);
//   - an expired client certificate of the cluster CA, issued with
//     tls-init's CA key two days back for one day: Unavailable;
//   - a reader's token (user readerUser, bound to the built-in reader
//     role; every member has applied the binding when this returns):
//     PermissionDenied;
//   - a malformed token: Unauthenticated;
//   - TLS trusting the cluster CA without a client certificate:
//     Unauthenticated;
//   - a client certificate of another CA as client.LoadTLS loads it:
//     Unauthenticated (Go's TLS client sends a certificate only when the
//     server's list of acceptable CAs names its issuer, so the server
//     sees a call without one);
//   - the same certificate sent regardless: Unavailable (the server's
//     own verification refuses the handshake).
//
// The reader's token is returned too.
func strangers(ctx context.Context, t *testing.T, cl *cluster, readerUser string) ([]caller, string) {
	t.Helper()
	other := t.TempDir()
	ca, _, err := pki.NewCA("another CA", 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// It trusts the cluster CA: only the server's refusal stops it.
	foreign := clientTLS(t, ca, other, "admin", time.Now(), cl.tlsFile("ca.pem"))
	forced := foreign.Clone()
	cert := forced.Certificates[0]
	forced.Certificates = nil
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	caOnly, err := client.LoadTLS("", "", cl.tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	clusterCA, err := pki.LoadCA(cl.tlsFile("ca.pem"), cl.tlsFile("ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	expired := clientTLS(t, clusterCA, other, "admin", time.Now().Add(-48*time.Hour), cl.tlsFile("ca.pem"))
	reader := cl.readerToken(ctx, t, readerUser, caOnly)
	return []caller{
		{"plaintext", nil, "", codes.Unavailable},
		{"expired certificate of the cluster CA", expired, "", codes.Unavailable},
		{"a reader's token", caOnly, reader, codes.PermissionDenied},
		{"a malformed token", caOnly, "lbt_nonsense", codes.Unauthenticated},
		{"CA only, no certificate", caOnly, "", codes.Unauthenticated},
		{"certificate of another CA (LoadTLS: not sent)", foreign, "", codes.Unauthenticated},
		{"certificate of another CA (sent)", forced, "", codes.Unavailable},
	}, reader
}

// clientTLS issues, with ca, a one-day client certificate for user from
// at, writes it into dir and loads it, trusting caFile.
func clientTLS(t *testing.T, ca *pki.CA, dir, user string, at time.Time, caFile string) *tls.Config {
	t.Helper()
	is, err := ca.Issue(pki.Request{Name: user, Role: pki.RoleClient, Days: 1}, at)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%d", user, at.Unix())
	certPath, keyPath, err := pki.WriteFiles(dir, name, is, false)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := client.LoadTLS(certPath, keyPath, caFile)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// readerToken makes, as admin, a token for user bound to the reader
// role, and waits until every member takes it for a reader.
func (cl *cluster) readerToken(ctx context.Context, t *testing.T, user string, caOnly *tls.Config) string {
	t.Helper()
	var reader string
	err := cl.withClient(ctx, func(c *client.Client) error {
		tok, err := c.Acl().CreateToken(ctx, user, "e2e refusals", time.Hour)
		if err != nil {
			return err
		}
		reader = tok.Secret
		_, err = c.Acl().Bind(ctx, user, "reader")
		return err
	})
	if err != nil {
		t.Fatalf("a reader's token: %v", err)
	}
	for _, m := range cl.members {
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
	return reader
}

// bearer sends a token with every call, as the SDK does.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{pb.MDAuthorization: "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
