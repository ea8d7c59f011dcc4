// Command etcdput is the put workload of etcd's own benchmark tool
// (tools/benchmark "put"), rebuilt here because that tool is not published as a
// Go module: --clients goroutines share --conns clientv3 connections
// round-robin, each issuing Put requests of --key-size byte keys and
// --val-size byte values taken from one shared request channel until --total
// requests are done. Every connection is given all --endpoints, and clientv3
// balances requests across them, so load is spread over all members as with
// etcd's benchmark without --target-leader. With --pin, connection i is
// given endpoint i mod n only (the clients are spread over the members by
// connection, the shape of coord bench journal --spread).
//
// It lives in its own module so that Logbook's module does not depend on etcd;
// bench/etcd-vs-logbook.sh builds it together with an etcd server of the same
// version and runs both benchmarks in one run.
package main

import (
	"crypto/tls"

	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints")
	conns := flag.Int("conns", 1, "gRPC connections shared by the clients")
	clients := flag.Int("clients", 1, "concurrent clients")
	total := flag.Int("total", 10000, "total put requests")
	keySize := flag.Int("key-size", 8, "key size in bytes")
	valSize := flag.Int("val-size", 8, "value size in bytes")
	keySpace := flag.Int("key-space-size", 1, "maximum distinct keys")
	seqKeys := flag.Bool("sequential-keys", false, "use sequential keys instead of random ones")
	asJSON := flag.Bool("json", false, "print the result as one JSON object")
	pin := flag.Bool("pin", false, "give connection i only endpoint i mod n instead of all of them")
	certFile := flag.String("cert", "", "client certificate (TLS; with --key and --cacert)")
	keyFile := flag.String("key", "", "client certificate key")
	caFile := flag.String("cacert", "", "CA bundle that signed the members' certificates (TLS)")
	flag.Parse()
	if *conns < 1 || *clients < 1 || *total < 1 || *keySize < 8 || *valSize < 0 || *keySpace < 1 {
		fmt.Fprintln(os.Stderr, "etcdput: --conns, --clients, --total, --key-space-size ≥ 1 and --key-size ≥ 8 required")
		os.Exit(2)
	}

	var tlsConf *tls.Config
	if *caFile != "" {
		var err error
		if tlsConf, err = (transport.TLSInfo{CertFile: *certFile, KeyFile: *keyFile, TrustedCAFile: *caFile}).ClientConfig(); err != nil {
			fmt.Fprintln(os.Stderr, "etcdput: TLS:", err)
			os.Exit(2)
		}
	}
	eps := strings.Split(*endpoints, ",")
	cs := make([]*clientv3.Client, *conns)
	for i := range cs {
		ceps := eps
		if *pin {
			ceps = eps[i%len(eps) : i%len(eps)+1]
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: ceps, DialTimeout: 5 * time.Second, TLS: tlsConf})
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdput:", err)
			os.Exit(1)
		}
		defer c.Close()
		cs[i] = c
	}

	type req struct{ key, val string }
	reqs := make(chan req, *clients)
	lat := make([][]time.Duration, *clients)
	errs := make([]int, *clients)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			kv := cs[i%len(cs)]
			for r := range reqs {
				t0 := time.Now()
				_, err := kv.Put(context.Background(), r.key, r.val)
				if err != nil {
					errs[i]++
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}(i)
	}
	val := strings.Repeat("v", *valSize)
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := 0; i < *total; i++ {
		k := make([]byte, *keySize)
		n := i % *keySpace
		if !*seqKeys {
			n = rnd.Intn(*keySpace)
		}
		binary.PutVarint(k, int64(n))
		reqs <- req{key: string(k), val: val}
	}
	close(reqs)
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0

	var all []time.Duration
	nerr := 0
	for i := range lat {
		all = append(all, lat[i]...)
		nerr += errs[i]
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		idx := int(p/100*float64(len(all))+0.5) - 1
		if idx < 0 {
			idx = 0
		}
		if idx >= len(all) {
			idx = len(all) - 1
		}
		return float64(all[idx].Microseconds()) / 1000
	}
	res := map[string]any{
		"requests":   len(all),
		"errors":     nerr,
		"seconds":    elapsed.Seconds(),
		"ops_per_s":  float64(len(all)) / elapsed.Seconds(),
		"p50_ms":     pct(50),
		"p99_ms":     pct(99),
		"p999_ms":    pct(99.9),
		"clients":    *clients,
		"conns":      *conns,
		"val_size":   *valSize,
		"endpoints":  eps,
		"pin":        *pin,
		"etcd_bench": "put",
		// The load generator's own CPU (user + system) over the run: it
		// shares the machine with the cluster.
		"cpu_s": cpu.Seconds(),
	}
	if len(all) > 0 {
		res["cpu_us_per_op"] = float64(cpu.Microseconds()) / float64(len(all))
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("etcd put: %d requests in %.2fs: %.0f ops/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, %d errors, client CPU %.2f s\n",
		len(all), elapsed.Seconds(), res["ops_per_s"], res["p50_ms"], res["p99_ms"], res["p999_ms"], nerr, cpu.Seconds())
}

// processCPU is this process's CPU time (user + system) so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
