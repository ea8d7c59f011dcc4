package raftnet

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/internal/pki"
)

// PeerIdentity is the identity the verified TLS certificate of a
// connection this stream layer accepted names; ok is false on a plaintext
// connection.
func PeerIdentity(c net.Conn) (pki.Identity, bool) {
	if ac, ok := c.(*acceptedConn); ok {
		c = ac.Conn
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return pki.Identity{}, false
	}
	cs := tc.ConnectionState()
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return pki.Identity{}, false
	}
	id, err := pki.IdentityOf(cs.PeerCertificates[0])
	return id, err == nil
}

// AuthorizeMember is the transport's RPC check with TLS on
// (raft.NetworkTransportConfig.AuthorizeRPC): the member id an RPC's header
// claims must be the coordinator the connection's certificate names. A
// refusal is logged and drops the connection.
func AuthorizeMember(log *slog.Logger) func(net.Conn, raft.RPCHeader) error {
	return func(c net.Conn, h raft.RPCHeader) error {
		id, ok := PeerIdentity(c)
		if !ok || id.Role != pki.RoleCoordinator || id.Name != string(h.ID) {
			err := fmt.Errorf("raftnet: an RPC claiming member %q came from %s (%v)", h.ID, c.RemoteAddr(), id)
			log.Warn("refused a Raft RPC: the certificate does not name the member it claims", "claimed-id", string(h.ID),
				"certificate", id.String(), "remote", c.RemoteAddr().String())
			return err
		}
		return nil
	}
}
