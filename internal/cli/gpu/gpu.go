// Package gpu is the `hinic gpu` command group: run the emulated GPU
// backend for QEMU guests and look at it.
package gpu

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/gpu/serve"
	"github.com/PacketFive/hinic/internal/cli/gpu/shared"
	"github.com/PacketFive/hinic/internal/cli/gpu/status"
)

// NewCmdGPU returns the `gpu` command with its verbs.
func NewCmdGPU(f *cmdutil.Factory) *cobra.Command {
	return cmdutil.NewGroup(f, "gpu", "Run and inspect the emulated GPU backend (HiGPU) for QEMU guests",
		"control", shared.KeyControl, "control socket of the backend (default <run dir>/gpu.sock, the run dir as for hinic fabric)",
		serve.NewCmdServe(f, nil), status.NewCmdStatus(f, nil))
}
