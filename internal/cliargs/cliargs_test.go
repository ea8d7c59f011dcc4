package cliargs

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestNone(t *testing.T) {
	leaf := &cobra.Command{Use: "append", Args: None, RunE: func(*cobra.Command, []string) error { return nil }}
	group := &cobra.Command{Use: "journal", Args: None, RunE: func(*cobra.Command, []string) error { return nil }}
	group.AddCommand(leaf)
	root := &cobra.Command{Use: "coord"}
	root.AddCommand(group)
	root.SilenceErrors, root.SilenceUsage = true, true

	for _, tc := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"journal", "append"}, ""},
		{[]string{"journal", "append", "payload 1"}, `unexpected argument "payload 1": coord journal append takes no positional arguments`},
		{[]string{"journal", "bogus"}, `unknown command "bogus" for "coord journal"`},
	} {
		root.SetArgs(tc.args)
		err := root.Execute()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
