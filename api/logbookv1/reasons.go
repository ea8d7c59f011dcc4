package logbookv1

// Error reasons carried in google.rpc.ErrorInfo (domain ErrorDomain) on
// every Logbook error status, so clients act on errors without parsing
// messages. Servers and the SDK share these constants.
const (
	ErrorDomain          = "logbook"
	ReasonNotLeader      = "NOT_LEADER"
	ReasonNoLeader       = "NO_LEADER"
	ReasonClusterID      = "CLUSTER_ID_MISMATCH"
	ReasonOutcomeUnknown = "OUTCOME_UNKNOWN"
	ReasonHalted         = "HALTED"
	// ReasonSessionExpired: the cluster no longer holds the exactly-once
	// session the request names (evicted, or replaced by a forced
	// import); the request was not applied, and the client must start a
	// new session. Whether an earlier attempt of it was applied is not
	// known.
	ReasonSessionExpired = "SESSION_EXPIRED"
	// ReasonLogFormat: the request needs a newer replicated log format
	// than the cluster's (some voter runs an older build).
	ReasonLogFormat = "LOG_FORMAT"
	// ReasonJournalFull: the retained journal is over the leader's
	// retention quota (ResourceExhausted); the append was not applied.
	// Appends are taken again once trim brings the journal under it.
	ReasonJournalFull = "JOURNAL_FULL"
	// ReasonNoIdentity: the cluster runs with TLS and the call carries no
	// verified certificate (Unauthenticated).
	ReasonNoIdentity = "NO_IDENTITY"
	// ReasonWrongRole: the caller's certificate is of a role this RPC does
	// not accept, or names another member than the request claims
	// (PermissionDenied).
	ReasonWrongRole = "WRONG_ROLE"
	// ReasonBadToken: the call's bearer token is malformed, or its secret
	// does not match (Unauthenticated).
	ReasonBadToken = "BAD_TOKEN"
	// ReasonTokenUnknown: the cluster holds no token of that accessor: it
	// was revoked, or never created (Unauthenticated).
	ReasonTokenUnknown = "TOKEN_UNKNOWN"
	// ReasonTokenExpired: the token is past its expiry (Unauthenticated).
	ReasonTokenExpired = "TOKEN_EXPIRED"
	// ReasonPermission: the caller is known and its roles lack the
	// permission the message names (PermissionDenied).
	ReasonPermission = "PERMISSION"
	// ReasonAclBootstrapped: the one-time ACL bootstrap already happened
	// (FailedPrecondition).
	ReasonAclBootstrapped = "ALREADY_BOOTSTRAPPED"
	// ReasonNoBlockToken: a storage node of a cluster with ACLs takes block
	// data calls from clients only with a block access token, which the
	// coordinators hand out with the block's locations (Unauthenticated).
	ReasonNoBlockToken = "NO_BLOCK_TOKEN"
	// ReasonBlockToken: the block access token is malformed, forged, signed
	// by a key the node does not hold, or does not cover the request's
	// block, generation stamp or access mode (PermissionDenied).
	ReasonBlockToken = "BLOCK_TOKEN"
	// ReasonBlockTokenExpired: the block access token is past its expiry:
	// ask the coordinators again (Stat, or the write's next file op) for a
	// new one (PermissionDenied).
	ReasonBlockTokenExpired = "BLOCK_TOKEN_EXPIRED"
	// ReasonBlockKeysUnknown: the node has not yet heard from the
	// coordinators whether block access tokens are on, so it serves no
	// client's block call yet (Unavailable: try another replica or again).
	ReasonBlockKeysUnknown = "BLOCK_KEYS_UNKNOWN"

	// MDAuthorization is the metadata key of a bearer token
	// ("Bearer lbt_...").
	MDAuthorization = "authorization"

	// ErrorInfo metadata keys.
	MetaLeaderID   = "leader_id"
	MetaLeaderAddr = "leader_addr"
	MetaClusterID  = "cluster_id"

	// MDClusterID is the gRPC metadata key that carries the caller's
	// cluster id: required between members, optional from clients.
	MDClusterID = "logbook-cluster-id"
)

// Storage node (DataNode service) reasons. A replica error carries the
// replica package's reason in upper snake case (checksum-mismatch becomes
// CHECKSUM_MISMATCH); these are the node's own.
const (
	ReasonBadSetup         = "BAD_SETUP"          // malformed WriteSetup or request
	ReasonBadPacket        = "BAD_PACKET"         // malformed packet
	ReasonPacketTooLarge   = "PACKET_TOO_LARGE"   // data over 64 KiB
	ReasonSeqnoOutOfOrder  = "SEQNO_OUT_OF_ORDER" // duplicated or out-of-order seqno
	ReasonChecksumMismatch = "CHECKSUM_MISMATCH"  // a chunk does not match its checksum
	ReasonDownstreamFailed = "DOWNSTREAM_FAILED"  // a node further down the pipeline failed
	ReasonWriterStopped    = "WRITER_STOPPED"     // a recovery took the replica over
	ReasonNodeRestarting   = "NODE_RESTARTING"    // the node is shutting down for a restart
	ReasonShuttingDown     = "SHUTTING_DOWN"      // the node is already shutting down

	// OOBAckSeqno is the seqno of an out-of-band WriteAck (a node of the
	// pipeline is restarting).
	OOBAckSeqno = -2

	// MetaNodeID names the storage node that produced the error.
	MetaNodeID = "node_id"

	// MaxCacheReportBlocks bounds the block ids of a heartbeat's cache
	// report: a node sends at most this many, a coordinator refuses more.
	MaxCacheReportBlocks = 1 << 16
)
