package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/internal/testports"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// fakeMember answers Cluster.Status naming leader as the leader, and
// counts the calls and whether each asked for the local view.
type fakeMember struct {
	pb.UnimplementedClusterServer
	addr string

	mu      sync.Mutex
	leader  string
	members []string
	calls   int
	full    int // calls without local_view
}

func (f *fakeMember) Status(_ context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if !req.GetLocalView() {
		f.full++
	}
	st := &pb.StatusResponse{ResponderId: f.addr, LeaderGrpcAddr: f.leader}
	for _, m := range f.members {
		st.Members = append(st.Members, &pb.MemberStatus{Id: m, GrpcAddr: m})
	}
	return st, nil
}

func (f *fakeMember) set(leader string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = leader
}

func (f *fakeMember) counts() (calls, full int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.full
}

func startFake(t *testing.T) *fakeMember {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMember{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	pb.RegisterClusterServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return f
}

// deadAddr is an address nothing listens on: connections are refused.
func deadAddr(t *testing.T) string { return testports.Addr(t, false) }

// TestDeadEndpointPassedOver: with the first endpoint dead, New finds the
// leader by a local-view Status (no full Status round), the dead endpoint
// is marked down, later calls are all answered by the live member, and
// the rotation never hands out the dead one again.
func TestDeadEndpointPassedOver(t *testing.T) {
	t.Parallel()
	live, dead := startFake(t), deadAddr(t)
	live.set(live.addr)
	live.members = []string{dead, live.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, Config{Endpoints: []string{dead, live.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if calls, full := live.counts(); calls == 0 || full != 0 {
		t.Fatalf("New made %d Status calls, %d of them full; want local-view ones only", calls, full)
	}
	if l := c.cachedLeader(); l != live.addr {
		t.Fatalf("leader %q, want %s", l, live.addr)
	}
	before, _ := live.counts()
	const n = 6
	for range n {
		st, err := c.Status(ctx)
		if err != nil || st.ResponderID != live.addr {
			t.Fatalf("Status = %+v, %v; want the live member's answer", st, err)
		}
	}
	if calls, _ := live.counts(); calls-before != n {
		t.Errorf("%d Status calls reached the live member, want %d", calls-before, n)
	}
	for range 2 * n {
		if e := c.nextEndpoint(); e == dead {
			t.Fatalf("the rotation handed out the dead endpoint %s", e)
		}
	}
	// A call that meets the refusal marks the endpoint down (New's
	// discovery may have ended before it arrived).
	if _, err := c.statusAt(ctx, dead); err == nil || !c.downAddr(dead) {
		t.Fatalf("Status at the dead endpoint: %v, down %v; want a failure that marks it down", err, c.downAddr(dead))
	}
}

// TestDiscoverPassesOverDeadLeader: members still naming a leader that is
// down (they have not noticed yet) do not send the client to it; once a
// member names a live leader, the client takes it.
func TestDiscoverPassesOverDeadLeader(t *testing.T) {
	t.Parallel()
	live, dead := startFake(t), deadAddr(t)
	live.set(dead)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, Config{Endpoints: []string{live.addr, dead}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.statusAt(ctx, dead); err == nil {
		t.Fatal("Status at a dead address answered")
	}
	c.setLeader("")
	err = c.discover(ctx)
	if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("discover with the named leader down: %v; want no leader, the named one unreachable", err)
	}
	if l := c.cachedLeader(); l != "" {
		t.Fatalf("leader %q cached, want none", l)
	}
	live.set(live.addr)
	if err := c.discover(ctx); err != nil || c.cachedLeader() != live.addr {
		t.Fatalf("discover = %v, leader %q; want %s", err, c.cachedLeader(), live.addr)
	}
}

// TestNoEndpointAnswers: with every endpoint dead, New fails naming each
// endpoint tried and its failure.
func TestNoEndpointAnswers(t *testing.T) {
	t.Parallel()
	a, b := deadAddr(t), deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := New(ctx, Config{Endpoints: []string{a, b}})
	var ee *EndpointsError
	if !errors.As(err, &ee) || len(ee.Endpoints) != 2 {
		t.Fatalf("New = %v; want an EndpointsError naming both endpoints", err)
	}
	for _, ep := range []string{a, b} {
		if !strings.Contains(err.Error(), ep+": ") {
			t.Errorf("error %q does not name %s", err, ep)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || !errors.Is(err, ErrUnavailable) {
		t.Errorf("error %v: want each endpoint's Unavailable reachable by errors.As/Is", err)
	}
}

// hungAddr is an address that accepts connections and never speaks: a
// member gone from the network as a caller sees it through a proxy.
func hungAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

// verifier is a fakeMember that also answers Verify (a call routed to the
// leader).
type verifier struct{ *fakeMember }

func (v verifier) Verify(context.Context, *pb.VerifyRequest) (*pb.VerifyResponse, error) {
	return &pb.VerifyResponse{Index: 7, Consistent: true}, nil
}

// TestHungLeaderPassedOver: a member names as leader an endpoint that
// accepts connections and never answers. A call for the leader must not
// wait on that connection: the caller's deadline is below the connect
// timeout (grpcflow.Reconnect's 5 s MinConnectTimeout), so only a client
// that leaves the hung connection for another member can succeed.
func TestHungLeaderPassedOver(t *testing.T) {
	t.Parallel()
	hung := hungAddr(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	live := verifier{&fakeMember{addr: ln.Addr().String(), leader: hung}}
	srv := grpc.NewServer()
	pb.RegisterClusterServer(srv, live)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	c, err := New(ctx, Config{Endpoints: []string{live.addr, hung}, AttemptTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Cluster().Verify(ctx)
	if err != nil || r.Index != 7 {
		t.Fatalf("Verify with the named leader hung: %+v, %v; want the live member's answer", r, err)
	}
	if !c.downAddr(hung) {
		t.Errorf("the hung endpoint %s is not marked down", hung)
	}
}
