package coordserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/internal/console"
	"github.com/logbookhq/logbook/internal/pki"
)

// consoleGet fetches path from base and returns the status and body.
func consoleGet(t *testing.T, hc *http.Client, base, path string) (int, string) {
	t.Helper()
	resp, err := hc.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// consoleJSON fetches /ui/api/... into v and fails unless it answers 200.
func consoleJSON(t *testing.T, hc *http.Client, base, path string, v any) {
	t.Helper()
	code, body := consoleGet(t, hc, base, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// consoleCluster is a 3-coordinator cluster with two storage nodes, a
// file written through them, appended events and a consumer.
type consoleCluster struct {
	*testCluster
	file   string
	data   []byte
	demo   int // "demo.*" events appended
	client *client.Client
}

func newConsoleCluster(t *testing.T) *consoleCluster {
	t.Helper()
	tc := newTestCluster(t, 3, func(_ int, c *Config) { c.ConsoleSampleEvery = 50 * time.Millisecond })
	tc.addNode(nil)
	tc.addNode(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := tc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cc := &consoleCluster{testCluster: tc, file: "/console/dir/f", data: []byte(strings.Repeat("logbook ", 1000)), demo: 5}
	cc.client = tc.client(ctx)
	eventually(t, 20*time.Second, "the namespace log format", func() bool { return tc.server(tc.waitLeader()).logFormat() >= fsm.NamespaceFormat })
	w, err := cc.client.FS().Create(ctx, cc.file, client.CreateOptions{Replication: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(cc.data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range cc.demo {
		if _, err := cc.client.Journal().Append(ctx, client.Event{Type: "demo.put", Payload: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cc.client.Journal().Consumers().Register(ctx, "indexer", 0); err != nil {
		t.Fatal(err)
	}
	return cc
}

// TestConsolePages: every page's JSON, from the leader and from a
// follower, shows what the gRPC API answers for the same state: the
// members, the journal's positions and consumers, the event counts, the
// storage nodes and a file's replicas; the HTML pages render the same.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	cc := newConsoleCluster(t)
	leader := cc.waitLeader()
	hc := &http.Client{Timeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, i := range []int{leader, cc.followers(leader)[0]} {
		s := cc.server(i)
		base := "http://" + s.HTTPAddr()
		cc.waitConverged()

		var ov console.OverviewView
		consoleJSON(t, hc, base, "/ui/api/overview", &ov)
		if ov.ClusterID != "test-cluster" || ov.LeaderID != cc.cfgs[leader].ID || len(ov.Members) != 3 || ov.Member.ID != s.ID() {
			t.Fatalf("%s overview: cluster %q leader %q, %d members, answered by %s", s.ID(), ov.ClusterID, ov.LeaderID, len(ov.Members), ov.Member.ID)
		}
		leaders := 0
		for _, m := range ov.Members {
			if m.Leader {
				leaders++
			}
			if !m.Healthy || m.Gossip != "alive" || m.Term == 0 || m.AppliedIndex == 0 {
				t.Errorf("%s overview: member %+v", s.ID(), m)
			}
		}
		if leaders != 1 || ov.Nodes == nil || ov.Nodes.Total != 2 || ov.Nodes.Live != 2 || ov.LogFormat != s.logFormat() {
			t.Fatalf("%s overview: %d leaders, nodes %+v, log format %d (member's %d)", s.ID(), leaders, ov.Nodes, ov.LogFormat, s.logFormat())
		}

		var jv console.JournalView
		consoleJSON(t, hc, base, "/ui/api/journal", &jv)
		pos, err := (&journalService{s: s}).Positions(ctx, &pb.PositionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if jv.Positions.SafePos != pos.SafePos || jv.Positions.TrimmedPos != pos.TrimmedPos || jv.Positions.SegmentCount != pos.SegmentCount ||
			jv.Positions.PausedKnown != (i == leader) {
			t.Fatalf("%s journal positions %+v, Positions %v", s.ID(), jv.Positions, pos)
		}
		if len(jv.Consumers) != 1 || jv.Consumers[0].Name != "indexer" || jv.Consumers[0].Lag != pos.SafePos-jv.Consumers[0].AckedSeq {
			t.Fatalf("%s consumers %+v (safe %d)", s.ID(), jv.Consumers, pos.SafePos)
		}
		if uint64(len(jv.Segments)) != pos.SegmentCount {
			t.Fatalf("%s: %d segments shown, %d held", s.ID(), len(jv.Segments), pos.SegmentCount)
		}
		eventually(t, 20*time.Second, "the event counts to reach the safe position", func() bool {
			consoleJSON(t, hc, base, "/ui/api/journal", &jv)
			return jv.Indexed >= pos.SafePos
		})
		var total uint64
		demo := uint64(0)
		for _, tc := range jv.Types {
			total += tc.Count
			if tc.Type == "demo.put" {
				demo = tc.Count
			}
		}
		if demo != uint64(cc.demo) || total < pos.EventCount {
			t.Fatalf("%s event counts %+v: demo.put %d, want %d; total %d of %d retained", s.ID(), jv.Types, demo, cc.demo, total, pos.EventCount)
		}

		var nv console.NodesView
		consoleJSON(t, hc, base, "/ui/api/nodes", &nv)
		lv := cc.server(leader).blocks.Nodes()
		if nv.Summary.Total != len(lv.Nodes) || len(nv.Nodes) != 2 {
			t.Fatalf("%s nodes: %+v, leader holds %d", s.ID(), nv.Summary, len(lv.Nodes))
		}
		var replicas uint64
		for _, n := range nv.Nodes {
			b := n.ByState
			if n.State != "live" || b.Finalized+b.RBW+b.RWR+b.RUR+b.Temporary != n.Replicas || !n.FullReport || n.LastFullMs < 0 || len(n.Volumes) == 0 {
				t.Fatalf("%s node %+v", s.ID(), n)
			}
			replicas += n.Replicas
		}

		var dir console.NamespaceView
		consoleJSON(t, hc, base, "/ui/api/namespace?path="+url.QueryEscape("/console/dir"), &dir)
		if len(dir.Entries) != 1 || dir.Entries[0].Path != cc.file || dir.Entries[0].File == nil || dir.Entries[0].File.Length != uint64(len(cc.data)) {
			t.Fatalf("%s namespace: %+v", s.ID(), dir.Entries)
		}
		var fv console.FileView
		consoleJSON(t, hc, base, "/ui/api/file?path="+url.QueryEscape(cc.file), &fv)
		st, err := (&namespaceService{s: cc.server(leader)}).Stat(ctx, &pb.StatRequest{Path: cc.file})
		if err != nil {
			t.Fatal(err)
		}
		if len(fv.Blocks) != len(st.Blocks) || fv.File.Replication != 2 || !fv.Reports {
			t.Fatalf("%s file: %d blocks (Stat %d), %+v", s.ID(), len(fv.Blocks), len(st.Blocks), fv.File)
		}
		shown := uint64(0)
		for k, b := range fv.Blocks {
			want := st.Blocks[k]
			if b.ID != want.Id || b.GS != want.Gs || len(b.Replicas) != len(want.ReportedLocations) {
				t.Fatalf("%s block %+v, Stat %v", s.ID(), b, want)
			}
			for j, r := range b.Replicas {
				w := want.ReportedLocations[j]
				if r.Node != w.NodeId || r.GS != w.Gs || r.Length != w.NumBytes || r.State != "FINALIZED" {
					t.Fatalf("%s replica %+v, Stat %v", s.ID(), r, w)
				}
			}
			shown += uint64(len(b.Replicas))
		}
		if shown != replicas || shown != 2 {
			t.Fatalf("%s: the file's page shows %d replicas, the nodes page %d", s.ID(), shown, replicas)
		}

		// The HTML pages render the same figures.
		for _, p := range []struct{ path, want string }{
			{"/", `<dd id="cluster-id">test-cluster</dd>`},
			{"/journal", fmt.Sprintf(`<dd id="safe-pos">%d</dd>`, pos.SafePos)},
			{"/nodes", `data-state="live"`},
			{"/namespace?path=%2Fconsole%2Fdir", `href="/file?path=%2fconsole%2fdir%2ff"`},
			{"/file?path=%2Fconsole%2Fdir%2Ff", `data-state="FINALIZED"`},
			{"/recoveries", "no recovery in the retained journal"},
			{"/ui/login", `name="token"`},
		} {
			code, body := consoleGet(t, hc, base, p.path)
			if code != http.StatusOK || !strings.Contains(body, p.want) {
				t.Fatalf("%s GET %s: %d, %q not in:\n%s", s.ID(), p.path, code, p.want, body)
			}
		}
		for _, a := range []string{"/ui/static/console.css", "/ui/static/console.js"} {
			if code, body := consoleGet(t, hc, base, a); code != http.StatusOK || len(body) < 100 {
				t.Fatalf("%s GET %s: %d", s.ID(), a, code)
			}
		}
	}
}

// TestConsoleBadInput: unknown paths, methods, namespace paths with ".."
// or NUL, huge page sizes and offsets and filters of regular-expression
// characters get a clear answer (never a panic or a stack trace) and
// change nothing.
func TestConsoleBadInput(t *testing.T) {
	t.Parallel()
	cc := newConsoleCluster(t)
	leader := cc.waitLeader()
	s := cc.server(cc.followers(leader)[0])
	base := "http://" + s.HTTPAddr()
	hc := &http.Client{Timeout: 20 * time.Second}
	cc.waitConverged()
	var before uint64
	s.fsm.View(func(st *fsm.State) { before = st.NextSeq() })
	for _, c := range []struct {
		path string
		want int
		says string
	}{
		{"/no/such/page", http.StatusNotFound, "no such page"},
		{"/ui/api/no-such-view", http.StatusNotFound, "no such page"},
		{"/namespace?path=%2Fconsole%2F..%2Fetc", http.StatusBadRequest, `&#34;..&#34; component`},
		{"/ui/api/namespace?path=%2Fconsole%00x", http.StatusBadRequest, "NUL"},
		{"/ui/api/file?path=%2Fa%2F..", http.StatusBadRequest, `\"..\" component`},
		{"/ui/api/file?path=relative", http.StatusBadRequest, "not absolute"},
		{"/ui/api/file?path=%2Fno-such-file", http.StatusNotFound, "not found"},
		{"/ui/api/recovery?block=x", http.StatusBadRequest, "want a block id"},
		{"/ui/api/recovery?block=999999", http.StatusNotFound, "no recovery of block 999999"},
		{"/ui/api/tail?from=-1", http.StatusBadRequest, "want a seq"},
		{"/ui/api/namespace?path=%2F&after=a%2Fb", http.StatusBadRequest, "one name"},
	} {
		code, body := consoleGet(t, hc, base, c.path)
		if code != c.want || !strings.Contains(body, c.says) || strings.Contains(body, "goroutine") {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, code, body, c.want, c.says)
		}
	}
	// Huge sizes and offsets are clamped; filters are literal text.
	var nv console.NodesView
	consoleJSON(t, hc, base, "/ui/api/nodes?limit=99999999999999999999&offset=99999999999", &nv)
	if nv.Page.Limit != console.MaxPageSize || nv.Page.Offset != 1 || len(nv.Nodes) != 1 {
		t.Errorf("clamped nodes page: %+v, %d rows", nv.Page, len(nv.Nodes))
	}
	consoleJSON(t, hc, base, "/ui/api/nodes?limit=-5&q="+url.QueryEscape(".*"), &nv)
	if nv.Page.Limit != 1 || nv.Page.Total != 0 {
		t.Errorf(`filter ".*" matched %d nodes (page %+v): it is literal text`, nv.Page.Total, nv.Page)
	}
	consoleJSON(t, hc, base, "/ui/api/nodes?q="+url.QueryEscape("(")+"&sort=nonsense", &nv)
	if nv.Page.Total != 0 || nv.Page.Sort != "id" {
		t.Errorf(`filter "(": %+v`, nv.Page)
	}
	var dv console.NamespaceView
	consoleJSON(t, hc, base, "/ui/api/namespace?path=%2Fconsole&q="+url.QueryEscape("[d]")+"&limit=100000", &dv)
	if len(dv.Entries) != 0 || dv.Limit != console.MaxPageSize {
		t.Errorf(`namespace filter "[d]": %+v`, dv)
	}
	consoleJSON(t, hc, base, "/ui/api/namespace?path=%2Fconsole&q=D", &dv)
	if len(dv.Entries) != 1 || dv.Entries[0].Name != "dir" {
		t.Errorf(`namespace filter "D": %+v`, dv.Entries)
	}
	// Read-only: every other method is refused.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		for _, p := range []string{"/", "/ui/api/journal", "/ui/static/console.css", "/ui/api/tail"} {
			req, _ := http.NewRequest(m, base+p, strings.NewReader("x"))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: %d, Allow %q", m, p, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	var after uint64
	s.fsm.View(func(st *fsm.State) { after = st.NextSeq() })
	if after != before {
		t.Errorf("bad requests changed the journal: next seq %d, then %d", before, after)
	}
	if err := s.Ready(); err != nil {
		t.Errorf("member after bad requests: %v", err)
	}
}

// TestConsoleACL: with ACLs on, the console needs a reader identity. An
// anonymous caller gets the login form (the API 401), a bad token and a
// user without read on the journal are refused, a reader's token (in the
// Authorization header, or in the cookie the login form sets) and a
// client certificate are let in; refusals change nothing.
func TestConsoleACL(t *testing.T) {
	t.Parallel()
	c, boot := bootstrapACLCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := tokenClient(ctx, t, c, boot.String())
	reader, err := admin.Acl().CreateToken(ctx, "rita", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Acl().Bind(ctx, "rita", "reader"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Acl().PutRole(ctx, "fs-only", []client.Grant{{Level: "read", Scope: "fs"}}); err != nil {
		t.Fatal(err)
	}
	idx, err := admin.Acl().Bind(ctx, "fred", "fs-only")
	if err != nil {
		t.Fatal(err)
	}
	fred, err := admin.Acl().CreateToken(ctx, "fred", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	idx = max(idx, fred.Index)
	li := c.LeaderIndex()
	s := c.Coordinator((li + 1) % c.Coordinators()) // a follower
	eventually(t, 20*time.Second, "the follower applied the ACL changes", func() bool { return s.FSM().AppliedIndex() >= idx })

	pool, err := pki.LoadPool(c.TLS().CA())
	if err != nil {
		t.Fatal(err)
	}
	anon := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	certConf, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: certConf}}
	base := "https://" + s.HTTPAddr()
	get := func(hc *http.Client, path, token string, cookie *http.Cookie) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var nextSeq, applied uint64
	s.FSM().View(func(st *fsm.State) { nextSeq = st.NextSeq() })
	applied = s.FSM().AppliedIndex()

	// Refused, on every route that shows data.
	for _, p := range []string{"/", "/journal", "/nodes", "/namespace", "/file?path=%2Fx", "/recoveries", "/ui/api/overview", "/ui/api/journal", "/ui/api/nodes", "/ui/api/tail"} {
		code, body := get(anon, p, "", nil)
		if code != http.StatusUnauthorized || !strings.Contains(body, "needs a client certificate of the cluster CA or a token") {
			t.Errorf("anonymous GET %s: %d %.200q", p, code, body)
		}
		if !strings.HasPrefix(p, "/ui/api/") && !strings.Contains(body, `name="token"`) {
			t.Errorf("anonymous GET %s: no login form", p)
		}
		if code, body := get(anon, p, fred.Secret, nil); code != http.StatusForbidden || !strings.Contains(body, `user \"fred\"`) && !strings.Contains(body, "user &#34;fred&#34;") {
			t.Errorf("fred (fs read only) GET %s: %d %.300q", p, code, body)
		}
		if code, _ := get(anon, p, "lbt_0123456789abcdef_"+strings.Repeat("A", 43), nil); code != http.StatusUnauthorized {
			t.Errorf("unknown token GET %s: %d", p, code)
		}
	}
	if code, _ := get(anon, "/ui/static/console.css", "", nil); code != http.StatusOK {
		t.Errorf("the login form's style sheet: %d", code)
	}

	// Let in: the reader's token, the login cookie, a certificate.
	var jv console.JournalView
	code, body := get(anon, "/ui/api/journal", reader.Secret, nil)
	if code != http.StatusOK || json.Unmarshal([]byte(body), &jv) != nil || jv.Member.ID != s.ID() {
		t.Fatalf("rita GET /ui/api/journal: %d %.300q", code, body)
	}
	if code, body := get(withCert, "/nodes", "", nil); code != http.StatusOK || !strings.Contains(body, `id="nodes"`) {
		t.Fatalf("certificate GET /nodes: %d %.300q", code, body)
	}
	resp, err := anon.PostForm(base+"/ui/login", url.Values{"token": {fred.Secret + "x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login with a bad token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = anon.PostForm(base+"/ui/login", url.Values{"token": {reader.Secret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == console.CookieName {
			ck = k
		}
	}
	if resp.StatusCode != http.StatusSeeOther || ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookie %+v", resp.StatusCode, ck)
	}
	if code, body := get(anon, "/", "", ck); code != http.StatusOK || !strings.Contains(body, `id="cluster-id">secure<`) {
		t.Fatalf("GET / with the login cookie: %d %.300q", code, body)
	}

	// The refusals changed nothing: no event (no audit record either: the
	// gate refuses before any call), the tokens as they were. (The leader
	// may roll its block keys meanwhile: an ACL command, no event.)
	var nextAfter uint64
	s.FSM().View(func(st *fsm.State) { nextAfter = st.NextSeq() })
	_, ritaKept := s.FSM().ACL().Token(reader.Accessor)
	_, fredKept := s.FSM().ACL().Token(fred.Accessor)
	if nextAfter != nextSeq || !ritaKept || !fredKept {
		t.Errorf("console requests changed the state: next seq %d → %d (applied %d → %d), tokens kept %v %v", nextSeq, nextAfter, applied, s.FSM().AppliedIndex(), ritaKept, fredKept)
	}
}

// TestConsoleTail: the live tail of a follower sends the events appended
// after it opened, in order, those of the asked type prefix only, and
// picks up after the last event a reconnecting browser names.
func TestConsoleTail(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3)
	leader := tc.waitLeader()
	s := tc.server(tc.followers(leader)[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := tc.client(ctx)
	if _, err := cl.Journal().Append(ctx, client.Event{Type: "app.before", Payload: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	tc.waitConverged()
	open := func(query string, lastID string) (*http.Response, *sseReader) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr()+"/ui/api/tail"+query, nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("tail%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		r := &sseReader{r: resp.Body}
		if ev, _ := r.next(t); ev != "hello" {
			t.Fatalf("tail%s: first message %q", query, ev)
		}
		return resp, r
	}
	_, all := open("", "")
	_, fs := open("?prefix=app.fs.", "")
	seqs, err := cl.Journal().Append(ctx, client.Event{Type: "app.other", Payload: []byte("a")}, client.Event{Type: "app.fs.create", Payload: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"app.other", "app.fs.create"} {
		e := all.event(t)
		if e.Type != want || e.Seq != seqs[i] {
			t.Fatalf("tail: event %+v, want %s at seq %d", e, want, seqs[i])
		}
	}
	if e := fs.event(t); e.Type != "app.fs.create" || e.Seq != seqs[1] || e.Payload != "b" {
		t.Fatalf("tail with prefix app.fs.: %+v", e)
	}
	// A browser that reconnects after seq seqs[0] gets seqs[1] first.
	_, again := open("?from=1", strconv.FormatUint(seqs[0], 10))
	if e := again.event(t); e.Seq != seqs[1] {
		t.Fatalf("tail after Last-Event-ID %d: %+v", seqs[0], e)
	}
}

// sseReader reads server-sent events.
type sseReader struct {
	r   io.Reader
	buf []byte
}

// next returns the next message's event name and data.
func (s *sseReader) next(t *testing.T) (event, data string) {
	t.Helper()
	for {
		if i := strings.Index(string(s.buf), "\n\n"); i >= 0 {
			msg := string(s.buf[:i])
			s.buf = s.buf[i+2:]
			if strings.HasPrefix(msg, ":") {
				continue // keep-alive
			}
			for _, line := range strings.Split(msg, "\n") {
				if v, ok := strings.CutPrefix(line, "event: "); ok {
					event = v
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					data = v
				}
			}
			return event, data
		}
		b := make([]byte, 4096)
		n, err := s.r.Read(b)
		if err != nil {
			t.Fatalf("tail stream: %v", err)
		}
		s.buf = append(s.buf, b[:n]...)
	}
}

func (s *sseReader) event(t *testing.T) console.TailEvent {
	t.Helper()
	ev, data := s.next(t)
	var e console.TailEvent
	if ev != "event" || json.Unmarshal([]byte(data), &e) != nil {
		t.Fatalf("tail: %q %q", ev, data)
	}
	return e
}
