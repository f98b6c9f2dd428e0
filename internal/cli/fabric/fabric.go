// Package fabric is the `hinic fabric` command group: run HiSwitch and
// look at it.
package fabric

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/fabric/serve"
	"github.com/PacketFive/hinic/internal/cli/fabric/status"
)

// NewCmdFabric returns the `fabric` command with its verbs.
func NewCmdFabric(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Run and inspect HiSwitch, the emulated RDMA fabric",
	}
	// Both verbs read the run directory; one persistent flag binds the
	// setting once (a key bound to two flags would follow only the last).
	cmd.PersistentFlags().String("run-dir", "", "directory of the port and control sockets (default $XDG_RUNTIME_DIR/hinic, /run/hinic as root)")
	f.BindFlag(serve.KeyRunDir, cmd.PersistentFlags().Lookup("run-dir"))
	cmd.AddCommand(serve.NewCmdServe(f, nil), status.NewCmdStatus(f, nil))
	return cmd
}
