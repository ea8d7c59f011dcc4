// Package console is the web console every coordinator serves on its
// HTTP port at /: server-rendered pages (html/template, a little vanilla
// JavaScript, every asset embedded) and, under /ui/api/, the JSON each
// page renders from, so that a script and the page see the same figures.
//
// # What it owns
//
//   - The pages and their API (console.go, views.go, pages.go): overview
//     (cluster, members, health checks, charts), journal (positions,
//     segments, consumers, event counts by type, live tail), storage
//     nodes, namespace browser (directories, a file's blocks and
//     replicas) and block recoveries. Each page is one view struct; the
//     HTML template and the JSON encoder both take it.
//   - Paging and filtering on the server (paging.go): every table takes a
//     page size (clamped to MaxPageSize), an offset or a cursor (clamped
//     to the table), a filter matched as a literal substring, and a sort
//     column from the table's own list.
//   - The live tail (tail.go): server-sent events read from the member's
//     applied state in bounded batches, as the gRPC Tail is; a client that
//     cannot take them within the write deadline is dropped, so the
//     journal never waits for a browser.
//   - The journal index (index.go): one goroutine that follows the
//     member's applied journal and keeps event counts by type and the
//     block recovery audit events, so that a page never reads the whole
//     journal.
//   - The sampler (sampler.go): a ring buffer of the process's own
//     metrics (its Prometheus registry) over the last 15 minutes, from
//     which the overview draws its inline SVG charts.
//   - Login (auth.go): with security on, a request needs a client
//     certificate or a bearer token, from the Authorization header or
//     from the HttpOnly cookie the login form sets; the caller's gate
//     decides it.
//
// # What it does not own
//
// The data. Source, which the coordinator implements, answers each
// figure with the same code its gRPC API answers it with, authorized as
// the console's caller by the same rules (a follower forwards what the
// leader answers). Gate, also the coordinator's, checks tokens and
// certificates as the gRPC API does. The console only reads: every route
// answers GET (and HEAD); the login form's POST changes nothing in the
// cluster.
//
// # What it may import
//
// The generated API messages (api/logbookv1), the log format's messages
// (fsm/fsmpb) to decode the recovery audit events as the SDK does, gRPC's
// status codes to map errors, and the Prometheus client model. Not the
// state machine, the block manager or Raft; not the SDK (its tests run a
// coordinator in process).
package console
