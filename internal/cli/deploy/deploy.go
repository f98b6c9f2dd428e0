// Package deploy is the `hinic deploy` command group: QEMU racks from a
// rack spec.
package deploy

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/cpu"
	"github.com/PacketFive/hinic/internal/cli/deploy/down"
	"github.com/PacketFive/hinic/internal/cli/deploy/exec"
	"github.com/PacketFive/hinic/internal/cli/deploy/graph"
	"github.com/PacketFive/hinic/internal/cli/deploy/inspect"
	"github.com/PacketFive/hinic/internal/cli/deploy/rack"
	"github.com/PacketFive/hinic/internal/cli/deploy/restart"
	"github.com/PacketFive/hinic/internal/cli/deploy/schema"
	"github.com/PacketFive/hinic/internal/cli/deploy/status"
)

// NewCmdDeploy returns the `deploy` command with its verbs.
func NewCmdDeploy(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Deploy QEMU racks (fabric, guests, RDMA NICs) and tear them down",
	}
	cmd.AddCommand(rack.NewCmdRack(f, nil), status.NewCmdStatus(f, nil), down.NewCmdDown(f, nil),
		exec.NewCmdExec(f, nil), restart.NewCmdRestart(f, nil), schema.NewCmdSchema(f, nil), inspect.NewCmdInspect(f, nil),
		graph.NewCmdGraph(f, nil), cpu.NewCmdCPU(f, nil))
	return cmd
}
