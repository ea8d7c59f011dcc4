// Package envflag gives command-line flags LOGBOOK_* environment twins:
// --grpc-addr is LOGBOOK_GRPC_ADDR. A flag on the command line beats the
// environment, which beats the flag's default. Both binaries (coord and
// node) use it, so their flags and variables follow one rule.
package envflag

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

const (
	Prefix = "LOGBOOK_"
	// envAnnotation marks a flag that has an environment equivalent.
	envAnnotation = "logbook-env"
)

// Name is the environment variable of a flag: --raft-addr is
// LOGBOOK_RAFT_ADDR.
func Name(flag string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bind gives the named flags of fs (every flag but help when none are
// named) a LOGBOOK_* environment equivalent and names it in their help.
func Bind(fs *pflag.FlagSet, names ...string) {
	bind := func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		name := Name(f.Name)
		if err := fs.SetAnnotation(f.Name, envAnnotation, []string{name}); err != nil {
			panic(err) // the flag exists: we were handed it
		}
		f.Usage += " [$" + name + "]"
	}
	if len(names) == 0 {
		fs.VisitAll(bind)
		return
	}
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			panic("envflag.Bind: no flag --" + n)
		}
		bind(f)
	}
}

// Apply sets every env-bound flag of fs that was not given on the
// command line from its environment variable, when that is set and not
// empty. A flag on the command line beats the environment, which beats the
// flag's default. Every bad value is reported.
func Apply(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		names := f.Annotations[envAnnotation]
		if f.Changed || len(names) == 0 {
			return
		}
		v, ok := lookup(names[0])
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q (for --%s): %v", names[0], v, f.Name, err))
		}
	})
	return errors.Join(errs...)
}
