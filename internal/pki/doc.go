// Package pki owns Logbook's certificates: how a certificate names who it
// belongs to, the cluster CA and the certificates it signs (coord tls ca
// create, coord tls cert create), and the TLS configurations every
// listener and dialer is built from, which reload their files without a
// restart.
//
// # Identities in certificates
//
// A certificate names one identity: its subject's CommonName is the
// member id of a coordinator or storage node, or the user name of a
// client; its subject's OrganizationalUnit is the role, one of
// "coordinator", "node" or "client". Nothing else is read: operators with
// their own PKI (cfssl, Vault, cert-manager) issue certificates with that
// subject, signed by the CA they give every process with --tls-ca.
//
// Coordinator and node certificates serve and dial (ExtKeyUsage server and
// client authentication) and carry their DNS names and IP addresses as
// subject alternative names; client certificates only dial.
//
// # Reloading
//
// A Source holds the current certificate, key and CA pool. Reload reads
// the files again; a configuration built from a Source reads the current
// values at every handshake, so a rotated certificate or CA applies to the
// next connection and no open connection is dropped. A failed reload keeps
// what was loaded before.
//
// The package imports no gRPC: the RPC layer reads identities with
// IdentityOf from the verified peer certificate.
package pki
