package bench

import "fmt"

// A ConfigError is a Config that Validate refuses. Its message names each
// field by the coord bench flag that sets it (--clients for Clients), as
// coord bench prints it.
type ConfigError struct {
	msg string
}

func (e *ConfigError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}
