package nodeserver

import (
	"testing"
	"time"
)

func TestParseRecoveryPause(t *testing.T) {
	for in, want := range map[string]struct {
		d      time.Duration
		prefix string
		ok     bool
	}{
		"":               {0, "", true},
		"3s":             {3 * time.Second, "", true},
		" 250ms@/pause/": {250 * time.Millisecond, "/pause/", true},
		"soon":           {ok: false},
		"0s":             {ok: false},
		"2h":             {ok: false},
		"1s@pause":       {ok: false},
	} {
		d, prefix, err := parseRecoveryPause(in)
		if (err == nil) != want.ok || (want.ok && (d != want.d || prefix != want.prefix)) {
			t.Errorf("parseRecoveryPause(%q) = %v, %q, %v; want %v, %q, ok=%v", in, d, prefix, err, want.d, want.prefix, want.ok)
		}
	}
}
