package authz

import (
	"strings"
	"unicode/utf8"
)

// Bounds of prefixes and of the paths a call names. The path bounds are
// the namespace's (fsm.MaxPathBytes, fsm.MaxComponentBytes), the
// event-type bound the export format's (export.MaxTypeLen).
const (
	MaxPathBytes            = 4096
	MaxComponentBytes       = 255
	MaxEventTypePrefixBytes = 256
)

// ValidatePathPrefix reports why p cannot be a grant's path prefix, or
// nil: it must be a valid path (validPath): absolute and clean. "/" is
// every path.
func ValidatePathPrefix(p string) error { return validPath(p) }

// validPath reports why p is not an absolute, clean path of at most
// MaxPathBytes with components of at most MaxComponentBytes and no NUL
// byte (the namespace's fsm.ValidPath). Authorize refuses a call naming
// such a path: "/a/../b" must not pass for a path under "/a".
func validPath(p string) error {
	switch {
	case p == "":
		return invalidf("empty path")
	case len(p) > MaxPathBytes:
		return invalidf("path of %d bytes, at most %d", len(p), MaxPathBytes)
	case p[0] != '/':
		return invalidf("path %q is not absolute", p)
	case strings.IndexByte(p, 0) >= 0:
		return invalidf("path %q contains a NUL byte", p)
	case p == "/":
		return nil
	case strings.HasSuffix(p, "/"):
		return invalidf("path %q ends with a slash", p)
	}
	for rest := p[1:]; ; {
		c, after, more := strings.Cut(rest, "/")
		switch {
		case c == "":
			return invalidf("path %q has an empty component", p)
		case c == "." || c == "..":
			return invalidf("path %q has a %q component", p, c)
		case len(c) > MaxComponentBytes:
			return invalidf("path %q has a component of %d bytes, at most %d", p, len(c), MaxComponentBytes)
		}
		if !more {
			return nil
		}
		rest = after
	}
}

// pathCovers reports whether the path prefix covers path, component by
// component: "/" covers every path, "/a" covers "/a" and "/a/b" but not
// "/ab". Both must be valid paths (validPath).
func pathCovers(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	return strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/')
}

// ValidateEventTypePrefix reports why p cannot be a grant's event-type
// prefix, or nil: 1..MaxEventTypePrefixBytes bytes of UTF-8 without
// control characters.
func ValidateEventTypePrefix(p string) error {
	switch {
	case p == "":
		return invalidf("empty event-type prefix")
	case len(p) > MaxEventTypePrefixBytes:
		return invalidf("event-type prefix of %d bytes, at most %d", len(p), MaxEventTypePrefixBytes)
	case !utf8.ValidString(p):
		return invalidf("event-type prefix %q is not UTF-8", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return invalidf("event-type prefix %q has a control character", p)
		}
	}
	return nil
}

// eventTypeCovers reports whether the event-type prefix covers typ: by
// bytes, the prefix as given. Event types are dotted ("fs.create"), and
// a prefix ending in a dot names a family ("fs." covers "fs.create" and
// "fs.x.y", not "fs"); one without it also covers longer names ("fs"
// covers "fsck.run").
func eventTypeCovers(prefix, typ string) bool { return strings.HasPrefix(typ, prefix) }
