// Package image is the `hinic image` command group.
package image

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/image/build"
)

// NewCmdImage returns the `image` command with its verbs.
func NewCmdImage(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build Debian 12 guest images for QEMU racks",
	}
	cmd.AddCommand(build.NewCmdBuild(f, nil))
	return cmd
}
