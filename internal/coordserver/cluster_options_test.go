package coordserver

import (
	"strings"
	"testing"
)

// TestStartClusterRefusesBadOptions: a cluster of no coordinators, or too
// many, or without a directory or ports, is refused before anything
// starts.
func TestStartClusterRefusesBadOptions(t *testing.T) {
	t.Parallel()
	good := ClusterOptions{Coordinators: 1, Dir: t.TempDir(), Ports: testPorts(t)}
	for _, tc := range []struct {
		name string
		mod  func(*ClusterOptions)
		want string
	}{
		{"no coordinators", func(o *ClusterOptions) { o.Coordinators = 0 }, "want 1..5"},
		{"six coordinators", func(o *ClusterOptions) { o.Coordinators = 6 }, "want 1..5"},
		{"negative nodes", func(o *ClusterOptions) { o.Nodes = -1 }, "storage nodes"},
		{"no dir", func(o *ClusterOptions) { o.Dir = "" }, "no data directory"},
		{"no ports", func(o *ClusterOptions) { o.Ports = Ports{} }, "no ports"},
		{"nodes without node ports", func(o *ClusterOptions) { o.Nodes, o.Ports.Node = 1, nil }, "no ports"},
	} {
		o := good
		tc.mod(&o)
		if c, err := StartCluster(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: StartCluster = %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
