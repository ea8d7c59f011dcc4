package coordserver

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/grpcflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestProbeAllConcurrentUnderOneDeadline proves the Status fan-out's bound
// by its structure: every probe is in flight before any ends (each waits
// for all the others to start, which a one-at-a-time fan-out never lets
// happen before the deadline), all share one deadline at most the budget
// after the start, and probes that never answer end with that deadline.
func TestProbeAllConcurrentUnderOneDeadline(t *testing.T) {
	t.Parallel()
	const n = 5
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	deadlines := make([]time.Time, n)
	left := make([]time.Duration, n) // from the probe's start to its deadline
	met := make([]bool, n)           // probe i saw every probe start before its deadline
	probeAll(context.Background(), n, statusProbeBudget, func(ctx context.Context, i int) {
		deadlines[i], _ = ctx.Deadline()
		left[i] = time.Until(deadlines[i])
		started.Done()
		select {
		case <-all:
			met[i] = true
		case <-ctx.Done():
		}
	})
	for i := range n {
		if !met[i] {
			t.Errorf("probe %d ran out of time before every probe had started: the fan-out is not concurrent", i)
		}
		if deadlines[i].IsZero() || deadlines[i] != deadlines[0] {
			t.Errorf("probe %d deadline %v, probe 0 %v: want one shared deadline", i, deadlines[i], deadlines[0])
		}
		if left[i] > statusProbeBudget {
			t.Errorf("probe %d started %v before its deadline, over the %v budget", i, left[i], statusProbeBudget)
		}
	}

	// Probes that never answer: probeAll returns, each ended by the
	// shared deadline, not by anything else.
	errs := make([]error, n)
	probeAll(context.Background(), n, statusProbeBudget, func(ctx context.Context, i int) {
		<-ctx.Done()
		errs[i] = ctx.Err()
	})
	for i, err := range errs {
		if err != context.DeadlineExceeded {
			t.Errorf("hung probe %d ended with %v, want the budget's deadline", i, err)
		}
	}
}

func TestProbeMemoForgetsAfterTheMemo(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	m := newProbeMemo()
	m.now = func() time.Time { return now }
	m.failed("a:1", "connection refused")
	if f, ok := m.recent("a:1"); !ok || f.msg != "connection refused" {
		t.Fatalf("recent = %+v, %v; want the failure", f, ok)
	}
	now = now.Add(unreachableMemo - time.Millisecond)
	if _, ok := m.recent("a:1"); !ok {
		t.Fatal("forgotten before the memo ran out")
	}
	now = now.Add(time.Millisecond)
	if _, ok := m.recent("a:1"); ok {
		t.Fatal("still remembered once the memo ran out")
	}
	m.failed("a:1", "x")
	m.answered("a:1")
	if _, ok := m.recent("a:1"); ok {
		t.Fatal("remembered after the member answered")
	}
}

