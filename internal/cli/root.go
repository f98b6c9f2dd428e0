package cli

import (
	"github.com/spf13/cobra"

	benchcmd "github.com/PacketFive/hinic/internal/cli/bench"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	deploycmd "github.com/PacketFive/hinic/internal/cli/deploy"
	devicecmd "github.com/PacketFive/hinic/internal/cli/device"
	fabriccmd "github.com/PacketFive/hinic/internal/cli/fabric"
	gpucmd "github.com/PacketFive/hinic/internal/cli/gpu"
	imagecmd "github.com/PacketFive/hinic/internal/cli/image"
	"github.com/PacketFive/hinic/internal/cli/image/doctor"
	linkcmd "github.com/PacketFive/hinic/internal/cli/link"
	pkgcmd "github.com/PacketFive/hinic/internal/cli/pkg"
	protocmd "github.com/PacketFive/hinic/internal/cli/proto"
	verifycmd "github.com/PacketFive/hinic/internal/cli/verify"
)

const rootLong = `HiNIC is a software-emulated RDMA NIC and fabric for developing and
testing RDMA software on machines without RDMA hardware. This one binary
runs the emulated switch and devices and builds, packages, deploys and
verifies the whole stack.

Settings come from, highest first: flags; HINIC_* environment variables
(HINIC_OUTPUT=json; dots and dashes become underscores, so fabric.ports is
HINIC_FABRIC_PORTS); the config file hinic.yaml (named by --config, else
./hinic.yaml, else $XDG_CONFIG_HOME/hinic/hinic.yaml, by default
~/.config/hinic/hinic.yaml); built-in defaults.

Results go to standard output as a table (plain text when not writing to
a terminal, or when NO_COLOR or --no-color is set) or, with --output json,
as JSON. Errors and progress go to standard error.

Exit codes:
  0    success
  1    error
  2    usage error: unknown command or flag, bad argument or --output value
  3    verification ran and failed
  130  interrupted by SIGINT or SIGTERM`

// NewCmdRoot returns the hinic root command with every command added.
// Settings are bound into f, so f must be fresh.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hinic",
		Short: "Software-emulated RDMA NIC and fabric",
		Long:  rootLong,
		// Run reports errors itself, with the exit code they map to.
		SilenceErrors: true,
		SilenceUsage:  true,
		// `hinic completion` is ours; __complete, which the scripts
		// call, stays.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}

	output := cmdutil.FormatTable
	pf := cmd.PersistentFlags()
	pf.String("config", "", "read settings from `FILE` instead of searching for hinic.yaml")
	pf.VarP(&output, "output", "o", "output format: table, json or csv")
	pf.Bool("no-color", false, "disable colour and styling in table output")
	pf.BoolP("verbose", "v", false, "log more detail to standard error")
	f.BindFlag(cmdutil.KeyConfig, pf.Lookup("config"))
	f.BindFlag(cmdutil.KeyOutput, pf.Lookup("output"))
	f.BindFlag(cmdutil.KeyNoColor, pf.Lookup("no-color"))
	f.BindFlag(cmdutil.KeyVerbose, pf.Lookup("verbose"))

	cmd.AddCommand(
		NewCmdVersion(f, nil),
		NewCmdCompletion(f, nil),
		NewCmdGenMan(f, nil),
		protocmd.NewCmdProto(f),
		verifycmd.NewCmdVerify(f),
		benchcmd.NewCmdBench(f),
		fabriccmd.NewCmdFabric(f),
		devicecmd.NewCmdDevice(f),
		gpucmd.NewCmdGPU(f),
		linkcmd.NewCmdLink(f),
		imagecmd.NewCmdImage(f),
		deploycmd.NewCmdDeploy(f),
		doctor.NewCmdDoctor(f, nil),
		pkgcmd.NewCmdPkg(f),
	)
	return cmd
}
