// Package cliargs holds the positional-argument checks the coord and node
// commands share.
package cliargs

import (
	"fmt"

	"github.com/spf13/cobra"
)

// None refuses positional arguments. cobra.NoArgs reports a stray argument
// as an "unknown command", which misleads on a command that has no
// subcommands (coord journal append "some text" is a forgotten --payload,
// not a misspelt command); None names the argument and the command instead.
// A command with subcommands keeps cobra's wording.
func None(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return fmt.Errorf("unexpected argument %q: %s takes no positional arguments (flags start with --)", args[0], cmd.CommandPath())
}
