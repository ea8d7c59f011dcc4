package authz

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched (errors.Is) by every validation error of this
// package: a bad role, grant, prefix, name or binding.
var ErrInvalid = errors.New("authz: invalid")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
