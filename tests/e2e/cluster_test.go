//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

const grpcPort = 7100

// cluster is a compose project of coordinators seen from the host: the
// published gRPC address of each member and SDK clients that reach them.
type cluster struct {
	t *testing.T
	*project
	start time.Time
	// members are the coordinator services (the project may hold storage
	// nodes too).
	members []string

	mu    sync.Mutex
	addrs map[string]string // service -> published 127.0.0.1:port of 7100
	gen   int               // bumped whenever addrs changes
}

// startCluster brings up file's n coordinators (coord1..coordN) as a fresh
// project, registers its teardown (logs first when the test failed) and
// waits until every container is healthy and the cluster has a leader with
// every member healthy.
func startCluster(t *testing.T, file string, n int) *cluster {
	t.Helper()
	services := make([]string, n)
	for i := range services {
		services[i] = fmt.Sprintf("coord%d", i+1)
	}
	p, err := newProject(file, services)
	if err != nil {
		t.Fatal(err)
	}
	return upCluster(t, p, services)
}

// upCluster brings p up (its coordinator services are members, the
// first services of p), registers its teardown and waits for a stable
// cluster, as startCluster.
func upCluster(t *testing.T, p *project, members []string) *cluster {
	t.Helper()
	file, n := filepath.Base(p.file), len(members)
	services := members
	cl := &cluster{t: t, project: p, start: time.Now(), members: members, addrs: map[string]string{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("compose logs of %s (last 200 lines per service):\n%s", p.name, p.logs(200))
		}
		if err := p.down(); err != nil {
			t.Errorf("down %s: %v", p.name, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.up(ctx); err != nil {
		t.Fatalf("up %s: %v", p.name, err)
	}
	cl.logf("project %s up (%s, network %s)", p.name, file, p.network)
	if err := cl.refreshAddrs(services...); err != nil {
		t.Fatal(err)
	}
	cl.waitHealthy(services...)
	st := cl.waitStable(n)
	cl.waitAdmin()
	cl.logf("leader %s, %d members healthy; published gRPC %v", st.LeaderID, n, cl.addrMapCopy())
	return cl
}

// waitAdmin waits until every member takes the harness's client
// certificate (user admin) for an admin: the coordinators bootstrap the
// ACLs with tls-init's token once the log format allows it.
func (cl *cluster) waitAdmin() {
	cl.t.Helper()
	for _, s := range cl.members {
		addr := cl.addr(s)
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cl.tlsConf)))
		if err != nil {
			cl.t.Fatal(err)
		}
		err = poll(60*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			who, err := pb.NewAclClient(cc).WhoAmI(ctx, &pb.WhoAmIRequest{})
			switch {
			case err != nil:
				return err
			case !slices.Contains(who.Roles, "admin"):
				return fmt.Errorf("%s takes %q for roles %v (bootstrapped: %v)", s, who.Name, who.Roles, who.Bootstrapped)
			}
			return nil
		})
		cc.Close()
		if err != nil {
			cl.diagnose("the ACLs are not bootstrapped")
			cl.t.Fatalf("the ACLs are not bootstrapped: %v", err)
		}
	}
}

// logf logs with the time since the cluster started.
func (cl *cluster) logf(format string, args ...any) {
	cl.t.Helper()
	cl.t.Logf("[%6.2fs] %s", time.Since(cl.start).Seconds(), fmt.Sprintf(format, args...))
}

// refreshAddrs re-reads the published gRPC port of services (after a
// restart or reconnect Docker picks a new host port).
func (cl *cluster) refreshAddrs(services ...string) error {
	for _, s := range services {
		a, err := cl.port(s, grpcPort)
		if err != nil {
			return err
		}
		cl.mu.Lock()
		if cl.addrs[s] != a {
			cl.addrs[s] = a
			cl.gen++
		}
		cl.mu.Unlock()
	}
	return nil
}

// ips are the services' addresses on the project's network.
func (cl *cluster) ips(services ...string) map[string]string {
	cl.t.Helper()
	out := map[string]string{}
	for _, s := range services {
		ip, err := cl.project.ip(s)
		if err != nil || ip == "" {
			cl.t.Fatalf("address of %s: %q, %v", s, ip, err)
		}
		out[s] = ip
	}
	return out
}

