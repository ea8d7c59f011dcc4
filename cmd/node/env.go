package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// The environment twin of every flag, as cmd/coord does it (cmd/coord/env.go;
// the two copies are small enough not to share a package yet).

const (
	envPrefix = "LOGBOOK_"
	// envAnnotation marks a flag that has an environment equivalent.
	envAnnotation = "logbook-env"
)

// envName is the environment variable of a flag: --grpc-addr is
// LOGBOOK_GRPC_ADDR.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv gives every flag of fs but help a LOGBOOK_* environment
// equivalent and names it in the flag's help.
func bindEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		name := envName(f.Name)
		if err := fs.SetAnnotation(f.Name, envAnnotation, []string{name}); err != nil {
			panic(err) // the flag exists: VisitAll handed it to us
		}
		f.Usage += " [$" + name + "]"
	})
}

// applyEnv sets every env-bound flag of fs that was not given on the
// command line from its environment variable, when that is set and not
// empty. A flag on the command line beats the environment, which beats the
// default. Every bad value is reported.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
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
