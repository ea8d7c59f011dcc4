package authz

import (
	"errors"
	"strings"
	"testing"
)

func TestPathCovers(t *testing.T) {
	tests := []struct {
		prefix, path string
		want         bool
	}{
		{"/", "/", true},
		{"/", "/a", true},
		{"/", "/a/b/c", true},
		{"/a", "/a", true},
		{"/a", "/a/b", true},
		{"/a", "/a/b/c", true},
		{"/a", "/ab", false},
		{"/a", "/ab/c", false},
		{"/a", "/", false},
		{"/a", "/b", false},
		{"/a/b", "/a", false},
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/c/b", false},
		{"/a.b", "/a", false},
		{"/a", "/a.b", false},
		{"/a-", "/a-/x", true},
		{"/日本", "/日本/語", true},
		{"/日本", "/日本語", false},
	}
	for _, tt := range tests {
		if err := validPath(tt.prefix); err != nil {
			t.Fatalf("prefix %q: %v", tt.prefix, err)
		}
		if err := validPath(tt.path); err != nil {
			t.Fatalf("path %q: %v", tt.path, err)
		}
		if got := pathCovers(tt.prefix, tt.path); got != tt.want {
			t.Errorf("%q covers %q: %v, want %v", tt.prefix, tt.path, got, tt.want)
		}
	}
}

func TestEventTypeCovers(t *testing.T) {
	tests := []struct {
		prefix, typ string
		want        bool
	}{
		{"fs.", "fs.create", true},
		{"fs.", "fs.x.y", true},
		{"fs.", "fs.", true},
		{"fs.", "fs", false},
		{"fs.", "fsck.run", false},
		{"fs", "fs", true},
		{"fs", "fs.create", true},
		{"fs", "fsck.run", true}, // as given: write "fs." for the family
		{"fs.create", "fs.create", true},
		{"fs.create", "fs.created", true},
		{"fs.create", "fs.delete", false},
		{"app.orders.", "app.orders.new", true},
		{"app.orders.", "app.order.new", false},
		{"a", "", false},
		{"FS.", "fs.create", false}, // case matters
	}
	for _, tt := range tests {
		if got := eventTypeCovers(tt.prefix, tt.typ); got != tt.want {
			t.Errorf("%q covers %q: %v, want %v", tt.prefix, tt.typ, got, tt.want)
		}
	}
}

func TestValidatePathPrefix(t *testing.T) {
	long := "/" + strings.Repeat("a", MaxComponentBytes)
	for _, ok := range []string{"/", "/a", "/a/b", "/a.b/c-d", "/...", "/a/.b", long, "/" + strings.Repeat("abcdefg/", 511) + "abc"} {
		if err := ValidatePathPrefix(ok); err != nil {
			t.Errorf("%.40q: %v", ok, err)
		}
	}
	bad := []string{
		"", "a", "a/b", "//", "/a/", "/a//b", "/./a", "/a/.", "/a/..", "/../a", "/a\x00b",
		long + "a", "/" + strings.Repeat("abcdefg/", 512) + "a",
	}
	for _, p := range bad {
		err := ValidatePathPrefix(p)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: %v, want ErrInvalid", p, err)
		}
	}
}

func TestValidateEventTypePrefix(t *testing.T) {
	for _, ok := range []string{"a", "fs.", "logbook.", "app.orders.", "日本.", strings.Repeat("x", MaxEventTypePrefixBytes)} {
		if err := ValidateEventTypePrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\nb", "a\x00", "\x7f", "\xff\xfe", strings.Repeat("x", MaxEventTypePrefixBytes+1)} {
		if err := ValidateEventTypePrefix(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: %v, want ErrInvalid", bad, err)
		}
	}
}
