package grpcflow

import "testing"

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"coord1:7100":            "passthrough:///coord1:7100",
		"127.0.0.1:7100":         "passthrough:///127.0.0.1:7100",
		"[::1]:7100":             "passthrough:///[::1]:7100",
		"dns:///coord1:7100":     "dns:///coord1:7100",
		"unix:///run/coord.sock": "unix:///run/coord.sock",
		"passthrough:///h:1":     "passthrough:///h:1",
	} {
		if got := Target(in); got != want {
			t.Errorf("Target(%q) = %q, want %q", in, got, want)
		}
	}
}
