package membership

import (
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/logbookhq/logbook/internal/testports"
)

// TestJoinRetriesUntilLateSeed starts two members whose only seed is not
// running yet; the background loop must keep retrying until it is.
func TestJoinRetriesUntilLateSeed(t *testing.T) {
	seedAddr := testports.Addr(t, true)
	a := start(t, testConfig("a", seedAddr))
	c := start(t, testConfig("c", seedAddr))
	waitFor(t, 10*time.Second, "failed join attempts before the seed starts", func() bool {
		return a.joinAttempts.Load() >= 3 && c.joinAttempts.Load() >= 3
	})
	if got := names(a); !sameNames(got, []string{"a"}) {
		t.Fatalf("a sees %v before the seed runs", got)
	}

	bcfg := testConfig("b", seedAddr) // its own address as seed is ignored
	bcfg.BindAddr = seedAddr
	b := start(t, bcfg)
	if b.LocalAddr() != seedAddr {
		t.Fatalf("LocalAddr = %q, want %q", b.LocalAddr(), seedAddr)
	}
	waitConverged(t, []*Memberlist{a, b, c}, "a", "b", "c")

	mem, _ := member(c, "a")
	if mem.Addr != a.LocalAddr() || mem.Meta.ClusterID != testCluster || mem.Meta.RaftAddr == "" ||
		mem.Meta.Role != RoleCoordinator || mem.State != StateAlive {
		t.Fatalf("c's view of a = %+v", mem)
	}
	if h := a.Health(); h < 0 {
		t.Fatalf("Health = %d", h)
	}
	// Every member sees its own join first.
	if ev := <-b.Events(); ev.Type != EventJoin || ev.Member.Name != "b" {
		t.Fatalf("b's first event = %+v, want its own join", ev)
	}
}

// TestForeignClusterNotAdmitted checks that memberlist's label keeps members
// of another cluster out.
func TestForeignClusterNotAdmitted(t *testing.T) {
	ms := formCluster(t, "a", "b")
	xcfg := testConfig("x", ms[0].LocalAddr())
	xcfg.ClusterID = "other-cluster"
	x := start(t, xcfg)

	if n, err := x.ml.Join([]string{ms[0].LocalAddr()}); err == nil || n != 0 {
		t.Fatalf("join across clusters: n=%d err=%v, want failure", n, err)
	}
	waitFor(t, 10*time.Second, "repeated failed join attempts", func() bool { return x.joinAttempts.Load() >= 5 })
	if got := names(x); !sameNames(got, []string{"x"}) {
		t.Fatalf("x sees %v", got)
	}
	for _, m := range ms {
		if got := names(m); !sameNames(got, []string{"a", "b"}) {
			t.Fatalf("%s sees %v", m.cfg.Meta.ID, got)
		}
	}
}

// TestEncryptedCluster checks that members sharing a key form a cluster and a
// member without it is kept out.
func TestEncryptedCluster(t *testing.T) {
	key := []byte("0123456789abcdef")
	acfg, bcfg := testConfig("a"), testConfig("b")
	acfg.SecretKey, bcfg.SecretKey = key, key
	a := start(t, acfg)
	bcfg.Join = []string{a.LocalAddr()}
	b := start(t, bcfg)
	waitConverged(t, []*Memberlist{a, b}, "a", "b")

	plain := start(t, testConfig("p"))
	if n, err := plain.ml.Join([]string{a.LocalAddr()}); err == nil || n != 0 {
		t.Fatalf("unencrypted join: n=%d err=%v, want failure", n, err)
	}
	if got := names(a); !sameNames(got, []string{"a", "b"}) {
		t.Fatalf("a sees %v", got)
	}
}

func TestMetaUpdatePropagates(t *testing.T) {
	ms := formCluster(t, "a", "b", "c")
	a := ms[0]
	if err := a.UpdateMeta(func(m *Meta) {
		m.Bootstrapped = true
		m.HTTPAddr = "127.0.0.1:8080"
	}); err != nil {
		t.Fatal(err)
	}
	if got := a.LocalMeta(); !got.Bootstrapped || got.HTTPAddr != "127.0.0.1:8080" {
		t.Fatalf("LocalMeta = %+v", got)
	}
	for _, m := range ms {
		waitFor(t, 10*time.Second, m.cfg.Meta.ID+" to see a's new meta", func() bool {
			mem, ok := member(m, "a")
			return ok && mem.Meta.Bootstrapped && mem.Meta.HTTPAddr == "127.0.0.1:8080"
		})
	}
	waitEvent(t, ms[1], 10*time.Second, "b's update event for a", func(ev Event) bool {
		return ev.Type == EventUpdate && ev.Member.Name == "a" && ev.Member.Meta.Bootstrapped
	})

	// The bootstrap decision over a real view: nobody bootstraps any more.
	var seen []Meta
	for _, mem := range ms[2].Members() {
		seen = append(seen, mem.Meta)
	}
	if ok, _, err := BootstrapDecision("a", 3, seen); ok || err != nil {
		t.Fatalf("BootstrapDecision = %v, %v; want false, nil", ok, err)
	}

	// Rejected updates leave the meta unchanged.
	before := a.LocalMeta()
	if err := a.UpdateMeta(func(m *Meta) { m.ID = "renamed" }); err == nil {
		t.Fatal("ID change accepted")
	}
	if err := a.UpdateMeta(func(m *Meta) { m.GRPCAddr = string(make([]byte, 600)) + ":1" }); err == nil {
		t.Fatal("oversized meta accepted")
	}
	if err := a.UpdateMeta(func(m *Meta) { m.RaftAddr = "" }); err == nil {
		t.Fatal("coordinator without raft address accepted")
	}
	if got := a.LocalMeta(); got != before {
		t.Fatalf("LocalMeta changed by rejected updates: %+v", got)
	}
}

