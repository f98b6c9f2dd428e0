// Package link is the `hinic link` command group: run the HiLink switch,
// the GPU peer fabric of a rack, and look at it.
package link

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/link/serve"
	"github.com/PacketFive/hinic/internal/cli/link/shared"
	"github.com/PacketFive/hinic/internal/cli/link/status"
)

// NewCmdLink returns the `link` command with its verbs.
func NewCmdLink(f *cmdutil.Factory) *cobra.Command {
	return cmdutil.NewGroup(f, "link", "Run and inspect the HiLink switch, the GPU peer fabric of a rack",
		"run-dir", shared.KeyRunDir, "directory of the port and control sockets (default $XDG_RUNTIME_DIR/hinic, /run/hinic as root)",
		serve.NewCmdServe(f, nil), status.NewCmdStatus(f, nil))
}
