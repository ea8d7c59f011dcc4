// Command grpcfloor measures what a unary gRPC call costs on this machine
// before any Raft, disk or state machine work: a Journal service whose
// Append replies at once, served with the coordinator's gRPC settings
// (static flow-control windows, the handler goroutine pool), and called
// with 256-byte appends from --clients goroutines over --conns connections
// on 127.0.0.1 — the shape of coord bench journal and of etcd's put
// benchmark. Server and clients run in this one process, so its CPU time
// per call is the whole framework cost of one call, both ends and the
// kernel's loopback TCP included.
//
// The comparison with etcd (bench/etcd-vs-logbook.sh) runs on one machine
// that the load generator shares with the cluster; where both systems are
// CPU-bound, the throughput ratio is the ratio of CPU per operation, and
// this floor is the part of it neither system can shed. Its heap is a few
// MB, so its collector runs often: compare it at the load generators' GOGC
// (400, as FLOOR=1 in that script does), where it costs a quarter less per
// call than at Go's default of 100.
//
//	GOGC=400 go run ./bench/grpcfloor --clients 100 --conns 10 --duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"github.com/logbookhq/logbook/internal/rusage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// echoJournal answers every Append at once with the next sequence number.
type echoJournal struct {
	pb.UnimplementedJournalServer
	seq atomic.Uint64
}

func (e *echoJournal) Append(_ context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	n := uint64(len(req.Events))
	last := e.seq.Add(n)
	return &pb.AppendResponse{FirstSeq: last - n + 1, Count: uint32(n)}, nil
}

func main() {
	clients := flag.Int("clients", 100, "concurrent callers")
	conns := flag.Int("conns", 10, "connections the callers share round-robin")
	size := flag.Int("size", 256, "payload bytes per append")
	duration := flag.Duration("duration", 10*time.Second, "measured duration (after a 1 s warm-up)")
	flag.Parse()
	if *clients < 1 || *conns < 1 || *conns > *clients || *size < 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "grpcfloor: want --clients >= --conns >= 1, --size >= 0, --duration > 0")
		os.Exit(2)
	}
	if err := run(*clients, *conns, *size, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "grpcfloor:", err)
		os.Exit(1)
	}
}

func run(clients, conns, size int, duration time.Duration) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The coordinator's server options, less its interceptors.
	opts := append([]grpc.ServerOption{grpc.MaxConcurrentStreams(4096), grpc.NumStreamWorkers(256)}, grpcflow.ServerOptions()...)
	srv := grpc.NewServer(opts...)
	pb.RegisterJournalServer(srv, &echoJournal{})
	go srv.Serve(ln)
	defer srv.Stop()

	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
			append(grpcflow.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			return err
		}
		defer cc.Close()
		ccs[i] = cc
	}
	req := &pb.AppendRequest{Events: []*pb.Event{{Type: "bench", Payload: make([]byte, size)}}}

	start := time.Now().Add(time.Second)
	end := start.Add(duration)
	var cpu0 atomic.Int64
	startCPU := time.AfterFunc(time.Until(start), func() { cpu0.Store(int64(rusage.ProcessCPU())) })
	defer startCPU.Stop()
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := pb.NewJournalClient(ccs[i%conns])
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.Append(ctx, req)
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
				if t1 := time.Now(); !t0.Before(start) && !t1.After(end) {
					lat[i] = append(lat[i], t1.Sub(t0))
				}
			}
		}()
	}
	wg.Wait()
	cpu := rusage.ProcessCPU() - time.Duration(cpu0.Load())
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return fmt.Errorf("no call finished inside the measured window")
	}
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	fmt.Printf("{\"ops_per_sec\": %.0f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"cpu_s\": %.2f, \"cpu_us_per_op\": %.1f, \"clients\": %d, \"conns\": %d, \"size\": %d}\n",
		float64(len(all))/duration.Seconds(), pct(0.50), pct(0.99), cpu.Seconds(), float64(cpu.Microseconds())/float64(len(all)), clients, conns, size)
	return nil
}
