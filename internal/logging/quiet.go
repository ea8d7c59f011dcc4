package logging

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
)

// Quieting wraps a logger so that, once Quiet is called, the warnings and
// errors of the named components (ComponentKey: "raft", "raft-net" ...)
// are logged at debug level. A whole local cluster stopping on Ctrl-C
// (coord dev) closes its members' connections under one another, and
// hashicorp/raft reports each closed connection and each vote it can no
// longer ask for as an error; those lines say nothing on a clean stop.
type Quieting struct {
	*slog.Logger
	quiet *atomic.Bool
}

// NewQuieting wraps l for components.
func NewQuieting(l *slog.Logger, components ...string) Quieting {
	q := new(atomic.Bool)
	return Quieting{Logger: slog.New(&quietHandler{h: l.Handler(), quiet: q, components: components}), quiet: q}
}

// Quiet demotes the components' warnings and errors from now on.
func (q Quieting) Quiet() { q.quiet.Store(true) }

type quietHandler struct {
	h          slog.Handler
	quiet      *atomic.Bool
	components []string
	match      bool // the logger's component is one of components
}

func (q *quietHandler) Enabled(ctx context.Context, l slog.Level) bool { return q.h.Enabled(ctx, l) }

func (q *quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelInfo && q.quiet.Load() {
		match := q.match
		if !match {
			r.Attrs(func(a slog.Attr) bool {
				match = a.Key == ComponentKey && slices.Contains(q.components, a.Value.String())
				return !match
			})
		}
		if match {
			if !q.h.Enabled(ctx, slog.LevelDebug) {
				return nil
			}
			r.Level = slog.LevelDebug
		}
	}
	return q.h.Handle(ctx, r)
}

func (q *quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *q
	c.h = q.h.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == ComponentKey && slices.Contains(q.components, a.Value.String()) {
			c.match = true
		}
	}
	return &c
}

func (q *quietHandler) WithGroup(name string) slog.Handler {
	c := *q
	c.h = q.h.WithGroup(name)
	return &c
}
