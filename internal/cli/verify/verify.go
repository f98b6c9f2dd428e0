// Package verify is the `hinic verify` command group.
package verify

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/verify/compare"
	"github.com/PacketFive/hinic/internal/cli/verify/e2e"
)

// NewCmdVerify returns the `verify` command with its verbs.
func NewCmdVerify(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a rack end to end with RDMA traffic",
	}
	cmd.AddCommand(e2e.NewCmdE2E(f, nil))
	cmd.AddCommand(compare.NewCmdCompare(f, nil))
	return cmd
}
