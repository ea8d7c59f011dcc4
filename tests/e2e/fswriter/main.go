// Command fswriter is the e2e suite's dead writer: a process on the host
// that writes a file through the SDK, Syncs, writes some more without
// syncing, says so on stdout and then waits — renewing its lease — until
// the test SIGKILLs it mid-block.
//
//	fswriter -endpoints 127.0.0.1:49153 -address-map coord1:7100=127.0.0.1:49153,node1:7400=127.0.0.1:49160,... \
//	  -path /e2e/a -seed 1 -synced 300123 -unsynced 200000 \
//	  -tls-cert admin.pem -tls-key admin-key.pem -tls-ca ca.pem
//
// stdout carries one JSON object per line:
//
//	{"event":"synced","path":"/e2e/a","acked":300123,"client_id":"sdk-…"}  after Sync returned
//	{"event":"ready","written":500123}                                    after the unsynced writes
//
// acked is the length Sync acknowledged: every pipeline node acked it.
// The file's bytes are Data(seed, synced+unsynced); the test regenerates
// them with the same function (tests/e2e/recovery_test.go, writerData).
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Data is the writer's deterministic byte stream for seed: ChaCha8 keyed
// with the seed's little-endian bytes.
func Data(seed int64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], uint64(seed))
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fswriter:", err)
		os.Exit(1)
	}
}

func run() error {
	endpoints := flag.String("endpoints", "", "coordinator gRPC addresses host:port, comma-separated")
	addrMap := flag.String("address-map", "", "advertised=reachable address pairs, comma-separated (coordinators and storage nodes)")
	path := flag.String("path", "", "file to create")
	seed := flag.Int64("seed", 1, "seed of the data")
	synced := flag.Int("synced", 300_000, "bytes written before Sync")
	unsynced := flag.Int("unsynced", 0, "bytes written after Sync, never synced")
	replication := flag.Uint("replication", 3, "replication factor")
	blockSize := flag.Uint64("block-size", 1<<20, "block size (a multiple of 512)")
	renew := flag.Duration("renew", 500*time.Millisecond, "lease renewal period while waiting to be killed")
	tlsCert := flag.String("tls-cert", "", "client certificate (PEM); with -tls-key and -tls-ca every dial uses TLS")
	tlsKey := flag.String("tls-key", "", "key of -tls-cert")
	tlsCA := flag.String("tls-ca", "", "the cluster CA (PEM)")
	lifetime := flag.Duration("lifetime", 5*time.Minute, "exit (status 3) after this long if nobody killed the writer")
	flag.Parse()
	if *endpoints == "" || *path == "" {
		return fmt.Errorf("-endpoints and -path are required")
	}
	m := map[string]string{}
	for _, kv := range strings.Split(*addrMap, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-address-map entry %q: want advertised=reachable", kv)
		}
		m[k] = v
	}
	eps := strings.Split(*endpoints, ",")

	ctx, cancel := context.WithTimeout(context.Background(), *lifetime)
	defer cancel()
	cfg := client.Config{Endpoints: eps, AddressMap: m, AttemptTimeout: 2 * time.Second, MaxBackoff: 100 * time.Millisecond}
	creds := insecure.NewCredentials()
	if *tlsCA != "" {
		var err error
		if cfg.TLS, err = client.LoadTLS(*tlsCert, *tlsKey, *tlsCA); err != nil {
			return err
		}
		creds = credentials.NewTLS(cfg.TLS)
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()

	data := Data(*seed, *synced+*unsynced)
	fs := c.FS()
	w, err := fs.Create(ctx, *path, client.CreateOptions{Replication: uint32(*replication), BlockSize: *blockSize})
	if err != nil {
		return fmt.Errorf("create %s: %w", *path, err)
	}
	if _, err := w.Write(data[:*synced]); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := w.Sync(ctx); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(map[string]any{"event": "synced", "path": *path, "acked": *synced, "client_id": c.ClientID()}); err != nil {
		return err
	}
	// Past 64 KiB these go down the pipeline as packets nobody waits for.
	if _, err := w.Write(data[*synced:]); err != nil {
		return fmt.Errorf("write after sync: %w", err)
	}
	if err := out.Encode(map[string]any{"event": "ready", "written": len(data)}); err != nil {
		return err
	}

	// Keep the lease alive until killed. The SDK's writer renews every 20 s
	// (not configurable), longer than the short hard limit the suite runs
	// with, so renew here, through any coordinator (followers forward).
	conns := make([]*grpc.ClientConn, 0, len(eps))
	for _, e := range eps {
		cc, err := grpc.NewClient(e, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		conns = append(conns, cc)
	}
	t := time.NewTicker(*renew)
	defer t.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "fswriter: nobody killed me within", *lifetime)
			os.Exit(3)
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, *renew)
		_, err := pb.NewNamespaceClient(conns[i%len(conns)]).RenewLease(rctx, &pb.RenewLeaseRequest{ClientName: c.ClientID()})
		rcancel()
		if err != nil {
			i++ // try the next coordinator next time
		}
	}
}
