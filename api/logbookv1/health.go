package logbookv1

// ReadyService is the gRPC health service name a coordinator reports
// SERVING under only while it is ready: a leader is known and its state
// has caught up with the leader's (what /readyz answers). The empty
// service name reports liveness.
const ReadyService = "logbook.v1.Ready"
