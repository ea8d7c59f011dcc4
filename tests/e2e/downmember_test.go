//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"google.golang.org/grpc"
)

// downBound is the generous bound on a command's time (median of
// downRuns) with members down; docs/benchmarks.md has the measured
// figures, which are far below it.
const (
	downBound = 500 * time.Millisecond
	downRuns  = 5
)

// TestMembersDownCommandsFast times the coord CLI (the binary the image
// holds), a fresh SDK client and a bare gRPC Cluster/Status with all
// members up, then with one of three (two of five) killed — the endpoints
// naming every member, and naming only the live ones — and checks each
// stays under downBound and that status marks the dead unreachable. Then
// it kills the leader and times the first append against the election.
func TestMembersDownCommandsFast(t *testing.T) {
	for _, c := range []struct {
		file        string
		n, down     int
		leaderKills int
	}{{compose3, 3, 1, 3}, {compose5, 5, 2, 1}} {
		t.Run(fmt.Sprintf("%d-of-%d", c.down, c.n), func(t *testing.T) {
			membersDown(t, c.file, c.n, c.down, c.leaderKills)
		})
	}
}

// coordCLI runs the coord binary the image was built from against cl.
type coordCLI struct {
	cl  *cluster
	bin string
}

func newCoordCLI(t *testing.T, cl *cluster) *coordCLI {
	bin := filepath.Join(repoRoot, "deploy", "compose", ".build", "coord")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the coord binary deploy/compose/build.sh built: %v", err)
	}
	return &coordCLI{cl: cl, bin: bin}
}

// run runs coord args with endpoints (services) and returns its stdout and
// how long the process took, start to exit.
func (c *coordCLI) run(services []string, args ...string) (string, time.Duration, error) {
	var eps, amap []string
	for _, s := range services {
		eps = append(eps, c.cl.addr(s))
	}
	for _, s := range c.cl.members {
		amap = append(amap, fmt.Sprintf("%s:%d=%s", s, grpcPort, c.cl.addr(s)))
	}
	args = append(args, "--endpoints", strings.Join(eps, ","), "--address-map", strings.Join(amap, ","),
		"--tls-ca", c.cl.tlsFile("ca.pem"), "--tls-cert", c.cl.tlsFile("admin.pem"), "--tls-key", c.cl.tlsFile("admin-key.pem"), "--timeout", "20s")
	cmd := exec.Command(c.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOGBOOK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		err = fmt.Errorf("coord %s: %v: %s", strings.Join(args[:2], " "), err, errb.String())
	}
	return out.String(), d, err
}

// timed is one way of asking the cluster, timed.
type timed struct {
	name string
	call func(services []string) (time.Duration, error)
}

func (c *coordCLI) cmd(args ...string) timed {
	return timed{"coord " + strings.Join(args, " "), func(services []string) (time.Duration, error) {
		_, d, err := c.run(services, args...)
		return d, err
	}}
}

