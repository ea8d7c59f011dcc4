package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	pb "github.com/logbookhq/logbook/api/logbookv1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Source answers the console's figures. Every method but Member and
// Applied is a call of the gRPC API's (named in its comment), made with
// the same code and authorized as ctx's caller (the Gate's context) by
// the same rules; its errors are gRPC statuses.
type Source interface {
	// Status is Cluster.Status, from this member.
	Status(ctx context.Context) (*pb.StatusResponse, error)
	// Positions, Segments and Consumers are Journal.Positions,
	// Journal.Segments and Journal.ListConsumers, from this member's
	// applied state.
	Positions(ctx context.Context) (*pb.PositionsResponse, error)
	Segments(ctx context.Context) (*pb.SegmentsResponse, error)
	Consumers(ctx context.Context) (*pb.ListConsumersResponse, error)
	// Nodes is Namespace.ListNodes, List Namespace.List and Stat
	// Namespace.Stat: the leader answers them (a follower forwards).
	Nodes(ctx context.Context) (*pb.ListNodesResponse, error)
	List(ctx context.Context, dir, after string, limit int) (*pb.ListResponse, error)
	Stat(ctx context.Context, path string) (*pb.StatResponse, error)
	// ReadJournal is nil if ctx's caller may read the whole journal
	// (Journal.Read's rule), else the refusal.
	ReadJournal(ctx context.Context) error
	// Applied returns up to max events from seq from out of this
	// member's applied state, its first retained and next seq, and a
	// channel closed at the next apply. It holds the state's read lock
	// only to copy the batch out.
	Applied(from uint64, max int) (evs []*pb.StoredEvent, first, next uint64, changed <-chan struct{})
	// Member is this member's own view: who it is, whom it follows, how
	// far it applied, and its gossip view of the coordinators.
	Member() Member
}

// Member is the answering member's view, shown on every page: where its
// figures come from and how fresh they are.
type Member struct {
	ID       string `json:"id"`
	Leader   bool   `json:"leader"`
	LeaderID string `json:"leader_id"`
	Term     uint64 `json:"term"`
	// CommitIndex is what it knows to be committed, AppliedIndex what
	// its state machine applied.
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// LastContactMs is the time since it heard from the leader (0 on the
	// leader, -1 never).
	LastContactMs int64 `json:"last_contact_ms"`
	// Gossip is the gossip state of each coordinator it sees, by id.
	Gossip map[string]string `json:"gossip,omitempty"`
}

// Gate decides who calls. token is the bearer token the request carries
// (its Authorization header, else the login cookie), "" for none. It
// returns the context the Source's calls run with (carrying the caller)
// and the caller's name, or a *Refusal.
type Gate func(r *http.Request, token string) (ctx context.Context, who string, err error)