// addrLess orders IP addresses numerically.
func addrLess(a, b string) bool {
	x, errx := netip.ParseAddr(a)
	y, erry := netip.ParseAddr(b)
	if errx != nil || erry != nil {
		return a < b
	}
	return x.Less(y)
}

// addr is the published gRPC address of a service.
func (cl *cluster) addr(service string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.addrs[service]
}

func (cl *cluster) addrMapCopy() map[string]string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return maps.Clone(cl.addrs)
}

// generation changes whenever a published address does; clients made
// before it should be replaced.
func (cl *cluster) generation() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.gen
}

// config is the SDK config for the current addresses: every member as an
// endpoint, and each advertised name (coordN:7100) mapped to its
// published port.
func (cl *cluster) config() (client.Config, int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cfg := client.Config{
		AddressMap:     map[string]string{},
		AttemptTimeout: 2 * time.Second,
		MaxBackoff:     100 * time.Millisecond,
		TLS:            cl.tlsConf,
	}
	for _, s := range cl.members {
		cfg.Endpoints = append(cfg.Endpoints, cl.addrs[s])
		cfg.AddressMap[fmt.Sprintf("%s:%d", s, grpcPort)] = cl.addrs[s]
	}
	return cfg, cl.gen
}

// newClient is an SDK client for the current addresses and their
// generation.
func (cl *cluster) newClient(ctx context.Context) (*client.Client, int, error) {
	cfg, gen := cl.config()
	c, err := client.New(ctx, cfg)
	return c, gen, err
}

// withClient runs fn with a fresh client.
func (cl *cluster) withClient(ctx context.Context, fn func(c *client.Client) error) error {
	c, _, err := cl.newClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// poll calls cond every interval until it returns nil or timeout passes,
// and returns the last error then.
func poll(timeout, every time.Duration, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err := cond(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// waitHealthy waits for the services' containers to pass their
// healthcheck.
func (cl *cluster) waitHealthy(services ...string) {
	cl.t.Helper()
	err := poll(90*time.Second, 250*time.Millisecond, func(context.Context) error {
		var bad []string
		for _, s := range services {
			h, err := cl.health(s)
			if err != nil {
				return err
			}
			if h != "healthy" {
				bad = append(bad, s+"="+h)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("containers not healthy: %s", strings.Join(bad, ", "))
		}
		return nil
	})
	if err != nil {
		cl.t.Fatal(err)
	}
}

// status is the cluster status as answered by any member.
func (cl *cluster) status(ctx context.Context) (client.ClusterStatus, error) {
	var st client.ClusterStatus
	err := cl.withClient(ctx, func(c *client.Client) error {
		var err error
		st, err = c.Status(ctx)
		return err
	})
	return st, err
}

// waitStable waits until the cluster has a leader and n members, all
// healthy with their gRPC address registered.
func (cl *cluster) waitStable(n int) client.ClusterStatus {
	cl.t.Helper()
	var st client.ClusterStatus
	err := poll(90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		var err error
		if st, err = cl.status(ctx); err != nil {
			return err
		}
		return stable(st, n)
	})
	if err != nil {
		cl.diagnose("cluster not stable")
		cl.t.Fatalf("cluster not stable: %v", err)
	}
	return st
}

func stable(st client.ClusterStatus, n int) error {
	if st.LeaderID == "" {
		return fmt.Errorf("no leader (answered by %s)", st.ResponderID)
	}
	if len(st.Members) != n {
		return fmt.Errorf("%d members, want %d", len(st.Members), n)
	}
	for _, m := range st.Members {
		if !m.Healthy || m.GRPCAddr == "" {
			return fmt.Errorf("member %s not healthy: %s (answered by %s)", m.ID, m.Error, st.ResponderID)
		}
	}
	return nil
}

// leader waits for a leader among want (any member when empty) and
// returns its id, which is also its service name.
func (cl *cluster) leader(want ...string) string {
	cl.t.Helper()
	var id string
	err := poll(60*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		st, err := cl.status(ctx)
		if err != nil {
			return err
		}
		if st.LeaderID == "" {
			return errors.New("no leader")
		}
		if len(want) > 0 && !slices.Contains(want, st.LeaderID) {
			return fmt.Errorf("leader %s, want one of %v", st.LeaderID, want)
		}
		id = st.LeaderID
		return nil
	})
	if err != nil {
		cl.diagnose("no leader")
		cl.t.Fatal(err)
	}
	return id
}

// others are the services not in except.
func (cl *cluster) others(except ...string) []string {
	var out []string
	for _, s := range cl.members {
		if !slices.Contains(except, s) {
			out = append(out, s)
		}
	}
	return out
}

// restart starts killed or stopped members again, re-reads their
// published ports and waits until their containers are healthy.
func (cl *cluster) restart(services ...string) {
	cl.t.Helper()
	for _, s := range services {
		if err := cl.project.start(s); err != nil {
			cl.t.Fatal(err)
		}
	}
	if err := cl.refreshAddrs(services...); err != nil {
		cl.t.Fatal(err)
	}
	cl.waitHealthy(services...)
	for _, s := range services {
		cl.logf("%s restarted, gRPC now at %s", s, cl.addr(s))
	}
}

// reconnect puts a disconnected member back on the network and re-reads
// its published port.
func (cl *cluster) reconnect(service string) {
	cl.t.Helper()
	if err := cl.connect(service); err != nil {
		cl.t.Fatal(err)
	}
	if err := cl.refreshAddrs(service); err != nil {
		cl.t.Fatal(err)
	}
	cl.logf("%s reconnected, gRPC now at %s", service, cl.addr(service))
}

// waitUnhealthy waits until a member other than service reports service
// unhealthy: the fault has taken effect.
func (cl *cluster) waitUnhealthy(service string) {
	cl.t.Helper()
	err := poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		st, err := cl.status(ctx)
		if err != nil {
			return err
		}
		for _, m := range st.Members {
			if m.ID == service && !m.Healthy && st.ResponderID != service {
				return nil
			}
		}
		return fmt.Errorf("%s still healthy per %s", service, st.ResponderID)
	})
	if err != nil {
		cl.t.Fatal(err)
	}
}

