package membership

import (
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	in := Meta{Role: RoleCoordinator, ID: "coord-1", ClusterID: "prod", RaftAddr: "10.0.0.1:7000",
		GRPCAddr: "10.0.0.1:7001", HTTPAddr: "[::1]:8080", Bootstrapped: true}
	for _, leaving := range []bool{false, true} {
		b, err := encodeMeta(in, leaving)
		if err != nil {
			t.Fatal(err)
		}
		out, gotLeaving, err := decodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		if out != in || gotLeaving != leaving {
			t.Fatalf("round trip: got %+v leaving=%v, want %+v leaving=%v", out, gotLeaving, in, leaving)
		}
	}
}

func TestMetaDecodeForwardCompatible(t *testing.T) {
	m, _, err := decodeMeta([]byte(`{"v":1,"r":"gateway","id":"g1","c":"prod","future":42}`))
	if err != nil {
		t.Fatalf("unknown role and fields should decode: %v", err)
	}
	if m.Role != "gateway" || m.ID != "g1" {
		t.Fatalf("got %+v", m)
	}
}

func TestMetaDecodeErrors(t *testing.T) {
	for _, in := range []string{
		``, `garbage`, `{}`, `{"v":2,"r":"node","id":"x","c":"prod"}`,
		`{"v":1,"id":"x","c":"prod"}`, `{"v":1,"r":"node","c":"prod"}`, `{"v":1,"r":"node","id":"x"}`,
		`{"v":1,"r":"coordinator","id":"x","c":"prod"}`, `{"v":1,"r":"node","id":"x","c":"prod","ga":"nope"}`,
		`{"v":1,"r":"node","id":"a b","c":"prod"}`,
	} {
		if _, _, err := decodeMeta([]byte(in)); err == nil || !strings.HasPrefix(err.Error(), "membership: ") {
			t.Errorf("decodeMeta(%q) err = %v, want a membership error", in, err)
		}
	}
}

func TestMetaValidate(t *testing.T) {
	ok := Meta{Role: RoleNode, ID: "n1", ClusterID: "prod"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]Meta{
		"unknown role":        {Role: "gateway", ID: "n1", ClusterID: "prod"},
		"no id":               {Role: RoleNode, ClusterID: "prod"},
		"long id":             {Role: RoleNode, ID: strings.Repeat("x", maxIDLen+1), ClusterID: "prod"},
		"control char":        {Role: RoleNode, ID: "n\x001", ClusterID: "prod"},
		"coordinator no raft": {Role: RoleCoordinator, ID: "c1", ClusterID: "prod"},
		"bad http address":    {Role: RoleNode, ID: "n1", ClusterID: "prod", HTTPAddr: "localhost"},
		"no cluster id":       {Role: RoleNode, ID: "n1"},
	}
	for name, m := range bad {
		if err := m.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, m)
		}
	}
}

func TestMetaSizeLimit(t *testing.T) {
	m := Meta{Role: RoleNode, ID: "n1", ClusterID: "prod", HTTPAddr: strings.Repeat("h", 490) + ":80"}
	_, err := encodeMeta(m, false)
	if err == nil || !strings.Contains(err.Error(), "exceeds memberlist limit") {
		t.Fatalf("err = %v, want size error", err)
	}
	// The largest IDs the validation allows still leave room for addresses.
	m = Meta{Role: RoleCoordinator, ID: strings.Repeat("i", maxIDLen), ClusterID: strings.Repeat("c", maxIDLen),
		RaftAddr: "[2001:db8::1]:7000", GRPCAddr: "[2001:db8::1]:7001", HTTPAddr: "[2001:db8::1]:7002", Bootstrapped: true}
	b, err := encodeMeta(m, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > memberlist.MetaMaxSize {
		t.Fatalf("encoded %d bytes", len(b))
	}
}
