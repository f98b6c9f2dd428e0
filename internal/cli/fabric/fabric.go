// Package fabric is the `hinic fabric` command group: run HiSwitch and
// look at it.
package fabric

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/fabric/serve"
	"github.com/PacketFive/hinic/internal/cli/fabric/shared"
	"github.com/PacketFive/hinic/internal/cli/fabric/status"
)

// NewCmdFabric returns the `fabric` command with its verbs.
func NewCmdFabric(f *cmdutil.Factory) *cobra.Command {
	return cmdutil.NewGroup(f, "fabric", "Run and inspect HiSwitch, the emulated RDMA fabric",
		"run-dir", shared.KeyRunDir, "directory of the port and control sockets (default $XDG_RUNTIME_DIR/hinic, /run/hinic as root)",
		serve.NewCmdServe(f, nil), status.NewCmdStatus(f, nil))
}
