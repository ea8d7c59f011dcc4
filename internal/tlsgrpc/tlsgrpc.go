// Package tlsgrpc carries internal/pki's reloading TLS configurations into
// gRPC: transport credentials for servers and dialers, and the verified
// identity of a call's peer.
//
// grpc-go's credentials.NewTLS keeps one tls.Config for every connection;
// a client's must name the CA it trusts when it is built, so a reloaded CA
// would not apply. Client builds a new configuration from the Source at
// every handshake instead, with the server name from the dialled address.
package tlsgrpc

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/internal/pki"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
)

// ServerCreds are the credentials of a Logbook gRPC port: plaintext
// without a Source, else TLS with a client certificate verified when one
// is sent (the RPC layer refuses calls that need one and lack it).
func ServerCreds(s *pki.Source) credentials.TransportCredentials {
	if s == nil {
		return insecure.NewCredentials()
	}
	return Server(s, pki.OptionalCert)
}

// DialCreds are the credentials of a link to servers of role want:
// plaintext without a Source.
func DialCreds(s *pki.Source, want pki.Role) credentials.TransportCredentials {
	if s == nil {
		return insecure.NewCredentials()
	}
	return Client(s, want)
}

// Server is the transport credentials of a gRPC server over s. The
// identity of a connection's verified certificate is read once, at the
// handshake, and kept with the connection (PeerIdentity).
func Server(s *pki.Source, auth pki.ClientAuth, roles ...pki.Role) credentials.TransportCredentials {
	return serverCreds{credentials.NewTLS(s.ServerConfig(auth, roles...))}
}

type serverCreds struct {
	credentials.TransportCredentials
}

func (c serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, ai, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	info, ok := ai.(credentials.TLSInfo)
	if !ok {
		return conn, ai, nil
	}
	id, ok := stateIdentity(info.State)
	return conn, identifiedInfo{TLSInfo: info, id: id, ok: ok}, nil
}

func (c serverCreds) Clone() credentials.TransportCredentials {
	return serverCreds{c.TransportCredentials.Clone()}
}

// identifiedInfo is a server connection's TLS state with the identity its
// certificate names.
type identifiedInfo struct {
	credentials.TLSInfo
	id pki.Identity
	ok bool
}

// Client is the transport credentials of a gRPC dialer whose servers must
// hold certificates of role want.
func Client(d pki.Dialer, want pki.Role) credentials.TransportCredentials {
	return &clientCreds{d: d, want: want}
}

type clientCreds struct {
	d        pki.Dialer
	want     pki.Role
	override string
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	if c.override != "" {
		host = c.override
	}
	return credentials.NewTLS(c.d.ClientConfig(c.want, host)).ClientHandshake(ctx, authority, conn)
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errClientOnly
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3"}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cc := *c
	return &cc
}

// OverrideServerName is deprecated in grpc-go; it sets the name the
// server's certificate is checked against.
func (c *clientCreds) OverrideServerName(name string) error {
	c.override = name
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errClientOnly = errString("tlsgrpc: client credentials cannot serve")

// PeerIdentity is the identity the verified certificate of ctx's peer
// names. ok is false for a plaintext call, a TLS call without a client
// certificate, and a certificate that names no Logbook identity.
func PeerIdentity(ctx context.Context) (pki.Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return pki.Identity{}, false
	}
	return IdentityOf(p.AuthInfo)
}

// IdentityOf reads the identity of a connection's AuthInfo.
func IdentityOf(ai credentials.AuthInfo) (pki.Identity, bool) {
	if ii, ok := ai.(identifiedInfo); ok {
		return ii.id, ii.ok
	}
	info, ok := ai.(credentials.TLSInfo)
	if !ok {
		return pki.Identity{}, false
	}
	return stateIdentity(info.State)
}

func stateIdentity(cs tls.ConnectionState) (pki.Identity, bool) {
	// Only chains verified at the handshake count.
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return pki.Identity{}, false
	}
	id, err := pki.IdentityOf(cs.PeerCertificates[0])
	return id, err == nil
}

// Caller is the authz identity of ctx's peer: its verified certificate's
// name and role, or authz.Anonymous.
func Caller(ctx context.Context) authz.Identity {
	id, ok := PeerIdentity(ctx)
	if !ok {
		return authz.Anonymous
	}
	return authz.Identity{Kind: authz.KindCertificate, Name: id.Name, Role: string(id.Role)}
}

// Decide is the authorization of one call of class access by id: with
// users off (no ACLs yet) any authenticated caller may make a read, write
// or admin call; every other class, and every call with users on, is
// policy's decision.
func Decide(policy authz.Policy, users bool, id authz.Identity, access authz.Access, res authz.Resource) authz.Decision {
	if !users && access.UserLevel() && id.Kind != authz.KindAnonymous && id.Name != "" {
		return authz.Decision{Outcome: authz.Allow}
	}
	return policy.Authorize(id, access, res)
}
