package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/logbookhq/logbook/client"
	"github.com/logbookhq/logbook/internal/testports"
	"github.com/spf13/cobra"
)

// TestNoEndpointAnswersSaysWhichAndHow: with every endpoint down, a
// command names each endpoint tried with its failure and says how to set
// the endpoints, from the flag or from LOGBOOK_ENDPOINTS alike.
func TestNoEndpointAnswersSaysWhichAndHow(t *testing.T) {
	a, b := testports.Addr(t, false), testports.Addr(t, false) // claimed, nothing listens
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"journal", "positions", "--endpoints", a + "," + b}},
		{map[string]string{"LOGBOOK_ENDPOINTS": a + "," + b}, []string{"status"}},
	} {
		code, _, stderr := run(t, c.env, c.args...)
		if code != 1 || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("coord %v: exit %d, stderr %q; want exit 1, one line", c.args, code, stderr)
		}
		for _, want := range []string{"no endpoint answered", a + ": dial tcp " + a, b + ": dial tcp " + b, "connection refused", "--endpoints", "LOGBOOK_ENDPOINTS"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("coord %v: stderr %q lacks %q", c.args, stderr, want)
			}
		}
	}
}

// TestEndpointsHintForTheDefault: with no endpoints given the hint says
// the default was tried; a TLS mismatch keeps its own hint.
func TestEndpointsHintForTheDefault(t *testing.T) {
	fail := &client.EndpointsError{Endpoints: []string{client.DefaultEndpoint}, Errs: []error{errors.New("dial tcp " + client.DefaultEndpoint + ": connect: connection refused")}}
	o := addClientFlags(&cobra.Command{Use: "x"}, 0, "")
	msg := o.explain(fail).Error()
	if !strings.Contains(msg, "default endpoint") || !strings.Contains(msg, "--endpoints host:port,... or LOGBOOK_ENDPOINTS") {
		t.Errorf("default endpoint down: %q; want the default named and how to set the endpoints", msg)
	}
	if !errors.Is(o.explain(fail), fail.Errs[0]) {
		t.Error("the explained error does not wrap the endpoint's failure")
	}
	tlsFail := &client.EndpointsError{Endpoints: []string{"h:1"}, Errs: []error{errors.New("error reading server preface: EOF")}}
	if msg := o.explain(tlsFail).Error(); !strings.Contains(msg, "--tls-ca") {
		t.Errorf("TLS mismatch: %q; want the TLS hint", msg)
	}
}

// TestMembersJSONCarriesTheError: status and members --json say why a
// member is not healthy, as the table's ERROR column does.
func TestMembersJSONCarriesTheError(t *testing.T) {
	st, _ := goldenStatus()
	var b strings.Builder
	if err := writeJSON(&b, toMembersJSON(st.Members)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), `"error"`); got != 1 || !strings.Contains(b.String(), `"error": "connection refused"`) {
		t.Errorf("members JSON %s: want the one unhealthy member's error, and none for the healthy", b.String())
	}
}
