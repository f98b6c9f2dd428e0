// Package down implements `hinic deploy down`.
package down

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one down.
type Options struct {
	IO     *cmdutil.IOStreams
	RunDir string
}

// NewCmdDown returns the `deploy down` command; runF replaces the run in tests.
func NewCmdDown(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop every guest, the device backend and the fabric of a deployed rack",
		Long: `Stop every process a deploy started: each guest's QEMU (SIGTERM, then
SIGKILL after 10 s), the device backend of hicain guests, and the fabric.
The hicain guests' RAM files (GUEST/ram) are removed; the rest of the run
directory (logs, overlays, captures, state) is kept, and a later deploy
rack reuses the overlays.`,
		Example: "  hinic deploy down\n  hinic deploy down --rack lab1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.RunDir = rackDir()
			if runF != nil {
				return runF(opts)
			}
			return deploy.Down(opts.RunDir, func(format string, a ...any) {
				fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...)
			})
		},
	}
	rackDir = cmdutil.RackFlags(cmd.Flags(), &opts.RunDir, deploy.DefaultRunDir)
	return cmd
}
