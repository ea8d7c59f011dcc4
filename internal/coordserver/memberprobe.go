package coordserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/logbookhq/logbook/internal/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

const (
	// statusProbeBudget bounds the whole fan-out of a Status answer to the
	// other members: every member is asked at once, under one deadline, so
	// a dead or hung member costs at most this, however many there are.
	statusProbeBudget = 250 * time.Millisecond
	// unreachableMemo is how long a member found unreachable is reported
	// so without being asked again, as long as its connection has not come
	// back: a member that does not even refuse (a host gone from the
	// network) would otherwise cost every Status the whole budget.
	unreachableMemo = 5 * time.Second
)

// probeAll runs probe(ctx, i) for i in [0, n) at once, each under one
// shared context that ends budget after the start, and returns once every
// probe has. A probe that honours its context (a gRPC call does) thus
// ends by the budget whatever the member does.
func probeAll(ctx context.Context, n int, budget time.Duration, probe func(ctx context.Context, i int)) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { probe(ctx, i) })
	}
	wg.Wait()
}

// probeMemo remembers the members found unreachable, by gRPC address.
type probeMemo struct {
	now  func() time.Time
	mu   sync.Mutex
	down map[string]probeFailure
}

type probeFailure struct {
	at  time.Time
	msg string
}

func newProbeMemo() *probeMemo {
	return &probeMemo{now: time.Now, down: map[string]probeFailure{}}
}

// recent returns the failure remembered for addr if it is younger than
// unreachableMemo.
func (m *probeMemo) recent(addr string) (probeFailure, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.down[addr]
	if ok && m.now().Sub(f.at) >= unreachableMemo {
		delete(m.down, addr)
		return probeFailure{}, false
	}
	return f, ok
}

func (m *probeMemo) failed(addr, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down[addr] = probeFailure{at: m.now(), msg: msg}
}

func (m *probeMemo) answered(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.down, addr)
}

// probeMember asks the member at addr for its LocalStatus. The call does
// not wait for a connection that is failing (no wait-for-ready: a member
// whose connection refuses fails at once); a member found unreachable
// within unreachableMemo whose connection is still not ready is not asked
// again — its connection is told to reconnect at once, in the background,
// and the remembered failure is the answer.
func (s *Server) probeMember(ctx context.Context, addr string) (*clusterpb.LocalStatusResponse, error) {
	conn, err := s.peers.get(addr)
	if err != nil {
		return nil, err
	}
	if f, ok := s.probes.recent(addr); ok && conn.GetState() != connectivity.Ready {
		conn.Connect()
		conn.ResetConnectBackoff()
		return nil, fmt.Errorf("unreachable (%s ago): %s", s.probes.now().Sub(f.at).Round(time.Millisecond), f.msg)
	}
	ls, err := clusterpb.NewPeerClient(conn).LocalStatus(ctx, &clusterpb.LocalStatusRequest{}, grpc.WaitForReady(false))
	if err != nil {
		msg := status.Convert(err).Message()
		s.probes.failed(addr, msg)
		// The next attempt is not put off by the redial backoff: a member
		// back from a restart answers the next Status.
		conn.ResetConnectBackoff()
		return nil, fmt.Errorf("unreachable: %s", msg)
	}
	s.probes.answered(addr)
	return ls, nil
}
