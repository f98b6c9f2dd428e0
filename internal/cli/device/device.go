// Package device is the `hinic device` command group: run the emulated
// NIC backend for QEMU guests and look at it.
package device

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/device/serve"
	"github.com/PacketFive/hinic/internal/cli/device/shared"
	"github.com/PacketFive/hinic/internal/cli/device/status"
)

// NewCmdDevice returns the `device` command with its verbs.
func NewCmdDevice(f *cmdutil.Factory) *cobra.Command {
	return cmdutil.NewGroup(f, "device", "Run and inspect the emulated RDMA NIC backend for QEMU guests",
		"control", shared.KeyControl, "control socket of the backend (default <run dir>/device.sock, the run dir as for hinic fabric)",
		serve.NewCmdServe(f, nil), status.NewCmdStatus(f, nil))
}
