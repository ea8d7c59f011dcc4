package main

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/coordserver"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/spf13/pflag"
)

// serveConfig runs coord serve's flag → config conversion on args and a
// fake environment.
func serveConfig(args []string, envm map[string]string) (coordserver.Config, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return coordserver.Config{}, err
	}
	if err := envflag.Apply(fs, mapLookup(envm)); err != nil {
		return coordserver.Config{}, err
	}
	return f.config(io.Discard)
}

func TestServeDefaultsComeFromDefaultConfig(t *testing.T) {
	cfg, err := serveConfig([]string{"--id", "c1", "--data-dir", "/d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		t.Fatal("no logger")
	}
	cfg.Logger = nil
	want := coordserver.DefaultConfig()
	want.ID, want.DataDir = "c1", "/d"
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n got %+v\nwant %+v", cfg, want)
	}
}

func TestServeFlagsToConfig(t *testing.T) {
	cfg, err := serveConfig([]string{
		"--id", "c2", "--cluster-id", "prod", "--data-dir", "/var/lib/lb",
		"--raft-addr", "0.0.0.0:8000", "--advertise-raft", "10.0.0.2:8000",
		"--grpc-addr", "10.0.0.2:8100", "--gossip-addr", "10.0.0.2:8200", "--http-addr", "10.0.0.2:8300",
		"--advertise-grpc", "c2.example:8100", "--advertise-gossip", "10.0.0.2:8200", "--advertise-http", "c2.example:8300",
		"--bootstrap-expect", "3", "--join", "10.0.0.1:8200, 10.0.0.3:8200,",
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "400ms", "--raft-leader-lease-timeout", "100ms",
		"--raft-commit-timeout", "5ms", "--raft-snapshot-threshold", "100", "--raft-snapshot-interval", "5s",
		"--raft-trailing-logs", "50", "--no-leader-hold", "2s", "--max-event-bytes", "8388608",
		"--journal-linger", "250us", "--log-level", "debug", "--log-json",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Raft
	switch {
	case cfg.ID != "c2", cfg.ClusterID != "prod", cfg.DataDir != "/var/lib/lb":
		t.Errorf("identity: %q %q %q", cfg.ID, cfg.ClusterID, cfg.DataDir)
	case cfg.RaftAddr != "0.0.0.0:8000", cfg.AdvertiseRaft != "10.0.0.2:8000", cfg.GRPCAddr != "10.0.0.2:8100",
		cfg.GossipAddr != "10.0.0.2:8200", cfg.HTTPAddr != "10.0.0.2:8300", cfg.AdvertiseGRPC != "c2.example:8100",
		cfg.AdvertiseGossip != "10.0.0.2:8200", cfg.AdvertiseHTTP != "c2.example:8300":
		t.Errorf("addresses: %+v", cfg)
	case cfg.BootstrapExpect != 3, !reflect.DeepEqual(cfg.Join, []string{"10.0.0.1:8200", "10.0.0.3:8200"}):
		t.Errorf("discovery: %d %q", cfg.BootstrapExpect, cfg.Join)
	case r.HeartbeatTimeout != 200*time.Millisecond, r.ElectionTimeout != 400*time.Millisecond,
		r.LeaderLeaseTimeout != 100*time.Millisecond, r.CommitTimeout != 5*time.Millisecond,
		r.SnapshotThreshold != 100, r.SnapshotInterval != 5*time.Second, r.TrailingLogs != 50:
		t.Errorf("raft: %+v", r)
	case cfg.NoLeaderHold != 2*time.Second, cfg.MaxEventBytes != 8<<20, cfg.MaxRequestBytes != 8<<20:
		t.Errorf("limits: hold %s event %d request %d", cfg.NoLeaderHold, cfg.MaxEventBytes, cfg.MaxRequestBytes)
	case cfg.Journal.Linger != 250*time.Microsecond:
		t.Errorf("journal linger %s", cfg.Journal.Linger)
	case !cfg.Logger.Enabled(context.Background(), -4):
		t.Error("--log-level debug not applied")
	}
}

// TestServeJournalFlagsGiven: the cluster-wide journal settings given on
// the command line or in the environment are marked given (a member warns
// when they differ from the ones the cluster holds); defaults are not.
func TestServeJournalFlagsGiven(t *testing.T) {
	cfg, err := serveConfig([]string{"--id", "c1", "--data-dir", "/d", "--journal-events-per-segment", "512", "--journal-max-segments", "0"},
		map[string]string{"LOGBOOK_SESSION_IDLE_TIMEOUT": "2h"})
	if err != nil {
		t.Fatal(err)
	}
	want := coordserver.JournalGiven{EventsPerSegment: true, MaxSegments: true, SessionIdleTimeout: true}
	if cfg.Journal.Given != want || cfg.Journal.EventsPerSegment != 512 || cfg.Journal.MaxSegments != 0 || cfg.Journal.SessionIdleTimeout != 2*time.Hour {
		t.Fatalf("journal %+v, want given %+v", cfg.Journal, want)
	}
	if _, err := serveConfig([]string{"--id", "c1", "--data-dir", "/d", "--journal-events-per-segment", "1073741825"}, nil); err == nil {
		t.Fatal("events per segment over the bound accepted")
	}
}

func TestServePeersAndEnv(t *testing.T) {
	cfg, err := serveConfig([]string{"--id", "b"}, map[string]string{
		"LOGBOOK_ID":        "ignored", // the flag wins
		"LOGBOOK_DATA_DIR":  "/env/dir",
		"LOGBOOK_PEERS":     "a=127.0.0.1:7000,b=127.0.0.1:7001,c=127.0.0.1:7002",
		"LOGBOOK_RAFT_ADDR": "127.0.0.1:7001",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []coordserver.Peer{{ID: "a", RaftAddr: "127.0.0.1:7000"}, {ID: "b", RaftAddr: "127.0.0.1:7001"}, {ID: "c", RaftAddr: "127.0.0.1:7002"}}
	if cfg.ID != "b" || cfg.DataDir != "/env/dir" || cfg.RaftAddr != "127.0.0.1:7001" || !reflect.DeepEqual(cfg.Peers, want) {
		t.Fatalf("got id %q dir %q raft %q peers %v", cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.Peers)
	}
}

func TestServeConfigErrors(t *testing.T) {
	base := []string{"--id", "c1", "--data-dir", "/d"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"required", nil, []string{"--id is required", "$LOGBOOK_ID", "--data-dir is required"}},
		{"bad peers", append(base, "--peers", "c1=127.0.0.1:7000,oops"), []string{"--peers", `"oops"`}},
		{"bad log level", append(base, "--log-level", "loud"), []string{"--log-level", "loud"}},
		{"unspecified bind", append(base, "--grpc-addr", "0.0.0.0:7100"), []string{"grpc address", "--advertise"}},
		{"bad id", []string{"--id", "-x", "--data-dir", "/d"}, []string{`id "-x"`}},
		{"expect and peers", append(base, "--bootstrap-expect", "3", "--peers", "c1=127.0.0.1:7000"), []string{"alternatives"}},
		{"peers without self", append(base, "--peers", "c2=127.0.0.1:7001"), []string{"do not include"}},
		{"raft timing", append(base, "--raft-election-timeout", "100ms"), []string{"raft timing"}},
		{"bad duration", append(base, "--raft-commit-timeout", "soon"), []string{"raft-commit-timeout"}},
		{"linger", append(base, "--journal-linger", "-1ms"), []string{"linger", "-1ms"}},
		{"long linger", append(base, "--journal-linger", "1s"), []string{"linger 1s", "0..100ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serveConfig(tc.args, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// run executes coord in-process with args and returns the exit code,
// stdout and stderr.
func run(t *testing.T, envm map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: mapLookup(envm)})
	return code, out.String(), errb.String()
}

func TestServeCommandConfigErrorsExit2(t *testing.T) {
	code, _, stderr := run(t, nil, "serve")
	if code != 2 || !strings.Contains(stderr, "coord: invalid configuration: --id is required") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, map[string]string{"LOGBOOK_BOOTSTRAP_EXPECT": "three"}, "serve", "--id", "a", "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "LOGBOOK_BOOTSTRAP_EXPECT") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"nonsense"},
		{"status", "--no-such-flag"},
		{"raft", "remove"},
		{"raft", "bogus"},
		{"journal", "append", "--type", "t"},
		{"journal", "append", "--payload", "x"},
		{"journal", "append", "--type", "t", "--payload", "x", "--file", "-"},
		{"journal", "read", "--consistency", "eventual"},
		{"status", "--address-map", "nonsense"},
		{"dev", "--members", "7"},
		{"bench", "journal", "--clients", "0"},
		{"bench", "journal", "--clients", "4", "--conns", "5"},
		{"bench", "journal", "--conns", "-1"},
		{"bench", "journal", "--gc-percent", "10"},
		{"bench", "tail", "--gc-percent", "0"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 2 || !strings.HasPrefix(stderr, "coord: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, nil, "version")
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("exit %d, %q", code, out)
	}
}

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// TestDefaultEndpointIsTheDefaultAddress: the CLI's and SDK's default
// endpoint is where a coordinator listens by default.
func TestDefaultEndpointIsTheDefaultAddress(t *testing.T) {
	if got := coordserver.DefaultConfig().GRPCAddr; got != client.DefaultEndpoint {
		t.Fatalf("coordinator's default gRPC address %q, the SDK's default endpoint %q", got, client.DefaultEndpoint)
	}
}