func TestFailedMemberMarkedDead(t *testing.T) {
	ms := formCluster(t, "a", "b", "c")
	if err := ms[2].Close(); err != nil { // no Leave: a crash as far as peers know
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "c to be removed", func() bool {
		return sameNames(names(ms[0]), []string{"a", "b"}) && sameNames(names(ms[1]), []string{"a", "b"})
	})
	ev := waitEvent(t, ms[0], 5*time.Second, "a's leave event for c", func(ev Event) bool {
		return ev.Type == EventLeave && ev.Member.Name == "c"
	})
	if ev.Member.State != StateDead || ev.Member.Meta.ID != "c" {
		t.Fatalf("leave event = %+v, want c dead", ev)
	}
}

func TestLeaveAndClose(t *testing.T) {
	ms := formCluster(t, "a", "b", "c")
	b := ms[1]
	if err := b.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if err := b.UpdateMeta(func(m *Meta) { m.Bootstrapped = true }); !errors.Is(err, ErrLeft) {
		t.Fatalf("UpdateMeta after Leave = %v, want ErrLeft", err)
	}
	waitFor(t, 10*time.Second, "b to be gone", func() bool {
		return sameNames(names(ms[0]), []string{"a", "c"}) && sameNames(names(ms[2]), []string{"a", "c"})
	})
	ev := waitEvent(t, ms[0], 5*time.Second, "a's leave event for b", func(ev Event) bool {
		return ev.Type == EventLeave && ev.Member.Name == "b"
	})
	if ev.Member.State != StateLeft {
		t.Fatalf("leave event = %+v, want b left", ev)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Leave after Close = %v, want ErrClosed", err)
	}
	if err := b.UpdateMeta(func(*Meta) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("UpdateMeta after Close = %v, want ErrClosed", err)
	}
	for range b.Events() { // must terminate: Close closes the channel
	}
	if len(b.Members()) != 0 {
		t.Fatal("members listed after Close")
	}
}

// TestGarbageTraffic sends malformed UDP packets and TCP streams to a member's
// gossip port; it must keep working and admit a new member afterwards.
func TestGarbageTraffic(t *testing.T) {
	ms := formCluster(t, "a", "b")
	target := ms[0].LocalAddr()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	label := append([]byte{244, byte(len(testCluster))}, testCluster...) // memberlist's label header
	var payloads [][]byte
	payloads = append(payloads, nil, []byte{244}, []byte{244, 200}, append([]byte{}, label...))
	for typ := range 256 {
		payloads = append(payloads, append([]byte{byte(typ)}, random(rng.IntN(64))...))
		payloads = append(payloads, append(append(append([]byte{}, label...), byte(typ)), random(rng.IntN(64))...))
	}
	for range 50 {
		payloads = append(payloads, random(1+rng.IntN(1400)))
		payloads = append(payloads, append(append([]byte{}, label...), random(1+rng.IntN(1400))...))
	}

	udp, err := net.Dial("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, p := range payloads {
		_, _ = udp.Write(p) // errors (e.g. ICMP refusals) do not matter
	}
	for i, p := range payloads {
		if i%3 != 0 { // a sample (of both labelled and unlabelled payloads) is enough for streams
			continue
		}
		conn, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(p)
		if i%2 == 0 { // half the time half-close and wait for the server to hang up
			_ = conn.(*net.TCPConn).CloseWrite()
			_, _ = conn.Read(make([]byte, 1024))
		}
		conn.Close()
	}

	if got := names(ms[0]); !sameNames(got, []string{"a", "b"}) {
		t.Fatalf("a sees %v after garbage", got)
	}
	c := start(t, testConfig("c", target))
	waitConverged(t, append(ms, c), "a", "b", "c")
}

// TestRestartedMembersSwapAddresses: two members crash and come back with
// each other's gossip addresses, as two containers restarted on one compose
// network do when Docker hands the freed IPs out in the other order. Three
// things must hold: a restarted member is the address it bound, even though
// gossip meant for the other reaches it before memberlist has recorded
// itself; it joins its seeds although that gossip already names members;
// and its peers take the new address as soon as the old one is declared
// dead, not only once memberlist forgets the dead entry
// (GossipToTheDeadTime, 30 s) — the deadline below is well inside that.
func TestRestartedMembersSwapAddresses(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	ms := formCluster(t, ids...)
	d, e := ms[3], ms[4]
	dAddr, eAddr, seed := d.LocalAddr(), e.LocalAddr(), ms[0].LocalAddr()
	for _, m := range []*Memberlist{d, e} {
		if err := m.Close(); err != nil { // no Leave: a crash as far as peers know
			t.Fatal(err)
		}
	}
	dcfg, ecfg := testConfig("d", seed), testConfig("e", seed)
	dcfg.BindAddr, ecfg.BindAddr = eAddr, dAddr
	ms[3], ms[4] = start(t, dcfg), start(t, ecfg)

	if ms[3].LocalAddr() != eAddr || ms[4].LocalAddr() != dAddr {
		t.Fatalf("restarted d at %s, e at %s; want %s, %s", ms[3].LocalAddr(), ms[4].LocalAddr(), eAddr, dAddr)
	}
	defer logViewsOnFailure(t, ms)
	waitFor(t, 15*time.Second, "every member to see d at e's old address and e at d's", func() bool {
		for _, m := range ms {
			if !sameNames(names(m), ids) {
				return false
			}
			md, _ := member(m, "d")
			me, _ := member(m, "e")
			if md.Addr != eAddr || me.Addr != dAddr || md.State != StateAlive || me.State != StateAlive {
				return false
			}
		}
		return true
	})
}
