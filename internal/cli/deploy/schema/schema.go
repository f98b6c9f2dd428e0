// Package schema implements `hinic deploy schema`: the JSON Schema of
// the rack spec.
package schema

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one schema.
type Options struct {
	IO *cmdutil.IOStreams
}

// NewCmdSchema returns the `deploy schema` command; runF replaces the
// run in tests.
func NewCmdSchema(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the rack spec",
		Long: `Print the JSON Schema (draft 2020-12) of the rack spec that hinic deploy
rack reads: every key with its description, the values nic, link and
accel take, the forms of durations and link ends, the bounds of numbers,
and no other keys. Editors with a YAML language server use it to
complete and check specs; the checks across keys (an ip within the
network, a port within its switch, one link layer per switch) are
hinic deploy rack's. docs/deploy.md lists the same keys.`,
		Example: `  hinic deploy schema > rack.schema.json
  # in a spec, for editors with the YAML language server:
  # yaml-language-server: $schema=rack.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
}

// Run prints the schema.
func Run(opts *Options) error {
	_, err := opts.IO.Out.Write(deploy.SchemaJSON())
	return err
}
