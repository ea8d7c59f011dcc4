//go:build tools

// The etcd server is built from this module too (go build go.etcd.io/etcd/server/v3),
// so the benchmark client and server come from one etcd release.
package main

import _ "go.etcd.io/etcd/server/v3"
