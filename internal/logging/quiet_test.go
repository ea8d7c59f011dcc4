package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestQuieting(t *testing.T) {
	var buf bytes.Buffer
	q := NewQuieting(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft", "raft-net")
	raft := HCLog(q.Logger, "raft-net")
	other := q.With(ComponentKey, "journal")
	raft.Error("before")
	q.Quiet()
	raft.Error("closed connection")
	q.Error("attr-bound", ComponentKey, "raft")
	other.Error("journal error")
	raft.Info("info stays")
	out := buf.String()
	for _, want := range []string{"msg=before", "msg=\"journal error\"", "msg=\"info stays\""} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing from %s", want, out)
		}
	}
	for _, gone := range []string{"closed connection", "attr-bound"} {
		if strings.Contains(out, gone) {
			t.Errorf("%q logged after Quiet above debug: %s", gone, out)
		}
	}
}
