// Package authz holds Logbook's authorization rules as pure,
// deterministic functions: who may call an RPC of a given access class on
// a given resource. No I/O, no clock, no goroutines, and no gRPC: the RPC
// layer maps its proto option (logbook.v1.access) and its status codes to
// and from this package's types at the edge.
//
// The package owns:
//
//   - Access, the class of an RPC (access.go), with the same numbers as
//     the proto enum logbook.v1.Access so that the edge's mapping is a
//     conversion;
//   - Identity, who calls, as authentication established it: anonymous,
//     a client certificate (its name and the role written in it:
//     coordinator, node or client), or a bearer token (identity.go);
//   - Role and Grant, what a user may do (etcd's roles with key-range
//     permissions, HDFS path permissions): a grant is read, write or
//     admin, on everything, on the journal (all event types or some
//     event-type prefixes) or on the file system (all paths or some path
//     prefixes); admin implies write implies read (role.go). The built-in
//     roles reader, writer and admin grant their level on everything;
//   - the matching of prefixes (prefix.go): by path component for paths
//     ("/a" covers "/a/b", not "/ab"), by bytes as given for event types
//     ("fs." covers "fs.create"; "fs" would also cover "fsck": write the
//     dot to mean a family);
//   - the validation of roles, grants, prefixes, role and user names, with
//     bounded sizes, returning errors that match ErrInvalid and never
//     panicking, so that roles that come over the network later are
//     checked by the same functions (role.go, prefix.go);
//   - bearer tokens (token.go): "lbt_", a 16-hex-digit accessor that names
//     the token, "_", and a 32-byte random secret in base64url, of which
//     the cluster keeps only the SHA-256; parsing is bounded and never
//     puts the secret in an error (FuzzParseBearer);
//   - Policy, an immutable value built once from roles and bindings
//     (user name to role names) and shared freely (policy.go), and its
//     Authorize (authorize.go): a map lookup by the caller's name and a
//     scan of that user's grants, with no allocation when the call is
//     allowed.
//
// # The rules of Authorize, in order
//
//  1. ACCESS_PUBLIC: anyone, even anonymous.
//  2. An unknown or unspecified class: refused (fail closed).
//  3. An anonymous caller, or an identity without a name: Unauthenticated.
//  4. A certificate of role coordinator: allowed every class (see below).
//  5. ACCESS_MEMBER: a certificate of role coordinator only (rule 4).
//  6. ACCESS_NODE: a certificate of role node.
//  7. ACCESS_RECOVERY: a certificate of role node (or coordinator, rule 4).
//  8. ACCESS_BLOCK: any authenticated caller. A storage node of a cluster
//     with ACLs decides its clients' block calls by their block access
//     tokens instead (internal/nodeserver/blocktokens.go).
//  9. ACCESS_AUTHENTICATED: any authenticated caller.
//  10. ACCESS_READ, ACCESS_WRITE, ACCESS_ADMIN: the grants of the roles
//     bound to the caller's name (certificate and token names share one
//     namespace of users). A call with no scope (Resource{}: status,
//     membership, snapshots) needs a grant of the level on everything;
//     a call on the whole journal or file system needs one on all of it;
//     a call on named event types or paths needs, for each of them, a
//     grant of the level that covers it.
//
// Refusals are Decisions, not errors: Unauthenticated (the RPC layer
// answers UNAUTHENTICATED) or Forbidden (PERMISSION_DENIED), with the
// missing permission in words.
//
// # Why a coordinator certificate may call everything
//
// Members forward calls to the leader (ROUTE_FORWARD, appends in
// batches, NodeLink calls of the storage nodes), and today the leader sees
// the forwarding member's certificate, not the original caller. Until a
// forwarded call carries the original caller's identity (and the leader
// authorizes that identity instead), a coordinator certificate has to be
// allowed whatever it may forward: every class. Once it does, rule 4
// narrows to ACCESS_MEMBER and ACCESS_RECOVERY plus the forwarded
// caller's own rights.
package authz
