// Package pkg is the `hinic pkg` command group.
package pkg

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/pkg/build"
)

// NewCmdPkg returns the `pkg` command with its verbs.
func NewCmdPkg(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pkg",
		Short: "Build HiNIC's Debian packages",
	}
	cmd.AddCommand(build.NewCmdBuild(f, nil))
	return cmd
}
