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

	// ErrorInfo metadata keys.
	MetaLeaderID   = "leader_id"
	MetaLeaderAddr = "leader_addr"
	MetaClusterID  = "cluster_id"

	// MDClusterID is the gRPC metadata key that carries the caller's
	// cluster id: required between members, optional from clients.
	MDClusterID = "logbook-cluster-id"
)
