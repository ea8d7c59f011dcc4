// Package blocktoken is the block access token: what a coordinator hands a
// client with a block's locations so that a storage node serves that
// client that block and nothing else (HDFS's BlockTokenIdentifier), and the
// format the node verifies. It owns the encoding, the signature and the
// verification; it does no I/O, reads no clock (callers pass the time) and
// imports no gRPC.
//
// # Format, version 1
//
// A token is its identifier followed by an HMAC-SHA256 of the identifier
// under the key the identifier names. Integers are big endian.
//
//	version     1 byte   1
//	key id      uint32   which of the cluster's block keys signed it
//	expiry      int64    Unix milliseconds; the token is refused at and after it
//	block id    uint64
//	min GS      uint64   the token covers generation stamps min..max
//	max GS      uint64
//	modes       1 byte   bit set: 1 read, 2 write, 4 copy (transfer), 8 replace
//	pool        1 byte length + that many bytes (1..128: what the issuer
//	            names the pool; Logbook's coordinators name their cluster
//	            id, which a node takes for the pool it serves them)
//	user        1 byte length + that many bytes (who it was issued to, 0..128)
//	mac         32 bytes HMAC-SHA256(key, every byte above)
//
// A token is at most MaxTokenBytes long. Decode refuses anything else: a
// short or long buffer, another version, an empty or unknown mode set, min
// GS above max GS, a zero block id, lengths past the end. Verify then
// checks, in order: the key id is one the node holds, the MAC (in constant
// time), the expiry against the caller's clock, and that the request's
// block, pool, GS and mode are covered.
//
// Keys: the coordinators hold a small ring of keys in their replicated
// state, each with an id and its own expiry, roll a new one a roll ahead
// of its use, and hand the ring to the nodes with every heartbeat reply
// (internal/coordserver/blocktokens.go, internal/nodeserver/blocktokens.go);
// a token signed by a key the node does not hold is refused like a forged
// one.
package blocktoken
