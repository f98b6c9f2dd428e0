// Package restart implements `hinic deploy restart`.
package restart

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one restart.
type Options struct {
	IO        *cmdutil.IOStreams
	Printer   func() (*cmdutil.Printer, error)
	Context   context.Context
	RunDir    string
	Component string // "fabric" or "device"
	Hinic     string
	Kill      bool
	Host      string // a rack across hosts: the host whose part restarts
}

// NewCmdRestart returns the `deploy restart` command; runF replaces the
// run in tests.
func NewCmdRestart(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "restart fabric|device|hilink",
		Short: "Restart the fabric, the device backend or the HiLink switches of a deployed rack under running guests",
		Long: `fabric: stop the rack's hinic fabric serve (SIGTERM, or SIGKILL with --kill,
as a crash would) and start it again on the same configuration. The
guests and the device backend keep running: the backend redials its
switch ports and its guests see their port go down and come back
(PORT_ERR, then PORT_ACTIVE); the new switch dials every rxe guest's
QEMU stream server. RC connections resume through retransmission when
the outage fits their retry budget (docs/deploy.md, "Restarting the
fabric").

device: stop the rack's hinic device serve the same way and start it
again on the same configuration and guest RAM files, then give every
running hicain guest a new HiNIC function without rebooting it: the
guest's driver lets the old one go (over SSH), a new one on the new
backend is plugged in beside it through the guest's QEMU monitor (QMP
chardev-add, device_add), and its data NIC is set up again. The guests' verbs processes lose
their device as after a hardware reset: their QPs fail and they must
open the device again (docs/deploy.md, "Restarting the device
backend").

hilink: stop the rack's HiLink switches (hinic link serve) the same way
and start them again on the same configuration. The guests and the GPU
backend keep running: the backend's GPU ports dial their switch again,
and the command waits until every one is up. Peer copies that run
meanwhile fail with EHOSTUNREACH (docs/deploy.md, "Restarting a HiLink
switch").

On a rack across hosts, --host NAME restarts that host's part: on this
machine for a host here (a netns host, or the one with neither netns
nor ssh), and for a host with ssh by that machine's own hinic (hinic
deploy restart COMPONENT --run-dir PART over SSH), its output shown
here; --hinic then names a binary on that machine.

-o json prints the rack's state after the restart (what deploy rack -o
json prints).`,
		Example: "  hinic deploy restart fabric\n  hinic deploy restart --run-dir /tmp/hinic-rack-lab1 --kill fabric\n" +
			"  hinic deploy restart --run-dir /tmp/hinic-rack-lab1 device\n  hinic deploy restart --kill hilink\n" +
			"  hinic deploy restart --rack twohost --host b device",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !slices.Contains(deploy.RestartComponents, args[0]) {
				return cmdutil.UsageErrorf("restart what? fabric, device or hilink")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Component = args[0]
			opts.Context = cmd.Context()
			opts.RunDir = rackDir()
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	rackDir = cmdutil.RackFlags(fl, &opts.RunDir, deploy.DefaultRunDir)
	fl.StringVar(&opts.Hinic, "hinic", "", "hinic binary that runs the new fabric or backend (default: this one)")
	fl.BoolVar(&opts.Kill, "kill", false, "stop the process with SIGKILL, as a crash would")
	fl.StringVar(&opts.Host, "host", "", "on a rack across hosts, the host whose part restarts (over SSH for an ssh host)")
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	o := deploy.RestartOptions{Hinic: opts.Hinic, Kill: opts.Kill,
		Progress: func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	var st *deploy.State
	if opts.Host != "" {
		st, err = deploy.RestartPart(ctx, opts.RunDir, opts.Host, opts.Component, o)
	} else {
		st, err = deploy.Restart(ctx, opts.RunDir, opts.Component, o)
	}
	if err == nil && st != nil && printer.Format() == cmdutil.FormatJSON {
		return printer.Object(st)
	}
	return err
}
