package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// levelPrefixes maps memberlist's "[LEVEL]" message prefixes to slog levels.
var levelPrefixes = []struct {
	prefix []byte
	level  slog.Level
}{
	{[]byte("[TRACE]"), slog.LevelDebug - 4},
	{[]byte("[DEBUG]"), slog.LevelDebug},
	{[]byte("[INFO]"), slog.LevelInfo},
	{[]byte("[WARN]"), slog.LevelWarn},
	{[]byte("[WARNING]"), slog.LevelWarn},
	{[]byte("[ERR]"), slog.LevelError},
	{[]byte("[ERROR]"), slog.LevelError},
}

// logWriter adapts memberlist's *log.Logger output to slog. The standard
// logger calls Write once per message, so each call is one record.
type logWriter struct {
	logger *slog.Logger
}

// newStdLogger returns a *log.Logger for memberlist that writes to l.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{logger: l.With("component", "memberlist")}, "", 0)
}

// Write implements io.Writer. Lines without a recognised prefix are logged at
// Info.
func (w logWriter) Write(p []byte) (int, error) {
	msg := bytes.TrimRight(p, "\r\n")
	level := slog.LevelInfo
	for _, lp := range levelPrefixes {
		if bytes.HasPrefix(msg, lp.prefix) {
			level = lp.level
			msg = bytes.TrimSpace(msg[len(lp.prefix):])
			break
		}
	}
	ctx := context.Background()
	if !w.logger.Enabled(ctx, level) {
		return len(p), nil
	}
	msg = bytes.TrimPrefix(msg, []byte("memberlist: "))
	w.logger.Log(ctx, level, string(msg))
	return len(p), nil
}