// sdkStatus is client.New and one Status with a fresh client.
func sdkStatus(cl *cluster) timed {
	return timed{"SDK New+Status", func(services []string) (time.Duration, error) {
		cfg, _ := cl.config()
		cfg.Endpoints = nil
		for _, s := range services {
			cfg.Endpoints = append(cfg.Endpoints, cl.addr(s))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		c, err := client.New(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		_, err = c.Status(ctx)
		return time.Since(start), err
	}}
}

// rawStatus is a bare Cluster/Status on a new connection to the first
// service, as grpcurl makes it.
func rawStatus(cl *cluster) timed {
	return timed{"gRPC Cluster/Status", func(services []string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		cc, err := grpc.NewClient(cl.addr(services[0]), cl.creds())
		if err != nil {
			return 0, err
		}
		defer cc.Close()
		_, err = pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{})
		return time.Since(start), err
	}}
}

// median runs w downRuns times and returns the median.
func median(t *testing.T, w timed, services []string) time.Duration {
	t.Helper()
	ds := make([]time.Duration, downRuns)
	for i := range ds {
		d, err := w.call(services)
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		ds[i] = d
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func membersDown(t *testing.T, file string, n, down, leaderKills int) {
	cl := startCluster(t, file, n)
	cli := newCoordCLI(t, cl)
	if _, _, err := cli.run(cl.members, "journal", "append", "--type", "e2e", "--payload", "x"); err != nil {
		t.Fatal(err)
	}
	ways := []timed{
		cli.cmd("journal", "positions"),
		cli.cmd("journal", "append", "--type", "e2e", "--payload", "x"),
		cli.cmd("journal", "read", "--from", "1", "--max", "10"),
		cli.cmd("status"),
		cli.cmd("members"),
		sdkStatus(cl),
		rawStatus(cl),
	}
	leader := cl.leader()
	victims := cl.others(leader)[:down]
	live := cl.others(victims...)
	// The bare Status goes to the first service: a live one (the leader)
	// in every row.
	liveFirst := append([]string{leader}, cl.others(leader)...)
	up := make([]time.Duration, len(ways))
	for i, w := range ways {
		up[i] = median(t, w, liveFirst)
	}

	for _, v := range victims {
		if err := cl.kill(v); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.exitedAt(v); err != nil {
			t.Fatal(err)
		}
	}
	cl.logf("SIGKILL %v (the leader %s stays)", victims, leader)
	// The first status after the kill probes the dead: bounded, and it
	// marks them unreachable.
	out, first, err := cli.run(liveFirst, "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Members []struct {
			ID      string `json:"id"`
			Healthy bool   `json:"healthy"`
			Error   string `json:"error"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v: %q", err, out)
	}
	for _, m := range st.Members {
		dead := slices.Contains(victims, m.ID)
		if dead && (m.Healthy || !strings.Contains(m.Error, "unreachable")) || !dead && !m.Healthy {
			t.Errorf("status after killing %v: member %s healthy %v error %q", victims, m.ID, m.Healthy, m.Error)
		}
	}
	if first > downBound {
		t.Errorf("first coord status after the kill: %v, over %v", first, downBound)
	}
	all := make([]time.Duration, len(ways))
	onlyLive := make([]time.Duration, len(ways))
	for i, w := range ways {
		all[i] = median(t, w, liveFirst)
		onlyLive[i] = median(t, w, live)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d of %d members down (median of %d, ms): all up | down, every member in --endpoints | down, live ones only\n", down, n, downRuns)
	for i, w := range ways {
		fmt.Fprintf(&table, "  %-44s %5d | %5d | %5d\n", w.name, up[i].Milliseconds(), all[i].Milliseconds(), onlyLive[i].Milliseconds())
		if all[i] > downBound || onlyLive[i] > downBound {
			t.Errorf("%s with %v down: %v (every endpoint) / %v (live ones), over %v", w.name, victims, all[i], onlyLive[i], downBound)
		}
	}
	fmt.Fprintf(&table, "  first coord status after the kill: %d ms\n", first.Milliseconds())
	t.Log(table.String())
	fmt.Print(table.String())

	cl.restart(victims...)
	cl.waitRejoined(victims...)
	for k := range leaderKills {
		firstAppendAfterLeaderKill(t, cl, cli, k+1)
	}
}

// firstAppendAfterLeaderKill SIGKILLs the leader and at once runs coord
// journal append (every member in --endpoints) while watching the live
// members for the new leader; the append must end within downBound of
// the election.
func firstAppendAfterLeaderKill(t *testing.T, cl *cluster, cli *coordCLI, trial int) {
	old := cl.leader()
	live := cl.others(old)
	conns := make([]*grpc.ClientConn, len(live))
	for i, s := range live {
		cc, err := grpc.NewClient(cl.addr(s), cl.creds())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		conns[i] = cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cc := range conns { // connected before the kill
		if _, err := pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{LocalView: true}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg      sync.WaitGroup
		elected time.Time
	)
	if err := cl.kill(old); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	wg.Go(func() {
		// Watch for a member that names a leader other than the old one.
		for ctx.Err() == nil {
			for _, cc := range conns {
				st, err := pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{LocalView: true})
				if err == nil && st.LeaderId != "" && st.LeaderId != old {
					elected = time.Now()
					return
				}
			}
			time.Sleep(5 * time.Millisecond) // the watch's sampling period, not synchronisation
		}
	})
	_, d, err := cli.run(cl.members, "journal", "append", "--type", "e2e", "--payload", "after-leader-kill")
	appended := killed.Add(d)
	wg.Wait()
	if err != nil {
		t.Fatalf("first append after killing leader %s: %v", old, err)
	}
	died, err := cl.exitedAt(old)
	if err != nil {
		t.Fatal(err)
	}
	if elected.IsZero() {
		t.Fatalf("no new leader seen after killing %s", old)
	}
	line := fmt.Sprintf("leader kill %d (%s): new leader known %d ms after the exit; first coord journal append took %d ms, done %d ms after the election",
		trial, old, elected.Sub(died).Milliseconds(), d.Milliseconds(), appended.Sub(elected).Milliseconds())
	t.Log(line)
	fmt.Println(line)
	if late := appended.Sub(elected); late > downBound {
		t.Errorf("first append after killing leader %s ended %v after the election, over %v", old, late, downBound)
	}
	cl.restart(old)
	cl.waitRejoined(old)
}