// nextSeq is the next seq per a linearizable read: every acknowledged
// append is below it.
func (cl *cluster) nextSeq(ctx context.Context) (uint64, error) {
	var next uint64
	err := cl.withClient(ctx, func(c *client.Client) error {
		_, info, err := c.Journal().Read(ctx, 1, 1)
		next = info.NextSeq
		return err
	})
	return next, err
}

// memberNextSeq is the next seq in one member's local (stale) state.
func (cl *cluster) memberNextSeq(ctx context.Context, service string) (uint64, error) {
	var next uint64
	err := cl.withClient(ctx, func(c *client.Client) error {
		_, info, err := c.Journal().ReadAt(ctx, cl.addr(service), 1, 1)
		next = info.NextSeq
		return err
	})
	return next, err
}

// waitCaughtUp waits until every one of services has applied at least up
// to the cluster's next seq as of the call.
func (cl *cluster) waitCaughtUp(services ...string) {
	cl.t.Helper()
	var target uint64
	err := poll(30*time.Second, 200*time.Millisecond, func(ctx context.Context) (err error) {
		target, err = cl.nextSeq(ctx)
		return err
	})
	if err != nil {
		cl.t.Fatalf("linearizable read: %v", err)
	}
	err = poll(60*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		for _, s := range services {
			n, err := cl.memberNextSeq(ctx, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			if n < target {
				return fmt.Errorf("%s: next seq %d, want at least %d", s, n, target)
			}
		}
		return nil
	})
	if err != nil {
		cl.diagnose("not caught up")
		cl.t.Fatalf("not caught up: %v", err)
	}
}

// diagnose logs, before a failure, how each member is reached and what it
// sees: from the host through its published port (the test's path), and
// from inside every running member, who answers at each peer's name (the
// members' own path: Docker's DNS and the project network). A line per
// log call, so that run.sh's recap of a failed test keeps them all.
func (cl *cluster) diagnose(why string) {
	cl.logf("%s; how each member is reached from the host, through its published port:", why)
	for _, line := range strings.Split(strings.TrimRight(cl.reachability(cl.members...), "\n"), "\n") {
		cl.logf("%s", line)
	}
	cl.logf("from inside each running member, who answers at each peer's name (coord status --endpoints PEER:7100):")
	var b strings.Builder
	type probe struct{ from, to, out string }
	var probes []*probe
	for _, from := range cl.members {
		if ip, err := cl.project.ip(from); err != nil || ip == "" {
			fmt.Fprintf(&b, "  %s: not running (%v)\n", from, err)
			continue
		}
		for _, to := range cl.members {
			if to != from {
				probes = append(probes, &probe{from: from, to: to})
			}
		}
	}
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Go(func() {
			id := cl.project.ids[p.from]
			out, err := docker("exec", id, "/coord", "status", "--json", "--timeout", "3s",
				"--endpoints", fmt.Sprintf("%s:%d", p.to, grpcPort))
			if err != nil { // the command line names the container by its long id
				err = errors.New(strings.ReplaceAll(err.Error(), id, p.from))
			}
			p.out = summarizeStatus(out, err)
		})
	}
	wg.Wait()
	for _, p := range probes {
		fmt.Fprintf(&b, "  %s asks %s: %s\n", p.from, p.to, p.out)
	}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		cl.logf("%s", line)
	}
}

