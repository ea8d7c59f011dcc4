package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/envflag"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/nodeserver/blockio"
	"github.com/logbookhq/logbook/replica"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
)

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// serveConfig runs node serve's flag → config conversion on args and a
// fake environment.
func serveConfig(args []string, envm map[string]string) (nodeserver.Config, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nodeserver.Config{}, err
	}
	if err := envflag.Apply(fs, mapLookup(envm)); err != nil {
		return nodeserver.Config{}, err
	}
	return f.config(io.Discard)
}

func TestServeDefaultsComeFromDefaultConfig(t *testing.T) {
	cfg, err := serveConfig([]string{"--id", "n1", "--data-dir", "/d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = nil
	want := nodeserver.DefaultConfig()
	want.ID, want.DataDir = "n1", "/d"
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n got %+v\nwant %+v", cfg, want)
	}
}

func TestServeFlagsAndEnvironment(t *testing.T) {
	cfg, err := serveConfig([]string{
		"--id", "n2", "--volume", "/mnt/a", "--volume", "/mnt/b:ssd,/mnt/c:ARCHIVE",
		"--reserved-bytes", "1024", "--volume-failures-tolerated", "1", "--max-locked-memory", "4096",
		"--grpc-addr", "0.0.0.0:8400", "--advertise-grpc", "n2.example:8400", "--http-addr", "10.0.0.2:8500",
		"--gossip-addr", "10.0.0.2:8600", "--advertise-gossip", "n2.example:8600", "--block-pool", "BP-7",
	}, map[string]string{
		"LOGBOOK_GRPC_ADDR":      "10.9.9.9:1", // the flag wins
		"LOGBOOK_ADVERTISE_HTTP": "n2.example:8500",
		"LOGBOOK_LOG_LEVEL":      "debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	wantVols := []nodeserver.VolumeSpec{{Path: "/mnt/a"}, {Path: "/mnt/b", StorageType: replica.StorageSSD}, {Path: "/mnt/c", StorageType: replica.StorageArchive}}
	switch {
	case cfg.ID != "n2" || !reflect.DeepEqual(cfg.Volumes, wantVols):
		t.Errorf("identity and volumes: %q %+v", cfg.ID, cfg.Volumes)
	case cfg.ReservedBytes != 1024 || cfg.VolumeFailuresTolerated != 1 || cfg.MaxLockedMemory != 4096 || cfg.BlockPool != "BP-7":
		t.Errorf("storage: %+v", cfg)
	case cfg.GRPCAddr != "0.0.0.0:8400" || cfg.AdvertiseGRPC != "n2.example:8400" || cfg.HTTPAddr != "10.0.0.2:8500" ||
		cfg.AdvertiseHTTP != "n2.example:8500" || cfg.GossipAddr != "10.0.0.2:8600" || cfg.AdvertiseGossip != "n2.example:8600":
		t.Errorf("addresses: %+v", cfg)
	case !cfg.Logger.Enabled(context.Background(), -4):
		t.Error("LOGBOOK_LOG_LEVEL=debug not applied")
	}
	// Everything from the environment.
	cfg, err = serveConfig(nil, map[string]string{"LOGBOOK_ID": "n3", "LOGBOOK_VOLUME": "/v1,/v2:RAM_DISK", "LOGBOOK_RESERVED_BYTES": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "n3" || len(cfg.Volumes) != 2 || cfg.Volumes[1].StorageType != replica.StorageRAMDisk || cfg.ReservedBytes != 7 {
		t.Fatalf("from the environment: %+v", cfg)
	}
}

func TestServeConfigErrors(t *testing.T) {
	badKeyring := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(badKeyring, []byte(`["`+base64.StdEncoding.EncodeToString(make([]byte, 16))+`"`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no id":          {[]string{"--data-dir", "/d"}, nil, "--id is required"},
		"no volume":      {[]string{"--id", "n1"}, nil, "--data-dir or --volume is required"},
		"both":           {[]string{"--id", "n1", "--data-dir", "/d", "--volume", "/v"}, nil, "alternatives"},
		"bad pool":       {[]string{"--id", "n1", "--data-dir", "/d", "--block-pool", "../x"}, nil, "block pool"},
		"unspecified ip": {[]string{"--id", "n1", "--data-dir", "/d", "--grpc-addr", "0.0.0.0:1"}, nil, "advertise"},
		"bad env":        {[]string{"--id", "n1", "--data-dir", "/d"}, map[string]string{"LOGBOOK_RESERVED_BYTES": "lots"}, "LOGBOOK_RESERVED_BYTES"},
		"tolerated":      {[]string{"--id", "n1", "--data-dir", "/d", "--volume-failures-tolerated", "1"}, nil, "volume failures tolerated"},
		"gossip key":     {[]string{"--id", "n1", "--data-dir", "/d", "--gossip-key", "AAAA"}, nil, "--gossip-key: invalid gossip key: 3 bytes"},
		"gossip env":     {[]string{"--id", "n1", "--data-dir", "/d"}, map[string]string{"LOGBOOK_GOSSIP_KEY": "!"}, "--gossip-key: invalid gossip key: not base64"},
		"keyring file":   {[]string{"--id", "n1", "--data-dir", "/d", "--gossip-keyring-file", badKeyring}, nil, "--gossip-keyring-file: keyring file"},
	} {
		_, err := serveConfig(tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, env{stdout: &out, stderr: &errb, lookup: mapLookup(nil)})
	return code, out.String(), errb.String()
}

func TestCommands(t *testing.T) {
	if code, out, _ := run(t, "version"); code != 0 || strings.TrimSpace(out) == "" {
		t.Errorf("version: %d %q", code, out)
	}
	code, out, _ := run(t, "serve", "--help")
	if code != 0 {
		t.Errorf("serve --help: exit %d", code)
	}
	for _, flag := range []string{"--id", "--data-dir", "--volume", "--reserved-bytes", "--volume-failures-tolerated", "--max-locked-memory",
		"--grpc-addr", "--http-addr", "--gossip-addr", "--advertise-grpc", "--advertise-http", "--advertise-gossip", "--block-pool",
		"--log-level", "--log-json", "$LOGBOOK_VOLUME"} {
		if !strings.Contains(out, flag) {
			t.Errorf("serve --help lacks %s", flag)
		}
	}
	if code, _, stderr := run(t, "serve"); code != 2 || !strings.Contains(stderr, "--id is required") {
		t.Errorf("serve without flags: exit %d, %q", code, stderr)
	}
	if code, _, _ := run(t, "serve", "--no-such-flag"); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
}

// The smoke test: `node serve` in-process on free ports; a block written
// and read back through gRPC; SIGTERM-like cancel stops it with exit 0.
func TestServeSmoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan [2]string, 1)
	var logs bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"serve", "--id", "n1", "--data-dir", dir, "--grpc-addr", "127.0.0.1:0",
			"--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--log-level", "warn"},
			env{stdout: io.Discard, stderr: &syncBuffer{b: &logs}, lookup: mapLookup(nil),
				started: func(g, h string) { addrs <- [2]string{g, h} }})
	}()
	var grpcAddr, httpAddr string
	select {
	case a := <-addrs:
		grpcAddr, httpAddr = a[0], a[1]
	case code := <-done:
		t.Fatalf("node serve exited with %d", code)
	case <-time.After(30 * time.Second):
		t.Fatal("node serve did not start")
	}
	conn, err := grpc.NewClient(grpcAddr, nodeserver.DialOptions(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	data := bytes.Repeat([]byte("logbook smoke "), 10_000)
	p, err := blockio.Open(wctx, conn, &pb.WriteSetup{Pool: "BP-1", BlockId: 1, Gs: 1, Stage: pb.BlockStage_BLOCK_STAGE_PIPELINE_SETUP_CREATE}, blockio.Options{Address: grpcAddr})
	if err != nil {
		t.Fatal(err)
	}
	pkts := blockio.SplitPackets(data, 0, blockio.MaxPacketData)
	pkts[len(pkts)-1].Last = true
	for _, pkt := range pkts {
		if _, err := p.Send(wctx, pkt); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	stream, err := pb.NewDataNodeClient(conn).ReadBlock(wctx, &pb.ReadBlockRequest{Pool: "BP-1", BlockId: 1, Gs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if blockio.Verify(c.GetData(), c.GetChecksums()) >= 0 {
			t.Fatal("a chunk does not verify")
		}
		got = append(got, c.GetData()...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, wrote %d", len(got), len(data))
	}
	resp, err := http.Get("http://" + httpAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; logs:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node serve did not stop")
	}
}
