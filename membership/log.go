package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
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
	logger   *slog.Logger
	plain    *slog.Logger // without the memberlist component, for our own lines
	mismatch *mismatchLog
}

// newStdLogger returns a *log.Logger for memberlist that writes to l.
func newStdLogger(l *slog.Logger, lim *mismatchLog) *log.Logger {
	return log.New(logWriter{logger: l.With("component", "memberlist"), plain: l, mismatch: lim}, "", 0)
}

// keyMismatch reports whether a memberlist error or log line says gossip
// could not be decrypted, or that one side encrypts and the other does
// not (memberlist v0.5.4 security.go and net.go).
func keyMismatch(msg string) bool {
	for _, s := range []string{
		"no installed keys could decrypt",
		"encryption is configured but remote state is not encrypted",
		"remote state is encrypted and encryption is not configured",
		"Decrypt packet failed",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// mismatchInterval spaces the wrong-key warnings: memberlist logs every
// refused packet itself.
const mismatchInterval = 10 * time.Second

// mismatchLog says, at most once per mismatchInterval, in plain words,
// what memberlist's decryption errors mean.
type mismatchLog struct {
	last atomic.Int64 // unix nanoseconds of the last warning
}

func (l *mismatchLog) warn(log *slog.Logger, args ...any) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if last != 0 && now-last < int64(mismatchInterval) || !l.last.CompareAndSwap(last, now) {
		return
	}
	log.Warn("membership: gossip key mismatch: gossip to or from a peer could not be decrypted with any installed gossip key "+
		"(or only one side encrypts); that peer is not admitted until both share a key (check --gossip-key / --gossip-keyring-file)", args...)
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
	if w.mismatch != nil && keyMismatch(string(msg)) {
		w.mismatch.warn(w.plain, "detail", string(bytes.TrimPrefix(msg, []byte("memberlist: "))))
	}
	if !w.logger.Enabled(ctx, level) {
		return len(p), nil
	}
	msg = bytes.TrimPrefix(msg, []byte("memberlist: "))
	w.logger.Log(ctx, level, string(msg))
	return len(p), nil
}
