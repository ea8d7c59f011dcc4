package authz

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// A bearer token is "lbt_" + accessor + "_" + secret: the accessor, 16
// hex digits, names the token (it is listed and revoked by it and may be
// logged); the secret, 32 random bytes in unpadded base64url, proves it
// and is never stored: the cluster keeps only its SHA-256 (TokenHash).
// The whole token is 64 bytes.
const (
	tokenPrefix    = "lbt_"
	accessorDigits = 16
	secretBytes    = 32
	// TokenLen is the length of every token; MaxTokenLen bounds what a
	// parser looks at.
	TokenLen    = len(tokenPrefix) + accessorDigits + 1 + 43
	MaxTokenLen = 256
)

// Token is a parsed bearer token.
type Token struct {
	Accessor string
	secret   []byte
}

// Hash is the digest of the token's secret the cluster stores.
func (t Token) Hash() [sha256.Size]byte { return sha256.Sum256(t.secret) }

// String is the token as a caller presents it.
func (t Token) String() string {
	return tokenPrefix + t.Accessor + "_" + base64.RawURLEncoding.EncodeToString(t.secret)
}

// NewToken makes a fresh random token.
func NewToken() (Token, error) {
	var a [accessorDigits / 2]byte
	s := make([]byte, secretBytes)
	if _, err := rand.Read(a[:]); err != nil {
		return Token{}, err
	}
	if _, err := rand.Read(s); err != nil {
		return Token{}, err
	}
	return Token{Accessor: hex.EncodeToString(a[:]), secret: s}, nil
}

// ParseToken parses a bearer token (an "Authorization: Bearer" value
// without the scheme). It never looks past MaxTokenLen bytes, and its
// errors never include the secret.
func ParseToken(s string) (Token, error) {
	if len(s) > MaxTokenLen {
		return Token{}, invalidf("token of %d bytes: at most %d", len(s), MaxTokenLen)
	}
	if len(s) != TokenLen || !strings.HasPrefix(s, tokenPrefix) {
		return Token{}, invalidf("not a Logbook token (want %s<16 hex digits>_<secret>, %d bytes)", tokenPrefix, TokenLen)
	}
	acc, sec := s[len(tokenPrefix):len(tokenPrefix)+accessorDigits], s[len(tokenPrefix)+accessorDigits:]
	if sec[0] != '_' {
		return Token{}, invalidf("token: no separator after the accessor")
	}
	if _, err := hex.DecodeString(acc); err != nil || strings.ToLower(acc) != acc {
		return Token{}, invalidf("token: accessor %q is not 16 lowercase hex digits", acc)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sec[1:])
	if err != nil || len(raw) != secretBytes {
		return Token{}, invalidf("token %s: the secret is not %d bytes of base64url", acc, secretBytes)
	}
	return Token{Accessor: acc, secret: raw}, nil
}

// ParseBearer parses an Authorization header value: "Bearer " and a token.
func ParseBearer(h string) (Token, error) {
	if len(h) > MaxTokenLen+len("Bearer ") {
		return Token{}, invalidf("authorization of %d bytes: too long", len(h))
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Token{}, invalidf("authorization: want \"Bearer <token>\"")
	}
	return ParseToken(strings.TrimSpace(tok))
}

// ValidAccessor reports whether s is a token accessor.
func ValidAccessor(s string) error {
	if len(s) != accessorDigits {
		return fmt.Errorf("%w: accessor of %d characters, want %d", ErrInvalid, len(s), accessorDigits)
	}
	if _, err := hex.DecodeString(s); err != nil || strings.ToLower(s) != s {
		return fmt.Errorf("%w: accessor %q is not lowercase hex", ErrInvalid, s)
	}
	return nil
}