// statusAt asks the member at addr for the cluster status, raw gRPC.
func statusAt(t *testing.T, ctx context.Context, addr string, req *pb.StatusRequest) *pb.StatusResponse {
	t.Helper()
	cc, err := grpc.NewClient(grpcflow.Target(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := pb.NewClusterClient(cc).Status(ctx, req)
	if err != nil {
		t.Fatalf("Status at %s: %v", addr, err)
	}
	return st
}

func memberByID(t *testing.T, st *pb.StatusResponse, id string) *pb.MemberStatus {
	t.Helper()
	for _, m := range st.Members {
		if m.Id == id {
			return m
		}
	}
	t.Fatalf("member %s not in the status %v", id, st.Members)
	return nil
}

// TestStatusWithMembersDown: two of five members down, one killed and one
// hung (its gRPC port accepts connections and never speaks): Status still
// answers, marks both unreachable and the live ones healthy; the next Status
// reports the remembered failures without asking again; the killed
// member, restarted, is healthy again.
func TestStatusWithMembersDown(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 5)
	leader := tc.waitLeader()
	fs := tc.followers(leader)
	dead, hung, live := fs[0], fs[1], fs[2:]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventually(t, 20*time.Second, "every member registered and healthy", func() bool {
		var unregistered bool
		tc.server(leader).fsm.View(func(st *fsm.State) {
			for _, cfg := range tc.cfgs {
				if m, _ := st.Member(cfg.ID); m == nil {
					unregistered = true
				}
			}
		})
		if unregistered {
			return false
		}
		st := statusAt(t, ctx, tc.cfgs[leader].GRPCAddr, &pb.StatusRequest{})
		for _, m := range st.Members {
			if !m.Healthy {
				return false
			}
		}
		return true
	})
	tc.kill(dead)
	tc.kill(hung)
	ln, err := net.Listen("tcp", tc.cfgs[hung].GRPCAddr)
	if err != nil {
		t.Fatalf("listen on the hung member's gRPC address: %v", err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // accepted and never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	st := statusAt(t, ctx, tc.cfgs[leader].GRPCAddr, &pb.StatusRequest{})
	for _, i := range []int{dead, hung} {
		m := memberByID(t, st, tc.cfgs[i].ID)
		if m.Healthy || m.LastContactMs != -1 || !strings.HasPrefix(m.Error, "unreachable") {
			t.Errorf("member %s down: healthy %v, last contact %d, error %q; want unreachable", m.Id, m.Healthy, m.LastContactMs, m.Error)
		}
	}
	for _, i := range live {
		if m := memberByID(t, st, tc.cfgs[i].ID); !m.Healthy {
			t.Errorf("live member %s: healthy false (%s)", m.Id, m.Error)
		}
	}
	st = statusAt(t, ctx, tc.cfgs[leader].GRPCAddr, &pb.StatusRequest{})
	for _, i := range []int{dead, hung} {
		if m := memberByID(t, st, tc.cfgs[i].ID); !strings.HasPrefix(m.Error, "unreachable (") || !strings.Contains(m.Error, " ago)") {
			t.Errorf("member %s, second Status: error %q; want the remembered failure", m.Id, m.Error)
		}
	}

	tc.start(dead)
	eventually(t, 20*time.Second, "the restarted member healthy", func() bool {
		st := statusAt(t, ctx, tc.cfgs[leader].GRPCAddr, &pb.StatusRequest{})
		return memberByID(t, st, tc.cfgs[dead].ID).Healthy
	})
}

// TestStatusLocalViewAsksNoMember: a local-view Status, and client.New,
// ask no other member (no LocalStatus call anywhere), and still name the
// leader and every member's gRPC address.
func TestStatusLocalViewAsksNoMember(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eventually(t, 20*time.Second, "every member registered", func() bool {
		st := statusAt(t, ctx, tc.cfgs[f].GRPCAddr, &pb.StatusRequest{LocalView: true})
		for _, m := range st.Members {
			if m.GrpcAddr == "" {
				return false
			}
		}
		return st.LeaderGrpcAddr == tc.cfgs[leader].GRPCAddr
	})
	probes := func() int {
		n := 0
		for i := range tc.cfgs {
			n += okCalls(tc.server(i), clusterpb.Peer_LocalStatus_FullMethodName)
		}
		return n
	}
	n0 := probes()
	st := statusAt(t, ctx, tc.cfgs[f].GRPCAddr, &pb.StatusRequest{LocalView: true})
	c, err := client.New(ctx, client.Config{Endpoints: tc.endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := probes(); n != n0 {
		t.Errorf("a local-view Status and client.New made %d LocalStatus calls, want none", n-n0)
	}
	for _, m := range st.Members {
		if m.Id != tc.cfgs[f].ID && (m.Healthy || m.Error != "not probed") {
			t.Errorf("local view: member %s healthy %v error %q; want not probed", m.Id, m.Healthy, m.Error)
		}
	}
	// The full Status does probe: the count is a real one.
	statusAt(t, ctx, tc.cfgs[f].GRPCAddr, &pb.StatusRequest{})
	if n := probes(); n != n0+2 {
		t.Errorf("a full Status made %d LocalStatus calls, want 2", n-n0)
	}
}
