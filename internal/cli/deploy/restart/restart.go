// Package restart implements `hinic deploy restart`.
package restart

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one restart.
type Options struct {
	IO        *cmdutil.IOStreams
	Context   context.Context
	RunDir    string
	Component string // "fabric", the only one
	Hinic     string
	Kill      bool
}

// errDeviceRestart is the answer to `restart device`: QEMU 7.2's
// ivshmem-doorbell takes its backend's shared memory and eventfds once,
// at realize, and is never told that the backend went away, so a new
// backend cannot take over running guests' devices (docs/device.md,
// "Backend restarts").
var errDeviceRestart = errors.New("deploy: the device backend cannot be restarted under running guests: " +
	"QEMU's ivshmem-doorbell takes the backend's shared memory and doorbells once, when the guest starts, " +
	"and never connects again, so a new backend could not reach the guests' devices " +
	"(docs/device.md, \"Backend restarts\"); restart the rack instead: hinic deploy down, then hinic deploy rack")

// NewCmdRestart returns the `deploy restart` command; runF replaces the
// run in tests.
func NewCmdRestart(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	var name string
	cmd := &cobra.Command{
		Use:   "restart fabric",
		Short: "Restart the fabric of a deployed rack under running guests",
		Long: `Stop the rack's hinic fabric serve (SIGTERM, or SIGKILL with --kill, as a
crash would) and start it again on the same configuration. The guests
and the device backend keep running: the backend redials its switch
ports and its guests see their port go down and come back (PORT_ERR,
then PORT_ACTIVE); the new switch dials every rxe guest's QEMU stream
server. RC connections resume through retransmission when the outage
fits their retry budget (docs/deploy.md, "Restarting the fabric").`,
		Example: "  hinic deploy restart fabric\n  hinic deploy restart --run-dir /tmp/hinic-rack-lab1 --kill fabric",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "device" {
				return errDeviceRestart
			}
			if len(args) != 1 || args[0] != "fabric" {
				return cmdutil.UsageErrorf("restart what? the only component is fabric")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Component = args[0]
			opts.Context = cmd.Context()
			if opts.RunDir == "" {
				opts.RunDir = deploy.DefaultRunDir(name)
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "rack", "rack0", "rack `NAME` (its run directory is /tmp/hinic-rack-NAME)")
	fl.StringVar(&opts.RunDir, "run-dir", "", "run directory of the rack (overrides --rack)")
	fl.StringVar(&opts.Hinic, "hinic", "", "hinic binary that runs the new fabric (default: this one)")
	fl.BoolVar(&opts.Kill, "kill", false, "stop the fabric with SIGKILL, as a crash would")
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	_, err := deploy.RestartFabric(ctx, opts.RunDir, deploy.RestartOptions{Hinic: opts.Hinic, Kill: opts.Kill,
		Progress: func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }})
	return err
}
