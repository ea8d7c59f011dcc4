// Package logging builds Logbook's one structured logger (log/slog) and
// bridges the loggers of third-party libraries to it: hclog for
// hashicorp/raft and *log.Logger for hashicorp/memberlist and other
// stdlib-logger users.
//
// Every bridged record carries the library's logger name in a "component"
// attribute. Attribute keys Logbook itself emits are kebab-case
// ("remote-addr", "cluster-id"); keys passed by libraries are kept as given.
package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"
)

// ComponentKey is the attribute key naming the subsystem that logged a record.
const ComponentKey = "component"

// LevelTrace is the slog level hclog TRACE records are emitted at.
const LevelTrace = slog.LevelDebug - 4

// ParseLevel parses one of debug, info, warn or error.
func ParseLevel(level string) (slog.Level, error) {
	switch level {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return 0, fmt.Errorf("logging: unknown level %q (want debug, info, warn or error)", level)
	}
}

// New returns a logger writing to w at the given minimum level (debug, info,
// warn or error), as JSON lines when json is true and as logfmt-style text
// otherwise.
func New(w io.Writer, level string, json bool) (*slog.Logger, error) {
	if w == nil {
		return nil, errors.New("logging: nil writer")
	}
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: renameTrace}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// renameTrace prints LevelTrace as "TRACE" rather than "DEBUG-4", for
// handlers built on top of New's options at a lower level.
func renameTrace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok && l == LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}

// StdLog returns a *log.Logger whose lines are re-emitted on l with the given
// component. It suits libraries such as memberlist that print
// "[LEVEL] component: message": the "[LEVEL]" prefix selects the slog level
// (ERR/ERROR, WARN, INFO, DEBUG/TRACE; Info when absent), and a leading
// stdlib date/time prefix and a redundant "component: " prefix are removed.
//
// A nil l uses slog.Default().
func StdLog(l *slog.Logger, component string) *log.Logger {
	if l == nil {
		l = slog.Default()
	}
	w := &stdWriter{logger: l, infer: true, stripTime: true, level: slog.LevelInfo}
	if component != "" {
		w.logger = l.With(ComponentKey, component)
		w.prefix = component + ": "
	}
	return log.New(w, "", 0)
}

// stdWriter turns each Write (one log.Logger line) into one slog record.
// Records carry no source position: the stdlib logger's caller depth varies.
type stdWriter struct {
	logger    *slog.Logger
	allow     func(slog.Level) bool // optional extra level filter
	prefix    string                // removed from the message when present
	infer     bool                  // parse a "[LEVEL]" prefix
	stripTime bool                  // remove a leading stdlib date/time prefix
	force     bool                  // always log at level, after removing any "[LEVEL]"
	level     slog.Level            // level when none is inferred, or the forced level
}

// Write implements io.Writer. It never fails.
func (w *stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\r\n")
	if w.stripTime {
		msg = stripTimestamp(msg)
	}
	level := w.level
	if w.infer || w.force {
		if lvl, rest, ok := parseLevelPrefix(msg); ok {
			msg = rest
			if !w.force {
				level = lvl
			}
		}
	}
	if w.prefix != "" {
		msg = strings.TrimPrefix(msg, w.prefix)
	}
	ctx := context.Background()
	if (w.allow != nil && !w.allow(level)) || !w.logger.Enabled(ctx, level) {
		return len(p), nil
	}
	_ = w.logger.Handler().Handle(ctx, slog.NewRecord(time.Now(), level, msg, 0))
	return len(p), nil
}

// parseLevelPrefix splits "[WARN] rest" into (Warn, "rest", true).
func parseLevelPrefix(s string) (slog.Level, string, bool) {
	if !strings.HasPrefix(s, "[") {
		return 0, s, false
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return 0, s, false
	}
	var lvl slog.Level
	switch s[1:end] {
	case "ERR", "ERROR":
		lvl = slog.LevelError
	case "WARN":
		lvl = slog.LevelWarn
	case "INFO":
		lvl = slog.LevelInfo
	case "DEBUG", "TRACE":
		lvl = slog.LevelDebug
	default:
		return 0, s, false
	}
	return lvl, strings.TrimLeft(s[end+1:], " "), true
}

// stripTimestamp removes a leading "2006/01/02 ", "15:04:05" and optional
// ".000000" fraction, as written by log.LstdFlags and log.Lmicroseconds.
func stripTimestamp(s string) string {
	if len(s) >= 11 && matches(s[:10], "dddd/dd/dd") && s[10] == ' ' {
		s = s[11:]
	}
	if len(s) >= 8 && matches(s[:8], "dd:dd:dd") {
		rest := s[8:]
		if len(rest) > 0 && rest[0] == '.' {
			i := 1
			for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
				i++
			}
			rest = rest[i:]
		}
		if rest == "" || rest[0] == ' ' {
			s = strings.TrimLeft(rest, " ")
		}
	}
	return s
}

// matches reports whether s has pattern's shape, 'd' standing for a digit.
func matches(s, pattern string) bool {
	if len(s) != len(pattern) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if pattern[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != pattern[i] {
			return false
		}
	}
	return true
}