// Refusal is a Gate's answer to a caller it does not let in.
type Refusal struct {
	// Status is http.StatusUnauthorized (no identity, or a bad token: the
	// console offers its login form) or http.StatusForbidden.
	Status int
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// Config says what the console serves.
type Config struct {
	Source Source
	// Gate decides every request but the login form and the static
	// assets (nil: everyone may read, as with security off).
	Gate Gate
	// SecureCookie marks the login cookie Secure (HTTPS only): set it
	// whenever the port serves TLS.
	SecureCookie bool
	// Gatherer is the process's metrics registry the charts sample.
	Gatherer prometheus.Gatherer
	// SampleEvery is the sampler's period (0: DefaultSampleEvery); the
	// charts span ChartWindow.
	SampleEvery time.Duration
	// MaxTails bounds the live tails served at once (0: DefaultMaxTails).
	MaxTails int
	// TailWriteTimeout is how long a tail client may take to accept one
	// write before it is dropped (0: DefaultTailWriteTimeout).
	TailWriteTimeout time.Duration
	Logger           *slog.Logger
}

// Defaults of Config.
const (
	DefaultSampleEvery      = 5 * time.Second
	ChartWindow             = 15 * time.Minute
	DefaultMaxTails         = 16
	DefaultTailWriteTimeout = 5 * time.Second
)

//go:embed assets
var assets embed.FS

//go:embed assets/favicon.svg
var favicon []byte

// Console is the console's handler. Close stops its goroutines.
type Console struct {
	cfg     Config
	log     *slog.Logger
	tmpl    *template.Template
	static  http.Handler
	sampler *sampler
	index   *index
	tails   chan struct{} // one token per tail being served

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
}

// New returns the console; its sampler starts at once, its journal index
// at the first request that needs it.
func New(cfg Config) (*Console, error) {
	if cfg.Source == nil {
		return nil, errors.New("console: Config.Source is required")
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = DefaultSampleEvery
	}
	if cfg.MaxTails <= 0 {
		cfg.MaxTails = DefaultMaxTails
	}
	if cfg.TailWriteTimeout <= 0 {
		cfg.TailWriteTimeout = DefaultTailWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Console{
		cfg: cfg, log: cfg.Logger.With("component", "console"), tmpl: tmpl,
		static: http.StripPrefix("/ui/static/", http.FileServerFS(static)),
		tails:  make(chan struct{}, cfg.MaxTails),
		ctx:    ctx, cancel: cancel,
	}
	c.index = newIndex(cfg.Source)
	c.sampler = newSampler(cfg.Gatherer, cfg.SampleEvery, int(ChartWindow/cfg.SampleEvery))
	if cfg.Gatherer != nil {
		c.wg.Go(func() { c.sampler.run(ctx) })
	}
	return c, nil
}

// Close stops the sampler, the index and the live tails, and waits for
// them.
func (c *Console) Close() {
	c.cancel()
	c.wg.Wait()
}

// startIndex starts the journal index once.
func (c *Console) startIndex() {
	c.startOnce.Do(func() { c.wg.Go(func() { c.index.run(c.ctx) }) })
}

// route is one page: its HTML template (none: JSON only) and the
// function that builds its view.
type route struct {
	template string
	title    string
	build    func(ctx context.Context, r *http.Request) (any, error)
}

func (c *Console) routes() map[string]route {
	return map[string]route{
		"/":           {"overview", "Overview", c.overview},
		"/journal":    {"journal", "Journal", c.journal},
		"/nodes":      {"nodes", "Storage nodes", c.nodes},
		"/namespace":  {"namespace", "Namespace", c.namespace},
		"/file":       {"file", "File", c.file},
		"/recoveries": {"recoveries", "Recoveries", c.recoveries},
		"/recovery":   {"recovery", "Recovery", c.recovery},
	}
}

// ServeHTTP serves every console route: a page at its path, its JSON at
// /ui/api/ and the path without its slash ("/" is overview).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			c.log.Error("console: a request panicked", "path", r.URL.Path, "panic", fmt.Sprint(v))
			c.fail(w, r, http.StatusInternalServerError, "internal error")
		}
	}()
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/ui/static/"):
		if !c.readOnly(w, r) {
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		c.static.ServeHTTP(w, r)
		return
	case p == "/favicon.ico":
		if c.readOnly(w, r) {
			w.Header().Set("Content-Type", "image/svg+xml")
			w.Header().Set("Cache-Control", "max-age=86400")
			_, _ = w.Write(favicon)
		}
		return
	case p == "/ui/login":
		c.login(w, r)
		return
	case p == "/ui/logout":
		c.logout(w, r)
		return
	case p == "/ui/api/tail":
		if !c.readOnly(w, r) {
			return
		}
		if ctx, ok := c.admit(w, r, true); ok {
			c.tail(ctx, w, r)
		}
		return
	}
	api := strings.HasPrefix(p, "/ui/api/")
	name := p
	if api {
		name = "/" + strings.TrimPrefix(p, "/ui/api/")
		if name == "/overview" {
			name = "/"
		}
	}
	rt, ok := c.routes()[name]
	if !ok {
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no such page: %s", clip(p, 200)))
		return
	}
	if !c.readOnly(w, r) {
		return
	}
	ctx, ok := c.admit(w, r, api)
	if !ok {
		return
	}
	view, err := rt.build(ctx, r)
	if err != nil {
		code, msg := httpError(err)
		c.failAs(w, r, api, code, msg)
		return
	}
	if api {
		writeJSON(w, http.StatusOK, view)
		return
	}
	c.render(w, r, rt, view)
}

