// Package bench is the `hinic bench` command group: benchmarks that
// always measure their raw ceiling in the same run.
package bench

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/bench/fabric"
	"github.com/PacketFive/hinic/internal/cli/bench/rdma"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

// NewCmdBench returns the `bench` command with its verbs.
func NewCmdBench(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure HiNIC against the raw ceiling of the same machine",
	}
	cmd.AddCommand(fabric.NewCmdFabric(f, nil), rdma.NewCmdRDMA(f, nil))
	return cmd
}
