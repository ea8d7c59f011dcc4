package logging

import (
	"context"
	"io"
	"log"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

var _ hclog.Logger = (*hcAdapter)(nil)

// hclogMissingKey names a trailing value that has no key (hclog's
// EXTRA_VALUE_AT_END, in project style).
const hclogMissingKey = "extra-value-at-end"

// HCLog returns an hclog.Logger that forwards to l, for hashicorp/raft and
// other hclog users. The logger's name (Named joins names with ".") goes in
// the "component" attribute; key/value arguments become slog attributes.
// TRACE is emitted at LevelTrace (slog.LevelDebug-4).
//
// The slog handler's level is the floor. SetLevel can raise it (drop more
// records) for this logger and every logger derived from it; SetLevel
// (hclog.NoLevel) restores the handler's level. A nil l uses slog.Default().
func HCLog(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return newHCAdapter(l, name, nil, new(atomic.Int32))
}

// hcAdapter implements hclog.Logger on top of a *slog.Logger.
type hcAdapter struct {
	base    *slog.Logger  // without component and implied args
	out     *slog.Logger  // base with component and implied args
	name    string        // hclog name, "" for none
	implied []interface{} // With args, alternating key and value
	level   *atomic.Int32 // hclog.Level shared with derived loggers; NoLevel: defer to out
}

func newHCAdapter(base *slog.Logger, name string, implied []interface{}, level *atomic.Int32) *hcAdapter {
	out := base
	if name != "" {
		out = out.With(ComponentKey, name)
	}
	if len(implied) > 0 {
		attrs := toAttrs(implied)
		args := make([]any, len(attrs))
		for i, a := range attrs {
			args[i] = a
		}
		out = out.With(args...)
	}
	return &hcAdapter{base: base, out: out, name: name, implied: implied, level: level}
}

// Log emits msg at level; NoLevel logs at Info, Off logs nothing.
func (a *hcAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	a.emit(level, msg, args)
}

// Trace emits msg at LevelTrace.
func (a *hcAdapter) Trace(msg string, args ...interface{}) { a.emit(hclog.Trace, msg, args) }

// Debug emits msg at slog.LevelDebug.
func (a *hcAdapter) Debug(msg string, args ...interface{}) { a.emit(hclog.Debug, msg, args) }

// Info emits msg at slog.LevelInfo.
func (a *hcAdapter) Info(msg string, args ...interface{}) { a.emit(hclog.Info, msg, args) }

// Warn emits msg at slog.LevelWarn.
func (a *hcAdapter) Warn(msg string, args ...interface{}) { a.emit(hclog.Warn, msg, args) }

// Error emits msg at slog.LevelError.
func (a *hcAdapter) Error(msg string, args ...interface{}) { a.emit(hclog.Error, msg, args) }

// emit must be called directly by the exported logging method so that the
// record's source is the library's call site.
func (a *hcAdapter) emit(level hclog.Level, msg string, args []interface{}) {
	sl, ok := a.enabled(level)
	if !ok {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, emit, the hclog method
	r := slog.NewRecord(time.Now(), sl, msg, pcs[0])
	r.AddAttrs(toAttrs(args)...)
	_ = a.out.Handler().Handle(context.Background(), r)
}

// enabled reports whether a record at level would be emitted, and its slog level.
func (a *hcAdapter) enabled(level hclog.Level) (slog.Level, bool) {
	if level == hclog.Off {
		return 0, false
	}
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !a.allowed(level) {
		return 0, false
	}
	sl := toSlogLevel(level)
	return sl, a.out.Enabled(context.Background(), sl)
}

// allowed applies the SetLevel override only.
func (a *hcAdapter) allowed(level hclog.Level) bool {
	floor := hclog.Level(a.level.Load())
	return floor == hclog.NoLevel || level >= floor
}

// IsTrace reports whether Trace records are emitted.
func (a *hcAdapter) IsTrace() bool { _, ok := a.enabled(hclog.Trace); return ok }

// IsDebug reports whether Debug records are emitted.
func (a *hcAdapter) IsDebug() bool { _, ok := a.enabled(hclog.Debug); return ok }

// IsInfo reports whether Info records are emitted.
func (a *hcAdapter) IsInfo() bool { _, ok := a.enabled(hclog.Info); return ok }

// IsWarn reports whether Warn records are emitted.
func (a *hcAdapter) IsWarn() bool { _, ok := a.enabled(hclog.Warn); return ok }

// IsError reports whether Error records are emitted.
func (a *hcAdapter) IsError() bool { _, ok := a.enabled(hclog.Error); return ok }

// ImpliedArgs returns the key/value pairs added by With.
func (a *hcAdapter) ImpliedArgs() []interface{} {
	return append([]interface{}(nil), a.implied...)
}

// With returns a logger that adds args to every record. A key given again
// replaces the earlier value, as in hclog.
func (a *hcAdapter) With(args ...interface{}) hclog.Logger {
	implied := append([]interface{}(nil), a.implied...)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			implied = append(implied, hclogMissingKey, args[i])
			break
		}
		key := keyString(args[i])
		replaced := false
		for j := 0; j+1 < len(implied); j += 2 {
			if keyString(implied[j]) == key {
				implied[j+1] = args[i+1]
				replaced = true
				break
			}
		}
		if !replaced {
			implied = append(implied, key, args[i+1])
		}
	}
	return newHCAdapter(a.base, a.name, implied, a.level)
}

// Name returns the logger's name.
func (a *hcAdapter) Name() string { return a.name }

// Named returns a logger named "<current>.<name>", or name if unnamed.
func (a *hcAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return newHCAdapter(a.base, name, a.implied, a.level)
}

// ResetNamed returns a logger named name, ignoring the current name.
func (a *hcAdapter) ResetNamed(name string) hclog.Logger {
	return newHCAdapter(a.base, name, a.implied, a.level)
}

// SetLevel sets the minimum level of this logger and all loggers derived
// from the same HCLog call. It cannot go below the slog handler's level;
// hclog.NoLevel removes the override.
func (a *hcAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

// GetLevel returns the lowest level that is emitted, or hclog.Off.
func (a *hcAdapter) GetLevel() hclog.Level {
	for lv := hclog.Trace; lv <= hclog.Error; lv++ {
		if _, ok := a.enabled(lv); ok {
			return lv
		}
	}
	return hclog.Off
}

// StandardLogger returns a *log.Logger writing through StandardWriter.
func (a *hcAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that logs each write as one record, at
// Info unless opts infers or forces a level.
func (a *hcAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	if opts.ForceLevel == hclog.Off {
		return io.Discard
	}
	w := &stdWriter{
		logger:    a.out,
		allow:     func(l slog.Level) bool { return a.allowed(fromSlogLevel(l)) },
		infer:     opts.InferLevels,
		stripTime: opts.InferLevels && opts.InferLevelsWithTimestamp,
		level:     slog.LevelInfo,
	}
	if opts.ForceLevel != hclog.NoLevel {
		w.force, w.level = true, toSlogLevel(opts.ForceLevel)
	}
	return w
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return LevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func fromSlogLevel(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelError:
		return hclog.Error
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Info
	case l >= slog.LevelDebug:
		return hclog.Debug
	default:
		return hclog.Trace
	}
}