// readOnly answers 405 to anything but GET and HEAD.
func (c *Console) readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	c.fail(w, r, http.StatusMethodNotAllowed, "the console is read-only: "+r.Method+" is not allowed")
	return false
}

// admit runs the Gate; a refused page request is sent to the login form.
func (c *Console) admit(w http.ResponseWriter, r *http.Request, api bool) (context.Context, bool) {
	if c.cfg.Gate == nil {
		return r.Context(), true
	}
	ctx, _, err := c.cfg.Gate(r, requestToken(r))
	if err == nil {
		return ctx, true
	}
	var ref *Refusal
	if !errors.As(err, &ref) {
		ref = &Refusal{Status: http.StatusForbidden, Reason: err.Error()}
	}
	if ref.Status == http.StatusUnauthorized && !api {
		c.renderLogin(w, r, http.StatusUnauthorized, ref.Reason)
		return nil, false
	}
	c.failAs(w, r, api, ref.Status, ref.Reason)
	return nil, false
}

// httpError maps a Source error (a gRPC status) to an HTTP status and
// its message.
func httpError(err error) (int, string) {
	var bad *badRequest
	if errors.As(err, &bad) {
		return http.StatusBadRequest, bad.msg
	}
	var nf *notFoundErr
	if errors.As(err, &nf) {
		return http.StatusNotFound, nf.msg
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest, st.Message()
	case codes.NotFound:
		return http.StatusNotFound, st.Message()
	case codes.Unauthenticated:
		return http.StatusUnauthorized, st.Message()
	case codes.PermissionDenied:
		return http.StatusForbidden, st.Message()
	case codes.Unavailable, codes.DeadlineExceeded, codes.FailedPrecondition, codes.Canceled:
		return http.StatusServiceUnavailable, st.Message()
	}
	return http.StatusBadGateway, st.Message()
}

// badRequest is input the console refuses itself (400).
type badRequest struct{ msg string }

func (b *badRequest) Error() string { return b.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// failAs answers an error as JSON to the API, as a page to a browser.
func (c *Console) failAs(w http.ResponseWriter, r *http.Request, api bool, code int, msg string) {
	if api {
		writeJSON(w, code, map[string]any{"error": msg, "status": code})
		return
	}
	c.fail(w, r, code, msg)
}

// fail answers an error page (or JSON under /ui/api/): the status and its
// reason, never a stack trace.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/ui/api/") {
		writeJSON(w, code, map[string]any{"error": msg, "status": code})
		return
	}
	c.renderStatus(w, code, "error", page{Title: http.StatusText(code), Status: code, Error: msg})
}

// page is what the layout renders: the chrome around one view.
type page struct {
	Title  string
	Nav    string
	Status int
	Error  string
	View   any
	// Login form: the reason it is shown.
	LoginReason string
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, rt route, view any) {
	c.renderStatus(w, http.StatusOK, rt.template, page{Title: rt.title, Nav: rt.template, View: view})
}

func (c *Console) renderStatus(w http.ResponseWriter, code int, name string, p page) {
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.log.Error("console: rendering a page failed", "template", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "internal error encoding the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// clip cuts s to at most n bytes on a rune boundary, for echoing input.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && s[len(s)-1]&0xc0 == 0x80 {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0xc0 {
		s = s[:len(s)-1]
	}
	return s + "…"
}
