package authz

import (
	"errors"
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	if len(s) != TokenLen {
		t.Fatalf("token %q: %d bytes, want %d", s, len(s), TokenLen)
	}
	back, err := ParseToken(s)
	if err != nil || back.Accessor != tok.Accessor || back.Hash() != tok.Hash() {
		t.Fatalf("parse %q: %+v, %v", s, back, err)
	}
	if b, err := ParseBearer("Bearer " + s); err != nil || b.Hash() != tok.Hash() {
		t.Fatalf("bearer: %v", err)
	}
	if err := ValidAccessor(tok.Accessor); err != nil {
		t.Fatal(err)
	}
	other, _ := NewToken()
	if other.Hash() == tok.Hash() || other.Accessor == tok.Accessor {
		t.Fatal("two tokens alike")
	}
}

func TestParseTokenRefuses(t *testing.T) {
	tok, _ := NewToken()
	s := tok.String()
	for name, bad := range map[string]string{
		"empty":            "",
		"other prefix":     "xyz_" + s[4:],
		"short":            s[:len(s)-1],
		"long":             s + "A",
		"huge":             strings.Repeat("a", 1<<20),
		"upper accessor":   "lbt_" + strings.ToUpper(s[4:20]) + s[20:],
		"non-hex accessor": "lbt_zzzzzzzzzzzzzzzz" + s[20:],
		"no separator":     s[:20] + "-" + s[21:],
		"bad base64":       s[:len(s)-1] + "!",
		"padding":          s[:len(s)-1] + "=",
	} {
		if name == "upper accessor" && strings.ToUpper(s[4:20]) == s[4:20] {
			continue // all digits
		}
		_, err := ParseToken(bad)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && len(bad) > 21 && strings.Contains(err.Error(), bad[21:]) {
			t.Errorf("%s: the error shows the secret: %v", name, err)
		}
	}
	for _, h := range []string{"", s, "Basic " + s, "Bearer", "Bearer " + strings.Repeat("a", 1000)} {
		if _, err := ParseBearer(h); err == nil {
			t.Errorf("ParseBearer(%.20q) accepted", h)
		}
	}
}

func FuzzParseBearer(f *testing.F) {
	tok, _ := NewToken()
	f.Add("Bearer " + tok.String())
	f.Add("bearer lbt_0123456789abcdef_")
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := ParseBearer(h)
		if err != nil {
			return
		}
		back, err := ParseToken(tok.String())
		if err != nil || back.Hash() != tok.Hash() || back.Accessor != tok.Accessor {
			t.Fatalf("a parsed token does not round-trip: %v", err)
		}
	})
}
