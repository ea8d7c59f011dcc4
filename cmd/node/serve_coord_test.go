package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestServeCoordinatorFlags(t *testing.T) {
	cfg, err := serveConfig([]string{
		"--id", "n1", "--data-dir", "/d", "--coord-endpoints", "c1:7100, c2:7100", "--heartbeat-interval", "500ms",
		"--join", "g1:7600,g2:7600",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.CoordEndpoints, []string{"c1:7100", "c2:7100"}) || cfg.HeartbeatInterval != 500*time.Millisecond ||
		!reflect.DeepEqual(cfg.Join, []string{"g1:7600", "g2:7600"}) {
		t.Fatalf("coordinator settings: %v %v %v", cfg.CoordEndpoints, cfg.HeartbeatInterval, cfg.Join)
	}
	// From the environment.
	cfg, err = serveConfig([]string{"--id", "n1", "--data-dir", "/d"}, map[string]string{
		"LOGBOOK_COORD_ENDPOINTS": "c3:7100", "LOGBOOK_HEARTBEAT_INTERVAL": "2s", "LOGBOOK_JOIN": "g3:7600",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.CoordEndpoints, []string{"c3:7100"}) || cfg.HeartbeatInterval != 2*time.Second || !reflect.DeepEqual(cfg.Join, []string{"g3:7600"}) {
		t.Fatalf("from the environment: %v %v %v", cfg.CoordEndpoints, cfg.HeartbeatInterval, cfg.Join)
	}
	// Standalone by default, with the default interval.
	cfg, err = serveConfig([]string{"--id", "n1", "--data-dir", "/d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CoordEndpoints) != 0 || cfg.HeartbeatInterval != 3*time.Second {
		t.Fatalf("defaults: %v %v", cfg.CoordEndpoints, cfg.HeartbeatInterval)
	}
	for name, args := range map[string][]string{
		"endpoint": {"--coord-endpoints", "nohost"},
		"interval": {"--coord-endpoints", "c1:7100", "--heartbeat-interval", "0s"},
		"join":     {"--join", "x"},
	} {
		_, err := serveConfig(append([]string{"--id", "n1", "--data-dir", "/d"}, args...), nil)
		if err == nil || !strings.Contains(err.Error(), map[string]string{"endpoint": "coordinator endpoint", "interval": "heartbeat interval", "join": "join"}[name]) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
