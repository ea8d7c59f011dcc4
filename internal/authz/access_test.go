package authz

import "testing"

func TestAccessIncludes(t *testing.T) {
	tests := []struct {
		have, want Access
		ok         bool
	}{
		{AccessRead, AccessRead, true},
		{AccessWrite, AccessRead, true},
		{AccessAdmin, AccessRead, true},
		{AccessAdmin, AccessWrite, true},
		{AccessAdmin, AccessAdmin, true},
		{AccessRead, AccessWrite, false},
		{AccessWrite, AccessAdmin, false},
		{AccessRead, AccessAdmin, false},
		// Component classes are not levels: nothing includes them, they
		// include nothing.
		{AccessAdmin, AccessMember, false},
		{AccessMember, AccessRead, false},
		{AccessRecovery, AccessRead, false},
		{AccessPublic, AccessPublic, false},
		{accessUnspecified, accessUnspecified, false},
		{Access(200), AccessRead, false},
	}
	for _, tt := range tests {
		if got := tt.have.Includes(tt.want); got != tt.ok {
			t.Errorf("%s includes %s: %v, want %v", tt.have, tt.want, got, tt.ok)
		}
	}
}

// TestAccessNumbers: the values are the proto enum's
// (api/logbookv1/options.proto), which the edge converts by number.
func TestAccessNumbers(t *testing.T) {
	want := map[Access]uint8{
		accessUnspecified: 0, AccessPublic: 1, AccessRead: 2, AccessWrite: 3, AccessAdmin: 4,
		AccessMember: 5, AccessNode: 6, AccessBlock: 7, AccessRecovery: 8,
	}
	for a, n := range want {
		if uint8(a) != n {
			t.Errorf("%s is %d, the proto's ACCESS_%s is %d", a, uint8(a), a, n)
		}
		if a.Valid() != (n != 0) {
			t.Errorf("%s: Valid() = %v", a, a.Valid())
		}
	}
	if accessEnd.Valid() || Access(255).Valid() {
		t.Error("a value past the last class is valid")
	}
	if s := Access(42).String(); s != "Access(42)" {
		t.Errorf("unknown class prints %q", s)
	}
}
