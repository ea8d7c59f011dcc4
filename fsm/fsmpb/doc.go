// Package fsmpb holds the messages of Logbook's durable formats: the Raft
// command envelope and its commands (command.proto), the replicated
// namespace's records, ops and audit events (namespace.proto), and the
// records of a snapshot. They are written into the Raft log, into
// snapshots and, as audit events, into the journal, so every field number
// is forever: never renumber a field, retire it with `reserved`, and bump
// the envelope version (fsm.CommandVersion) for a change an old reader
// must refuse.
//
// The package is messages only: no services, no gRPC. The client API
// (api/logbookv1) has its own messages for what it returns, converted from
// these at the coordinator's edge, so that an API change never changes the
// log format by accident, nor the reverse. fsm/fixture_log11_test.go reads
// a log, a snapshot and an export written by an earlier build and requires
// the same state.
//
// The proto package is logbook.fsm.v1; the names in it never appear on
// the wire of any format (protobuf encodes field numbers only).
package fsmpb
