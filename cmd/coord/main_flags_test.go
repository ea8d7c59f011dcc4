package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandTakesConnectionFlags: the connection flags are accepted
// by every command, and those that do not talk to a cluster ignore them
// (and their LOGBOOK_* variables).
func TestEveryCommandTakesConnectionFlags(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, name := range connectionFlags {
			if c.Flags().Lookup(name) == nil {
				t.Errorf("coord %s does not take --%s", c.CommandPath(), name)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(env{lookup: mapLookup(nil)}))

	dir := t.TempDir()
	conn := []string{"--endpoints", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem", "--token", "lbt_x"}
	envm := map[string]string{"LOGBOOK_ENDPOINTS": "127.0.0.1:1", "LOGBOOK_TLS_CA": "/nonexistent/ca.pem"}
	for _, args := range [][]string{
		{"version"},
		{"tls", "ca", "create", "--dir", dir},
		{"gossip", "keygen"},
	} {
		if code, out, stderr := run(t, envm, append(args, conn...)...); code != 0 {
			t.Errorf("coord %s with connection flags: exit %d, %q %q", strings.Join(args, " "), code, out, stderr)
		}
	}
	// An offline command keeps its own errors: a missing file is a
	// runtime failure (exit 1), not a usage error.
	code, _, stderr := run(t, envm, append([]string{"journal", "inspect", filepath.Join(dir, "missing")}, conn...)...)
	if code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("journal inspect of a missing file: exit %d, %q", code, stderr)
	}
}
