// Package bench holds Logbook's benchmark workloads: the load that coord
// bench generates against a running cluster, as functions any Go code can
// drive (coord bench, and in-process cluster tests and benchmarks).
//
// # What it owns
//
// One workload per file, each a Config with defaults (Default*Config) and
// a Validate method, a Run function and a Result:
//
//   - journal.go: RunJournal, concurrent appends (unary or on the append
//     stream) for a warmup and a measured duration: calls per second,
//     latency percentiles, errors and the generator's own CPU time;
//     timeline.go adds the per-second view (JournalConfig.Timeline).
//   - tail.go: RunTail, events appended once, then read by several
//     followers on the tail stream.
//   - write.go: RunWrite, files written through storage-node pipelines and
//     read back, every byte verified.
//   - recovery.go: RunRecovery, files abandoned mid-block by writers that
//     die, then their lease and block recovery timed, the journal events of
//     the recovery counted and the synced bytes verified.
//
// files.go holds what the two file workloads share (deterministic file
// data, client pools, waiting for storage nodes, a worker pool, cleanup),
// and stats.go the latency samples and percentiles.
//
// A Result is the figures of one run; its JSON field names are the output
// of coord bench ... --json, which scripts in bench/ parse, so they do not
// change. Errors the workload counts rather than fails on are in the
// Result (a count and FirstErr); Run returns an error only when the run
// could not be made. Validate returns a *ConfigError whose message names
// each field by the coord bench flag that sets it (--clients for
// Clients), as coord bench prints it.
//
// # What it may import
//
// The workloads talk to a cluster only through the Go SDK
// (github.com/logbookhq/logbook/client), which also pages through the
// journal (Journal.ReadRange) and decodes its audit events
// (client.DecodeRecoveryEvent) for them. Beyond it they may use fsm's
// event type names, and internal/rusage for the process's CPU time. They do not import internal/coordserver or internal/nodeserver
// (the cluster is whatever the client reaches), nor cobra or any other
// command-line code: flags, text tables and JSON printing are cmd/coord's.
//
// The shell scripts and the separate tools under bench/ (grpcfloor,
// diskcheck, etcdput, a module of its own) are not part of this package.
package bench
