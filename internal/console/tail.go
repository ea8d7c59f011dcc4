package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The live tail's bounds: events per read of the applied state, payload
// bytes shown per event, and the keep-alive period.
const (
	tailBatch        = 200
	tailPayloadBytes = 256
	tailKeepAlive    = 15 * time.Second
	maxPrefixBytes   = 256
)

// TailEvent is one event of the live tail (the data of an "event" SSE
// message; its id is the seq).
type TailEvent struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	Bytes   int    `json:"bytes"`
	Payload string `json:"payload"`
	// Binary: the payload is not UTF-8 text and Payload is its hex
	// (cut to tailPayloadBytes).
	Binary bool   `json:"binary,omitempty"`
	Client string `json:"client,omitempty"`
}

// tail serves /ui/api/tail as server-sent events: the events of this
// member's applied journal from seq from (default: the next one), those
// whose type starts with prefix only. It reads the applied state in
// batches, as Journal.Tail does; a client that does not take a write
// within TailWriteTimeout is dropped, so a slow browser holds nothing but
// its own request.
func (c *Console) tail(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if err := c.cfg.Source.ReadJournal(ctx); err != nil {
		code, msg := httpError(err)
		c.failAs(w, r, true, code, msg)
		return
	}
	q := r.URL.Query()
	prefix := q.Get("prefix")
	if len(prefix) > maxPrefixBytes {
		c.failAs(w, r, true, http.StatusBadRequest, fmt.Sprintf("prefix of %d bytes: at most %d", len(prefix), maxPrefixBytes))
		return
	}
	// A browser that reconnects names the last event it took: that wins
	// over the from it first asked.
	var from uint64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			c.failAs(w, r, true, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q: want a seq", clip(id, 40)))
			return
		}
		from = n + 1
	} else if s := q.Get("from"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			c.failAs(w, r, true, http.StatusBadRequest, fmt.Sprintf("from %q: want a seq, a decimal number", clip(s, 40)))
			return
		}
		from = n
	}
	select {
	case c.tails <- struct{}{}:
		defer func() { <-c.tails }()
	default:
		c.failAs(w, r, true, http.StatusServiceUnavailable, fmt.Sprintf("this member serves %d live tails already: try again later", c.cfg.MaxTails))
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, first, next, _ := c.cfg.Source.Applied(1, 0)
	if from == 0 {
		from = next
	}
	send := func(event, id string, data any) bool {
		b, _ := json.Marshal(data)
		var sb strings.Builder
		if id != "" {
			sb.WriteString("id: " + id + "\n")
		}
		sb.WriteString("event: " + event + "\ndata: ")
		sb.Write(b)
		sb.WriteString("\n\n")
		_ = rc.SetWriteDeadline(time.Now().Add(c.cfg.TailWriteTimeout))
		if _, err := w.Write([]byte(sb.String())); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("hello", "", map[string]any{"from": from, "first": first, "safe_pos": next - 1, "prefix": prefix}) {
		return
	}
	keep := time.NewTimer(tailKeepAlive)
	defer keep.Stop()
	for {
		evs, first, _, changed := c.cfg.Source.Applied(from, tailBatch)
		if from < first {
			if !send("trimmed", "", map[string]any{"from": from, "first": first}) {
				return
			}
			from = first
			continue
		}
		for _, e := range evs {
			from = e.Seq + 1
			if !strings.HasPrefix(e.Type, prefix) {
				continue
			}
			if !send("event", strconv.FormatUint(e.Seq, 10), tailEvent(e)) {
				c.log.Debug("console: dropped a slow live tail", "remote", r.RemoteAddr)
				return
			}
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			send("bye", "", map[string]string{"reason": "the member is shutting down"})
			return
		case <-changed:
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(c.cfg.TailWriteTimeout))
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
			keep.Reset(tailKeepAlive)
		}
	}
}

func tailEvent(e *pbEvent) TailEvent {
	te := TailEvent{Seq: e.Seq, Type: e.Type, Bytes: len(e.Payload), Client: e.ClientId}
	p := e.Payload[:min(len(e.Payload), tailPayloadBytes)]
	if utf8.Valid(e.Payload) {
		te.Payload = clip(string(e.Payload), tailPayloadBytes)
	} else {
		te.Payload, te.Binary = fmt.Sprintf("%x", p), true
	}
	return te
}
