package coordserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
)

// chromiumPath finds Debian's chromium (or Chrome). Without one the
// browser test skips, except in CI (CI=true), where .ci/run installs it
// and its absence fails the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium for the console's browser test")
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the console's browser test needs one; CI=true makes this a failure")
	return ""
}

// browser is one headless chromium tab with every JS console error and
// every failed request of the console's pages recorded.
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
	shot string // screenshot directory ("": none)
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{t: t, ctx: ctx, shot: os.Getenv("LOGBOOK_CONSOLE_SCREENSHOTS")}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		t.Fatalf("start chromium: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.fail("JS console: " + m.String())
			}
		}
	}()
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventLoadingFailed:
			if !e.Canceled {
				b.fail(fmt.Sprintf("request %s failed: %s", e.RequestID, e.ErrorText))
			}
		case *network.EventResponseReceived:
			if e.Response != nil && e.Response.Status >= 400 {
				b.fail(fmt.Sprintf("GET %s: HTTP %d", e.Response.URL, e.Response.Status))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

// open loads url and waits for its main element; the page's name saves
// its full-page screenshot when asked (LOGBOOK_CONSOLE_SCREENSHOTS).
func (b *browser) open(name, url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
	b.check(name)
}

// screenshot saves the page's full-page screenshot as name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shot == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", name, err)
	}
	if err := os.MkdirAll(b.shot, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JS expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JS condition in the page until it holds.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// check fails the test for every JS error and failed request so far.
func (b *browser) check(page string) {
	b.t.Helper()
	b.mu.Lock()
	errs := b.errs
	b.errs = nil
	b.mu.Unlock()
	for _, e := range errs {
		b.t.Errorf("%s: %s", page, e)
	}
}

// TestConsoleBrowser drives the console in headless chromium against an
// in-process cluster with storage nodes: every page loads without a JS
// error or a failed request, and shows the state the gRPC API answers:
// the members and the leader, the journal's safe position and a live
// tail that receives an event appended after the page opened, the live
// storage nodes, and a file's replicas; the recoveries page lists what
// the journal holds.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	cc := newConsoleCluster(t)
	leader := cc.waitLeader()
	s := cc.server(cc.followers(leader)[0])
	base := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc.waitConverged()

	b.open("overview", base+"/")
	if got := eval[string](b, `document.getElementById("cluster-id").textContent`); got != "test-cluster" {
		t.Errorf("overview: cluster id %q", got)
	}
	rows := eval[[]string](b, `[...document.querySelectorAll("#members tbody tr")].map(r => r.dataset.id + (r.classList.contains("leader") ? "*" : ""))`)
	if want := []string{"c1", "c2", "c3"}; len(rows) != 3 || !strings.Contains(strings.Join(rows, " "), cc.cfgs[leader].ID+"*") {
		t.Errorf("overview members %v, want %v with %s leading", rows, want, cc.cfgs[leader].ID)
	}
	if got := eval[string](b, `document.getElementById("node-count").textContent`); !strings.HasPrefix(got, "2 (2 live") {
		t.Errorf("overview: storage nodes %q", got)
	}
	b.waitFor("a chart with samples", `document.querySelectorAll("svg.chart polyline").length === 3`)
	b.screenshot("overview")

	b.open("journal", base+"/journal")
	pos, err := (&journalService{s: s}).Positions(ctx, &pb.PositionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := eval[string](b, `document.getElementById("safe-pos").textContent`); got != fmt.Sprint(pos.SafePos) {
		t.Errorf("journal: safe_pos %s, Positions %d", got, pos.SafePos)
	}
	b.waitFor("the tail to follow", `document.getElementById("tail-status").textContent.startsWith("following")`)
	seqs, err := cc.client.Journal().Append(ctx, client.Event{Type: "browser.tail", Payload: []byte("seen live")})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the appended event in the tail", fmt.Sprintf(`!!document.querySelector('#tail-events li[data-seq="%d"][data-type="browser.tail"]')`, seqs[0]))
	// Paused, the tail shows nothing new; resumed, it catches up.
	eval[bool](b, `document.getElementById("tail-toggle").click(), true`)
	b.waitFor("the tail paused", `document.getElementById("tail-status").textContent.startsWith("paused")`)
	more, err := cc.client.Journal().Append(ctx, client.Event{Type: "browser.tail", Payload: []byte("after pause")})
	if err != nil {
		t.Fatal(err)
	}
	if eval[bool](b, fmt.Sprintf(`!!document.querySelector('#tail-events li[data-seq="%d"]')`, more[0])) {
		t.Error("the paused tail showed an event")
	}
	eval[bool](b, `document.getElementById("tail-toggle").click(), true`)
	b.waitFor("the resumed tail to catch up", fmt.Sprintf(`!!document.querySelector('#tail-events li[data-seq="%d"]')`, more[0]))
	b.screenshot("journal")

	b.open("nodes", base+"/nodes")
	states := eval[[]string](b, `[...document.querySelectorAll("#nodes tbody tr")].map(r => r.dataset.id + ":" + r.dataset.state)`)
	if len(states) != 2 || states[0] != "node1:live" || states[1] != "node2:live" {
		t.Errorf("nodes page: %v", states)
	}
	b.screenshot("nodes")

	b.open("namespace", base+"/namespace?path=%2Fconsole%2Fdir")
	if got := eval[[]string](b, `[...document.querySelectorAll("#entries tbody tr")].map(r => r.dataset.path)`); len(got) != 1 || got[0] != cc.file {
		t.Errorf("namespace page: %v", got)
	}
	b.screenshot("namespace")
	ctx2, cancel2 := context.WithTimeout(b.ctx, 20*time.Second)
	if err := chromedp.Do(ctx2, chromedp.Click(chromedp.CSS(`#entries a`)), chromedp.WaitVisible(chromedp.CSS(`#blocks`))); err != nil {
		t.Fatalf("follow the file's link: %v", err)
	}
	cancel2()
	b.check("file")
	st, err := (&namespaceService{s: cc.server(leader)}).Stat(ctx, &pb.StatRequest{Path: cc.file})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, bl := range st.Blocks {
		for _, r := range bl.ReportedLocations {
			want = append(want, fmt.Sprintf("%d/%s/%s", bl.Id, r.NodeId, strings.TrimPrefix(r.State.String(), "REPLICA_STATE_")))
		}
	}
	got := eval[[]string](b, `[...document.querySelectorAll("#blocks tbody tr")].flatMap(r => [...r.querySelectorAll("li[data-node]")].map(l => r.dataset.block + "/" + l.dataset.node + "/" + l.dataset.state))`)
	if strings.Join(got, " ") != strings.Join(want, " ") || len(got) != 2 {
		t.Errorf("file page replicas %v, Stat %v", got, want)
	}
	b.screenshot("file")

	b.open("recoveries", base+"/recoveries")
	if n := eval[int](b, `document.querySelectorAll("#recoveries tbody tr[data-block]").length`); n != 0 {
		t.Errorf("recoveries page lists %d recoveries; the journal holds none", n)
	}
	b.screenshot("recoveries")

	// A narrow screen: the page fits its width (tables scroll in place).
	ctx3, cancel3 := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel3()
	if err := chromedp.Do(ctx3, chromedp.EmulateViewport(375, 800), chromedp.Navigate(base+"/nodes"), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatal(err)
	}
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > 380 {
		t.Errorf("on a 375 px screen the nodes page is %d px wide", w)
	}
	b.check("narrow nodes")
	b.screenshot("nodes-narrow")
}
