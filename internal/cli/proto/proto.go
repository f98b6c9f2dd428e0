// Package proto is the `hinic proto` command group: tools for the wire
// formats of internal/proto.
package proto

import (
	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/proto/decode"
)

// NewCmdProto returns the `proto` command with its verbs.
func NewCmdProto(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proto",
		Short: "Work with RoCEv2 and InfiniBand wire formats",
	}
	cmd.AddCommand(decode.NewCmdDecode(f, nil))
	return cmd
}
