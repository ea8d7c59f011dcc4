// Package raftnet is Logbook's hashicorp/raft transport layer: a
// raft.StreamLayer over TCP that refuses connections from members of another
// cluster, so a misconfigured node can never join or disturb a foreign Raft
// group.
//
// # Handshake, version 1
//
// Every connection starts with a handshake before any Raft traffic. The
// dialer sends a preamble:
//
//	magic       4 bytes  "LBRF"
//	version     1 byte   1
//	id length   1 byte   N
//	cluster id  N bytes
//
// The acceptor reads it within a handshake timeout (5 s by default) and
// answers with one status byte:
//
//	0  ok: the connection now carries Raft traffic
//	1  cluster id mismatch, followed by the acceptor's own id (1 length
//	   byte, then the id) for the dialer's error message
//	2  bad preamble or unsupported version
//
// On any status but 0 the acceptor logs a warning and closes the
// connection; the dialer's Dial fails (ErrClusterMismatch or
// ErrHandshake). The cluster id is a guard against misconfiguration, not
// authentication: it is sent in clear text.
//
// # Accepting
//
// Handshakes run concurrently, one goroutine per connection, so a slow or
// garbage client never delays Accept for others. At most 64 handshakes are
// pending at a time; connections beyond that are closed at once.
package raftnet
