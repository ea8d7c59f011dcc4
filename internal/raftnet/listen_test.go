package raftnet

import (
	"net"
	"strings"
	"testing"
)

func TestListen(t *testing.T) {
	for _, tc := range []struct {
		bind, advertise string
		wantAddr        string // "" with wantErr; "listener" for the bound address
		wantErr         string
	}{
		{bind: "127.0.0.1:0", wantAddr: "listener"},
		{bind: "127.0.0.1:0", advertise: "10.1.2.3:7000", wantAddr: "10.1.2.3:7000"},
		{bind: "0.0.0.0:0", advertise: "10.1.2.3:7000", wantAddr: "10.1.2.3:7000"},
		{bind: "127.0.0.1:0", advertise: "node-1.logbook.internal:7000", wantAddr: "node-1.logbook.internal:7000"},
		{bind: "127.0.0.1:0", advertise: "[fd00::1]:7000", wantAddr: "[fd00::1]:7000"},
		{bind: "0.0.0.0:0", wantErr: "not advertisable"},
		{bind: ":0", wantErr: "not advertisable"},
		{bind: "127.0.0.1:0", advertise: "0.0.0.0:7000", wantErr: "unspecified"},
		{bind: "127.0.0.1:0", advertise: "10.1.2.3", wantErr: "advertise address"},
		{bind: "127.0.0.1:0", advertise: "10.1.2.3:0", wantErr: "needs a port"},
		{bind: "127.0.0.1:0", advertise: ":7000", wantErr: "needs a host"},
		{bind: "127.0.0.1:bad", wantErr: "listen on"},
	} {
		s, err := Listen(tc.bind, tc.advertise, "c1", nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "raftnet: ") {
				t.Errorf("Listen(%q, %q) error = %v, want %q", tc.bind, tc.advertise, err, tc.wantErr)
			}
			if s != nil {
				_ = s.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Listen(%q, %q): %v", tc.bind, tc.advertise, err)
			continue
		}
		want := tc.wantAddr
		if want == "listener" {
			want = s.ln.Addr().String()
		}
		if got := s.Addr().String(); got != want {
			t.Errorf("Listen(%q, %q).Addr() = %q, want %q", tc.bind, tc.advertise, got, want)
		}
		if s.Addr().Network() != "tcp" {
			t.Errorf("Addr().Network() = %q", s.Addr().Network())
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestClusterIDValidation(t *testing.T) {
	long := strings.Repeat("x", MaxClusterIDLen+1)
	for _, id := range []string{"", long} {
		if _, err := Listen("127.0.0.1:0", "", id, nil); err == nil {
			t.Errorf("Listen accepted cluster id of %d bytes", len(id))
		}
	}
	if err := ValidateClusterID(strings.Repeat("x", MaxClusterIDLen)); err != nil {
		t.Errorf("255-byte id rejected: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer func() {
		if recover() == nil {
			t.Error("NewStreamLayer accepted a 256-byte cluster id")
		}
	}()
	NewStreamLayer(ln, nil, long, nil)
}
