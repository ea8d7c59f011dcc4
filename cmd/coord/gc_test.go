package main

import (
	"errors"
	"runtime/debug"
	"testing"
)

func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	t.Setenv("GOGC", "")
	if err := setGCPercent(400); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 400 {
		t.Fatalf("GC percent after --gc-percent 400: %d", got)
	}
	var ee *exitError
	if err := setGCPercent(minGCPercent - 1); !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("--gc-percent %d: %v, want a usage error", minGCPercent-1, err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("a refused --gc-percent changed the GC percent to %d", got)
	}
	t.Setenv("GOGC", "150") // the environment's setting is the runtime's and wins
	if err := setGCPercent(400); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("--gc-percent overrode GOGC: %d", got)
	}
}