// summarizeStatus shortens coord status --json output (or its error) to
// one line: who answered and what it sees.
func summarizeStatus(out string, err error) string {
	if err != nil {
		return err.Error()
	}
	var st struct {
		Leader       string `json:"leader"`
		Term         uint64 `json:"term"`
		AppliedIndex uint64 `json:"applied_index"`
		AnsweredBy   string `json:"answered_by"`
		Members      []struct {
			ID      string `json:"id"`
			Healthy bool   `json:"healthy"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return fmt.Sprintf("unreadable answer %q: %v", out, err)
	}
	var unhealthy []string
	for _, m := range st.Members {
		if !m.Healthy {
			unhealthy = append(unhealthy, m.ID)
		}
	}
	return fmt.Sprintf("answered by %s: leader %q, term %d, applied %d, unhealthy %v", st.AnsweredBy, st.Leader, st.Term, st.AppliedIndex, unhealthy)
}

// reachability describes, for a failure message, how each service is
// reached from the host: its published gRPC address now and the one the
// test uses, its container's address, MAC and health, whether a TCP
// connection to the published address opens, and what a Status call
// through it answers.
func (cl *cluster) reachability(services ...string) string {
	var b strings.Builder
	for _, s := range services {
		published, perr := cl.project.port(s, grpcPort)
		ip, ierr := cl.project.ip(s)
		h, herr := cl.health(s)
		dial := "connects"
		if c, err := net.DialTimeout("tcp", cl.addr(s), 2*time.Second); err != nil {
			dial = err.Error()
		} else {
			c.Close()
		}
		mac, merr := docker("inspect", "--format", `{{with index .NetworkSettings.Networks "`+cl.project.network+`"}}{{.MacAddress}}{{end}}`, cl.project.ids[s])
		fmt.Fprintf(&b, "  %s: test uses %s, published %s (%v), container %s (%v) MAC %s (%v), %s (%v), TCP: %s, Status: %s\n",
			s, cl.addr(s), published, perr, ip, ierr, mac, merr, h, herr, dial, statusThrough(cl.addr(s), cl.creds()))
	}
	return b.String()
}

// statusThrough asks the member behind one address alone for the cluster
// status, on a connection of its own, and says what it answered.
func statusThrough(addr string, creds grpc.DialOption) string {
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := pb.NewClusterClient(conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("answered by %s: leader %q, term %d, applied %d", st.ResponderId, st.LeaderId, st.Term, st.AppliedIndex)
}

// waitRejoined waits until the cluster is stable again with every member
// and services (just restarted, unpaused or reconnected) caught up.
// killLeaderAndRestart SIGKILLs the leader, waits for a new one among the
// others, runs during (the load goes on without the old leader), then
// restarts the old leader and waits until it has rejoined and caught up.
func (cl *cluster) killLeaderAndRestart(why string, during func()) {
	cl.t.Helper()
	old := cl.leader()
	cl.logf("SIGKILL leader %s%s", old, why)
	if err := cl.kill(old); err != nil {
		cl.t.Fatal(err)
	}
	cl.logf("new leader %s", cl.leader(cl.others(old)...))
	during()
	cl.restart(old)
	cl.waitRejoined(old)
}

func (cl *cluster) waitRejoined(services ...string) {
	cl.t.Helper()
	cl.waitStable(len(cl.members))
	cl.waitCaughtUp(services...)
	cl.logf("%v rejoined and caught up", services)
}

// waitConverged waits, with the load stopped, until every member's next
// seq equals the cluster's (a linearizable read in the same round), and
// returns it. Appends whose calls were cancelled may still commit for a
// moment, so a round that sees the journal grow starts over.
func (cl *cluster) waitConverged() uint64 {
	cl.t.Helper()
	var target uint64
	err := poll(60*time.Second, 200*time.Millisecond, func(ctx context.Context) (err error) {
		if target, err = cl.nextSeq(ctx); err != nil {
			return fmt.Errorf("linearizable read: %w", err)
		}
		for _, s := range cl.members {
			n, err := cl.memberNextSeq(ctx, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			if n != target {
				return fmt.Errorf("%s: next seq %d, cluster %d", s, n, target)
			}
		}
		return nil
	})
	if err != nil {
		cl.t.Fatalf("members did not converge: %v", err)
	}
	return target
}

// readMember pages through every event a member holds, with stale reads
// from that member only.
func (cl *cluster) readMember(service string) ([]client.StoredEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []client.StoredEvent
	err := cl.withClient(ctx, func(c *client.Client) error {
		out = out[:0] // a retry on another client starts over
		err := c.Journal().ReadRange(ctx, 1, 0, func(e client.StoredEvent) error {
			out = append(out, e)
			return nil
		}, client.AtEndpoint(cl.addr(service)))
		if err != nil {
			return fmt.Errorf("read %s: %w", service, err)
		}
		return nil
	})
	return out, err
}

// verify waits until every member converged, then checks each member's whole journal: seqs contiguous from
// 1, every acknowledged append at its seq with its payload, no payload
// twice, and every member identical to the first.
//
// An append whose caller gave up (the load stopped, a call timed out) may
// still commit after the members converged: it was in a batch already
// proposed. Such a straggler makes a member hold more events than the
// converged next seq; the check then converges and reads again.
func (cl *cluster) verify(acked map[uint64]string) {
	cl.t.Helper()
	var final uint64
	all := make([][]client.StoredEvent, len(cl.members))
	for attempt := 0; ; attempt++ {
		final = cl.waitConverged()
		grew := false
		for i, s := range cl.members {
			evs, err := cl.readMember(s)
			if err != nil {
				cl.t.Fatal(err)
			}
			all[i] = evs
			grew = grew || uint64(len(evs)) > final-1
		}
		if !grew || attempt == 4 {
			break
		}
		cl.logf("events committed after convergence (a given-up append); converging again")
	}
	var first []client.StoredEvent
	for i, s := range cl.members {
		evs := all[i]
		if err := checkJournal(evs, final, acked); err != nil {
			cl.t.Errorf("%s: %v", s, err)
			continue
		}
		if first == nil {
			first = evs
		} else if err := sameEvents(first, evs); err != nil {
			cl.t.Errorf("%s differs from %s: %v", s, cl.members[0], err)
		}
	}
	cl.logf("verified %d members: %d events each, %d acknowledged appends present", len(cl.members), final-1, len(acked))
}

func checkJournal(evs []client.StoredEvent, next uint64, acked map[uint64]string) error {
	if uint64(len(evs)) != next-1 {
		return fmt.Errorf("%d events, want %d (next seq %d)", len(evs), next-1, next)
	}
	byPayload := make(map[string]uint64, len(evs))
	for i, e := range evs {
		if e.Seq != uint64(i)+1 {
			return fmt.Errorf("event %d has seq %d: seqs not contiguous from 1", i, e.Seq)
		}
		if prev, dup := byPayload[string(e.Payload)]; dup {
			return fmt.Errorf("payload %q at seq %d and %d", e.Payload, prev, e.Seq)
		}
		byPayload[string(e.Payload)] = e.Seq
	}
	var missing []string
	for seq, p := range acked {
		switch {
		case seq < 1 || seq >= next:
			missing = append(missing, fmt.Sprintf("seq %d (%q) beyond the journal", seq, p))
		case string(evs[seq-1].Payload) != p:
			missing = append(missing, fmt.Sprintf("seq %d holds %q, acknowledged %q", seq, evs[seq-1].Payload, p))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%d acknowledged appends lost or moved, e.g. %s", len(missing), strings.Join(missing[:min(5, len(missing))], "; "))
	}
	return nil
}

func sameEvents(a, b []client.StoredEvent) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d events vs %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Seq != y.Seq || x.Type != y.Type || !bytes.Equal(x.Payload, y.Payload) || x.ClientID != y.ClientID || x.RequestSeq != y.RequestSeq || x.Index != y.Index {
			return fmt.Errorf("seq %d: %+v vs %+v", x.Seq, x, y)
		}
	}
	return nil
}
