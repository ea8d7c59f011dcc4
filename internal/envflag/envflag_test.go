package envflag

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"raft-addr":              "LOGBOOK_RAFT_ADDR",
		"id":                     "LOGBOOK_ID",
		"raft-heartbeat-timeout": "LOGBOOK_RAFT_HEARTBEAT_TIMEOUT",
	} {
		if got := Name(flag); got != want {
			t.Errorf("Name(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestApplyEnvPrecedence(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	addr := fs.String("raft-addr", "127.0.0.1:7000", "raft address")
	grpc := fs.String("grpc-addr", "127.0.0.1:7100", "grpc address")
	http := fs.String("http-addr", "127.0.0.1:7300", "http address")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat")
	join := fs.StringSlice("join", nil, "seeds")
	on := fs.Bool("log-json", false, "json")
	unbound := fs.String("other", "def", "not bound to the environment")
	Bind(fs, "raft-addr", "grpc-addr", "http-addr", "heartbeat", "join", "log-json")
	if u := fs.Lookup("raft-addr").Usage; !strings.Contains(u, "[$LOGBOOK_RAFT_ADDR]") {
		t.Errorf("usage %q does not name the variable", u)
	}
	if u := fs.Lookup("other").Usage; strings.Contains(u, "$") {
		t.Errorf("unbound flag usage %q names a variable", u)
	}
	if err := fs.Parse([]string{"--raft-addr", "10.0.0.1:7000"}); err != nil {
		t.Fatal(err)
	}
	err := Apply(fs, mapLookup(map[string]string{
		"LOGBOOK_RAFT_ADDR": "10.9.9.9:7000", // the flag wins
		"LOGBOOK_GRPC_ADDR": "0.0.0.0:9100",  // env beats the default
		"LOGBOOK_HTTP_ADDR": "  ",            // blank: unset
		"LOGBOOK_HEARTBEAT": "250ms",
		"LOGBOOK_JOIN":      "a:1,b:2",
		"LOGBOOK_LOG_JSON":  "1",
		"LOGBOOK_OTHER":     "from-env", // not bound
	}))
	if err != nil {
		t.Fatal(err)
	}
	if *addr != "10.0.0.1:7000" || *grpc != "0.0.0.0:9100" || *http != "127.0.0.1:7300" || *hb != 250*time.Millisecond ||
		strings.Join(*join, "|") != "a:1|b:2" || !*on || *unbound != "def" {
		t.Fatalf("got raft=%s grpc=%s http=%s hb=%s join=%v json=%v other=%s", *addr, *grpc, *http, *hb, *join, *on, *unbound)
	}
}

func TestApplyEnvReportsEveryBadValue(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Duration("raft-commit-timeout", time.Second, "")
	fs.Int("bootstrap-expect", 0, "")
	Bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := Apply(fs, mapLookup(map[string]string{
		"LOGBOOK_RAFT_COMMIT_TIMEOUT": "soon",
		"LOGBOOK_BOOTSTRAP_EXPECT":    "three",
	}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, want := range []string{`LOGBOOK_RAFT_COMMIT_TIMEOUT="soon"`, `LOGBOOK_BOOTSTRAP_EXPECT="three"`, "--bootstrap-expect"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
