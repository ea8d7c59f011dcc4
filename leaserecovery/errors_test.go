package leaserecovery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorMatching(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", newErr(KindAborted, ReasonRecoveryIDMismatch, "blk_%d", 7))
	tests := []struct {
		name   string
		target error
		want   bool
	}{
		{"kind sentinel", ErrAborted, true},
		{"kind value", KindAborted, true},
		{"other kind", ErrNotFound, false},
		{"kind and reason", &Error{Kind: KindAborted, Reason: ReasonRecoveryIDMismatch}, true},
		{"kind without reason", &Error{Kind: KindAborted}, true},
		{"kind, other reason", &Error{Kind: KindAborted, Reason: ReasonPreempted}, false},
		{"other kind, same reason", &Error{Kind: KindNotFound, Reason: ReasonRecoveryIDMismatch}, false},
		{"foreign error", errors.New("x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(err, tt.target); got != tt.want {
				t.Fatalf("errors.Is = %v, want %v", got, tt.want)
			}
		})
	}
	if KindOf(err) != KindAborted || ReasonOf(err) != ReasonRecoveryIDMismatch {
		t.Fatalf("KindOf/ReasonOf = %v/%q", KindOf(err), ReasonOf(err))
	}
	if s := err.Error(); !strings.Contains(s, "leaserecovery: aborted: blk_7 (recovery-id-mismatch)") {
		t.Fatalf("Error() = %q", s)
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{"nil", nil, KindUnknown},
		{"foreign", errors.New("x"), KindUnknown},
		{"sentinel", ErrUnavailable, KindUnavailable},
		{"wrapped sentinel", fmt.Errorf("a: %w", ErrInternal), KindInternal},
		{"error", newErr(KindOutOfRange, ReasonLengthShrinks, ""), KindOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KindOf(tt.err); got != tt.want {
				t.Fatalf("KindOf = %v, want %v", got, tt.want)
			}
		})
	}
	if ReasonOf(ErrUnavailable) != "" || ReasonOf(nil) != "" {
		t.Fatal("ReasonOf of a sentinel or nil must be empty")
	}
}

func TestKindNames(t *testing.T) {
	for k := KindUnknown; k <= KindInternal; k++ {
		if s := k.String(); s == "" || strings.HasPrefix(s, "kind(") {
			t.Errorf("kind %d has no name", k)
		}
	}
	if KindInternal+1 != ErrorKind(len(kindNames)) {
		t.Fatal("kindNames out of step with the kinds")
	}
	if s := ErrorKind(99).String(); s != "kind(99)" {
		t.Fatalf("unknown kind = %q", s)
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []struct {
		name string
		edit func(*Config)
	}{
		{"zero soft limit", func(c *Config) { c.SoftLimit = 0 }},
		{"negative hard limit", func(c *Config) { c.HardLimit = -1 }},
		{"zero recovery timeout", func(c *Config) { c.RecoveryTimeout = 0 }},
		{"zero stale interval", func(c *Config) { c.StaleInterval = 0 }},
		{"soft above hard", func(c *Config) { c.SoftLimit = c.HardLimit + 1 }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			wantErr(t, c.Validate(), KindInvalidArgument, ReasonBadConfig)
		})
	}
}

// §R3.1: a lease expires strictly after its limit.
func TestLeaseLimits(t *testing.T) {
	c := DefaultConfig()
	tests := []struct {
		name       string
		age        int64 // seconds since renewal
		soft, hard bool
	}{
		{"fresh", 0, false, false},
		{"at soft limit", 60, false, false},
		{"past soft limit", 61, true, false},
		{"at hard limit", 1200, true, false},
		{"past hard limit", 1201, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			renewed := t0.Add(-secs(tt.age))
			if got := c.SoftExpired(renewed, t0); got != tt.soft {
				t.Errorf("SoftExpired = %v, want %v", got, tt.soft)
			}
			if got := c.HardExpired(renewed, t0); got != tt.hard {
				t.Errorf("HardExpired = %v, want %v", got, tt.hard)
			}
		})
	}
}

func TestStateNames(t *testing.T) {
	names := map[fmt.Stringer]string{
		BlockUnderConstruction: "UNDER_CONSTRUCTION", BlockUnderRecovery: "UNDER_RECOVERY",
		BlockCommitted: "COMMITTED", BlockComplete: "COMPLETE", BlockStateUnspecified: "BlockState(0)",
		ReplicaFinalized: "FINALIZED", ReplicaRBW: "RBW", ReplicaRWR: "RWR", ReplicaRUR: "RUR",
		ReplicaTemporary: "TEMPORARY", ReplicaState(9): "ReplicaState(9)",
	}
	for s, want := range names {
		if got := s.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	// §R4.1: only FINALIZED, RBW and RWR are recovery sources.
	for s := ReplicaFinalized; s <= ReplicaTemporary; s++ {
		if got, want := s.Recoverable(), s <= ReplicaRWR; got != want {
			t.Errorf("%v.Recoverable() = %v", s, got)
		}
	}
}
