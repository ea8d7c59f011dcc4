package authz_test

import (
	"testing"

	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/authz"
	"github.com/logbookhq/logbook/journal/export"
)

// TestBoundsMatchTheNamespace: a path the namespace takes is one authz
// can match, and the other way round (an external test: fsm imports
// authz).
func TestBoundsMatchTheNamespace(t *testing.T) {
	if authz.MaxPathBytes != fsm.MaxPathBytes || authz.MaxComponentBytes != fsm.MaxComponentBytes {
		t.Errorf("path bounds %d/%d, the namespace's %d/%d", authz.MaxPathBytes, authz.MaxComponentBytes, fsm.MaxPathBytes, fsm.MaxComponentBytes)
	}
	if authz.MaxEventTypePrefixBytes != export.MaxTypeLen {
		t.Errorf("event-type prefixes of at most %d bytes, event types of %d", authz.MaxEventTypePrefixBytes, export.MaxTypeLen)
	}
	for _, p := range []string{"", "a", "a/b", "//", "/a/", "/a//b", "/./a", "/a/.", "/a/..", "/../a", "/a\x00b"} {
		if authz.ValidatePathPrefix(p) == nil || fsm.ValidPath(p) == nil {
			t.Errorf("%.40q: authz or the namespace takes it", p)
		}
	}
}
