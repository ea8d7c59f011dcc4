package coordserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"github.com/logbookhq/logbook/internal/clusterpb"
	"github.com/logbookhq/logbook/internal/nodeserver"
	"github.com/logbookhq/logbook/internal/pki"
	"github.com/logbookhq/logbook/internal/tlsgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// secureCluster starts 3 coordinators and one storage node with TLS on
// every connection (ClusterOptions.Secure) and waits for a ready leader.
func secureCluster(t *testing.T) *Cluster { return secureClusterWith(t, false, nil) }

// secureClusterWith is secureCluster with ACL enforcement as asked and
// mod applied to every coordinator's config.
func secureClusterWith(t *testing.T, acl bool, mod func(*Config)) *Cluster {
	t.Helper()
	c, err := StartCluster(ClusterOptions{
		Coordinators: 3, Nodes: 1, Dir: t.TempDir(), ClusterID: "secure", CoordinatorPrefix: "c", NodePrefix: "n",
		Ports: testPorts(t), Logger: testLogger(t), Secure: true, ACL: acl,
		Coordinator: func(_ int, c *Config) {
			testTimings(c)
			if mod != nil {
				mod(c)
			}
		},
		Node: func(_ int, c *nodeserver.Config) {
			c.HeartbeatInterval = 100 * time.Millisecond
			c.Logger = testLogger(t)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// dialAs opens a gRPC connection to addr presenting the certificate of
// (name, role) made by the cluster's CA; name "" presents none.
func dialAs(t *testing.T, c *Cluster, addr, name string, role, want pki.Role) *grpc.ClientConn {
	t.Helper()
	var d pki.Dialer
	var err error
	if name == "" {
		d, err = pki.CAOnly(c.TLS().CA())
	} else {
		d, err = c.TLS().Source(name, role)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dialCreds(t, addr, tlsgrpc.Client(d, want))
}

// adminClient is an SDK client of c as ClusterUser, closed when the test
// ends, and its TLS configuration.
func adminClient(ctx context.Context, t *testing.T, c *Cluster) (*client.Client, *tls.Config) {
	t.Helper()
	tlsConf, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(ctx, client.Config{Endpoints: c.Endpoints(), TLS: tlsConf, AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin, tlsConf
}

func dialCreds(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func refusedWith(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// TestSecureClusterRefusesStrangers: with TLS on, Raft, member and node
// links run over mutual TLS (the cluster elects, the node registers, an
// admin client appends), and a caller without a certificate, with a
// certificate of the wrong role or naming another node, or of another CA,
// is refused with the right code and changes nothing.
func TestSecureClusterRefusesStrangers(t *testing.T) {
	t.Parallel()
	c := secureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, _ := adminClient(ctx, t, c)
	if _, err := admin.Journal().Append(ctx, client.Event{Type: "sec.first", Payload: []byte("a")}); err != nil {
		t.Fatalf("admin append: %v", err)
	}
	// The node registered over its TLS link.
	eventually(t, 30*time.Second, "the node live", func() bool {
		nl, err := admin.Nodes(ctx)
		return err == nil && len(nl.Nodes) == 1 && nl.Nodes[0].Live
	})
	// Gossip is encrypted: every coordinator keeps its keyring file.
	for i := range c.Coordinators() {
		if _, err := os.Stat(c.Config(i).Security.GossipKeyringFile); err != nil {
			t.Errorf("%s: gossip keyring: %v", c.Config(i).ID, err)
		}
	}
	// Status shows every member's certificate expiry.
	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.TLSNotAfter.Before(time.Now().Add(24 * time.Hour)) {
			t.Errorf("member %s: certificate expiry %v in status", m.ID, m.TLSNotAfter)
		}
	}
	before, err := admin.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ep := c.Endpoints()[0]
	journalAs := func(name string, role pki.Role) pb.JournalClient {
		return pb.NewJournalClient(dialAs(t, c, ep, name, role, pki.RoleCoordinator))
	}
	appendReq := &pb.AppendRequest{Events: []*pb.Event{{Type: "sec.stranger", Payload: []byte("x")}}}
	_, err = journalAs("", "").Append(ctx, appendReq)
	refusedWith(t, "append without a certificate", err, codes.Unauthenticated)
	_, err = journalAs("", "").Trim(ctx, &pb.TrimRequest{To: before.WritePos})
	refusedWith(t, "trim without a certificate", err, codes.Unauthenticated)
	_, err = pb.NewJournalClient(dialCreds(t, ep, insecure.NewCredentials())).Append(ctx, appendReq)
	refusedWith(t, "plaintext append", err, codes.Unavailable)
	stranger, err := newClusterTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := stranger.Source("admin", pki.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pb.NewJournalClient(dialCreds(t, ep, tlsgrpc.Client(ss, pki.RoleCoordinator))).Append(ctx, appendReq)
	refusedWith(t, "append with another CA's certificate", err, codes.Unavailable)

	// Member and node services take their roles only.
	_, err = clusterpb.NewPeerClient(dialAs(t, c, ep, "admin", pki.RoleClient, pki.RoleCoordinator)).LocalStatus(ctx, &clusterpb.LocalStatusRequest{})
	refusedWith(t, "Peer call with a client certificate", err, codes.PermissionDenied)
	_, err = clusterpb.NewPeerClient(dialAs(t, c, ep, "n1", pki.RoleNode, pki.RoleCoordinator)).ForwardAppend(ctx, &clusterpb.ForwardAppendRequest{})
	refusedWith(t, "Peer call with a node certificate", err, codes.PermissionDenied)
	_, err = clusterpb.NewPeerClient(dialAs(t, c, ep, "c9", pki.RoleCoordinator, pki.RoleCoordinator)).RegisterMember(ctx,
		&clusterpb.RegisterMemberRequest{Member: &fsmpb.Member{Id: "c2", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2"}})
	refusedWith(t, "RegisterMember for another member", err, codes.PermissionDenied)
	hb := &clusterpb.NodeHeartbeatRequest{NodeId: "n2"}
	_, err = clusterpb.NewNodeLinkClient(dialAs(t, c, ep, "n1", pki.RoleNode, pki.RoleCoordinator)).Heartbeat(ctx, hb)
	refusedWith(t, "heartbeat for another node", err, codes.PermissionDenied)
	// A node's call to a follower is forwarded to the leader, which takes
	// it on the follower's word.
	follower := c.Config((c.LeaderIndex() + 1) % 3).GRPCAddr
	if _, err := clusterpb.NewNodeLinkClient(dialAs(t, c, follower, "n1", pki.RoleNode, pki.RoleCoordinator)).Heartbeat(ctx,
		&clusterpb.NodeHeartbeatRequest{NodeId: "n1"}); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Errorf("a node's heartbeat through a follower: %v", err)
	}
	// A coordinator's NodeLink call is one it forwards for a node it
	// checked: it passes authorization (and the leader answers it).
	_, err = clusterpb.NewNodeLinkClient(dialAs(t, c, ep, "c9", pki.RoleCoordinator, pki.RoleCoordinator)).Heartbeat(ctx, &clusterpb.NodeHeartbeatRequest{NodeId: "n7"})
	if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unauthenticated {
		t.Errorf("a forwarded heartbeat was refused: %v", err)
	}
	_, err = clusterpb.NewNodeLinkClient(dialAs(t, c, ep, "admin", pki.RoleClient, pki.RoleCoordinator)).Register(ctx, &clusterpb.NodeRegisterRequest{})
	refusedWith(t, "register with a client certificate", err, codes.PermissionDenied)

	// Health checks need no certificate.
	hr, err := healthpb.NewHealthClient(dialAs(t, c, ep, "", "", pki.RoleCoordinator)).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a certificate: %v, %v", hr, err)
	}

	// The storage node: data RPCs need a certificate, recovery RPCs a
	// node's or coordinator's.
	naddr := c.Node(0).GRPCAddr()
	_, err = pb.NewDataNodeClient(dialAs(t, c, naddr, "", "", pki.RoleNode)).ListReplicas(ctx, &pb.ListReplicasRequest{})
	refusedWith(t, "node call without a certificate", err, codes.Unauthenticated)
	_, err = pb.NewDataNodeClient(dialAs(t, c, naddr, "admin", pki.RoleClient, pki.RoleNode)).InitReplicaRecovery(ctx, &pb.InitReplicaRecoveryRequest{})
	refusedWith(t, "recovery RPC with a client certificate", err, codes.PermissionDenied)
	if _, err := pb.NewDataNodeClient(dialAs(t, c, naddr, "admin", pki.RoleClient, pki.RoleNode)).ListReplicas(ctx, &pb.ListReplicasRequest{Pool: c.NodeConfig(0).BlockPool}); err != nil {
		t.Errorf("node call with a client certificate: %v", err)
	}

	// Nothing the strangers tried changed the journal.
	after, err := admin.Journal().Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.WritePos != before.WritePos || after.TrimmedPos != before.TrimmedPos || after.EventCount != before.EventCount {
		t.Fatalf("positions moved: %+v, then %+v", before, after)
	}
	evs, _, err := admin.Journal().Read(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == "sec.stranger" {
			t.Fatalf("a refused append was journaled: %+v", e)
		}
	}
}

// TestSecureHTTP: the HTTP port serves TLS; probes need no certificate,
// /metrics needs one of the cluster CA.
func TestSecureHTTP(t *testing.T) {
	t.Parallel()
	c := secureCluster(t)
	url := "https://" + c.Coordinator(0).HTTPAddr()
	pool, err := pki.LoadPool(c.TLS().CA())
	if err != nil {
		t.Fatal(err)
	}
	get := func(conf *tls.Config, path string) (int, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
		resp, err := hc.Get(url + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	anon := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	withCert, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conf *tls.Config
		path string
		want int
	}{
		{anon, "/healthz", http.StatusOK},
		{anon, "/metrics", http.StatusForbidden},
	} {
		if got, err := get(tc.conf, tc.path); err != nil || got != tc.want {
			t.Errorf("GET %s (certificate %v): %d, %v; want %d", tc.path, tc.conf.Certificates != nil, got, err, tc.want)
		}
	}
	// With a certificate, /metrics shows the certificate's expiry.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: withCert}}
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tlsExpiryMetric+" ") {
		t.Errorf("GET /metrics with a certificate: %d, expiry metric shown: %v", resp.StatusCode, strings.Contains(string(body), tlsExpiryMetric))
	}
	hc = &http.Client{Timeout: 10 * time.Second}
	if resp, err := hc.Get("http://" + c.Coordinator(0).HTTPAddr() + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Error("plaintext HTTP answered 200")
	}
}

func TestCertWarning(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		left time.Duration
		want string
	}{
		{30 * 24 * time.Hour, ""},
		{certWarnBefore + time.Hour, ""},
		{13 * 24 * time.Hour, "member c1: TLS certificate expires in 312h0m0s, at 2030-01-14T00:00:00Z"},
		{0, "member c1: TLS certificate expired at 2030-01-01T00:00:00Z"},
		{-time.Hour, "member c1: TLS certificate expired at 2029-12-31T23:00:00Z"},
	} {
		if got := certWarning("c1", now.Add(c.left), now); got != c.want {
			t.Errorf("%v left: %q, want %q", c.left, got, c.want)
		}
	}
}

// TestSecurePortsSurviveGarbage: garbage, a plaintext HTTP request and a
// TLS 1.2 hello on every TLS port of a coordinator and a node are
// refused, and every port still serves a proper client afterwards.
func TestSecurePortsSurviveGarbage(t *testing.T) {
	t.Parallel()
	c := secureCluster(t)
	cfg, ncfg := c.Config(0), c.Node(0)
	ports := map[string]string{"coordinator raft": cfg.RaftAddr, "coordinator gRPC": cfg.GRPCAddr, "coordinator http": cfg.HTTPAddr,
		"node gRPC": ncfg.GRPCAddr(), "node http": ncfg.HTTPAddr()}
	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}
	for name, addr := range ports {
		for _, junk := range [][]byte{[]byte("\x16\x03\x01\x00\x05hello"), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), bytes.Repeat([]byte{0xff}, 4096)} {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			conn.Write(junk)
			io.Copy(io.Discard, conn) // until the server closes it (or the deadline)
			conn.Close()
		}
		if tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, old); err == nil {
			tc.Close()
			t.Errorf("%s: a TLS 1.2 handshake succeeded", name)
		}
	}
	// Everything still answers.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, tlsConf := adminClient(ctx, t, c)
	if _, err := admin.Journal().Append(ctx, client.Event{Type: "after.garbage"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pb.NewDataNodeClient(dialAs(t, c, ncfg.GRPCAddr(), "admin", pki.RoleClient, pki.RoleNode)).VolumeInfo(ctx, &pb.VolumeInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	for _, a := range []string{cfg.HTTPAddr, ncfg.HTTPAddr()} {
		resp, err := hc.Get("https://" + a + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /healthz after garbage: %v %v", a, resp, err)
		}
		resp.Body.Close()
	}
	eventually(t, 20*time.Second, "a ready leader", func() bool { return c.LeaderIndex() >= 0 })
}

// TestSecureRotationKeepsAppending: every coordinator's certificate is
// reissued and reloaded while a client appends; no append fails or is
// lost, and a new connection gets the new certificate.
func TestSecureRotationKeepsAppending(t *testing.T) {
	t.Parallel()
	c := secureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, tlsConf := adminClient(ctx, t, c)
	serialOf := func(addr string) string {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tlsConf)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serialOf(c.Config(0).GRPCAddr)

	stop := make(chan struct{})
	done := make(chan error, 1)
	var acked []uint64
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			seqs, err := admin.Journal().Append(ctx, client.Event{Type: "rot", Payload: []byte(fmt.Sprint(i))})
			if err != nil {
				done <- err
				return
			}
			acked = append(acked, seqs...)
		}
	}()
	// Wait for some appends, then rotate every coordinator.
	eventually(t, 20*time.Second, "appends before the rotation", func() bool {
		p, err := admin.Journal().Positions(ctx)
		return err == nil && p.WritePos >= 20
	})
	for i := range c.Coordinators() {
		cfg := c.Config(i)
		is, err := c.TLS().ca.Issue(pki.Request{Name: cfg.ID, Role: pki.RoleCoordinator, Days: 2}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := pki.WriteFiles(c.TLS().Dir, cfg.ID, is, true); err != nil {
			t.Fatal(err)
		}
		if changed, err := cfg.Security.TLS.Reload(); err != nil || !changed {
			t.Fatalf("%s: reload %v, %v", cfg.ID, changed, err)
		}
	}
	eventually(t, 20*time.Second, "appends after the rotation", func() bool {
		p, err := admin.Journal().Positions(ctx)
		return err == nil && p.WritePos >= 200
	})
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("an append failed across the rotation: %v", err)
	}
	if after := serialOf(c.Config(0).GRPCAddr); after == before {
		t.Fatal("a new connection still got the old certificate")
	}
	// Every acknowledged append is in the journal, once.
	seen := map[uint64]bool{}
	if err := admin.Journal().ReadRange(ctx, 1, 0, func(e client.StoredEvent) error {
		if e.Type == "rot" {
			seen[e.Seq] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range acked {
		if !seen[s] {
			t.Fatalf("acknowledged append %d is missing", s)
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("%d events in the journal, %d acknowledged", len(seen), len(acked))
	}
}

// TestSecureClusterNeverRegistersAForeignNode: a storage node whose
// certificate another CA signed, or that names another node, never gets
// registered, while a proper one does.
func TestSecureClusterNeverRegistersAForeignNode(t *testing.T) {
	t.Parallel()
	c := secureCluster(t) // n1 registers
	stranger, err := newClusterTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := stranger.Source("n2", pki.RoleNode)
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := c.TLS().Source("n1", pki.RoleNode) // n3 presenting n1's certificate
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*nodeserver.Config){
		func(cfg *nodeserver.Config) { cfg.Security.TLS = foreign },
		func(cfg *nodeserver.Config) { cfg.Security.TLS, cfg.ID = impostor, "n1-impostor" },
	} {
		_, err := c.AddNode(func(cfg *nodeserver.Config) {
			cfg.HeartbeatInterval = 100 * time.Millisecond
			cfg.Logger = testLogger(t)
			mod(cfg)
		})
		if err == nil {
			continue // it runs, and must stay unregistered
		}
		// nodeserver refuses a certificate that does not name it.
		if !strings.Contains(err.Error(), "TLS certificate names") {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, _ := adminClient(ctx, t, c)
	only := func() bool {
		nl, err := admin.Nodes(ctx)
		return err == nil && len(nl.Nodes) == 1 && nl.Nodes[0].ID == "n1"
	}
	eventually(t, 20*time.Second, "n1 registered", only)
	stays(t, 2*time.Second, "only n1 registered", only)
}
