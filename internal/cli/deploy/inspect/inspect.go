// Package inspect implements `hinic deploy inspect`: one row per guest
// of a rack, from its run directory or from a spec.
package inspect

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one inspect.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	// Spec, if set, is a rack spec to list instead of a deployed rack.
	Spec   string
	RunDir string
}

// Inspection is the JSON document of -o json.
type Inspection struct {
	Rack   string            `json:"rack"`
	RunDir string            `json:"run_dir,omitempty"`
	Guests []deploy.GuestRow `json:"guests"`
}

// NewCmdInspect returns the `deploy inspect` command; runF replaces the
// run in tests.
func NewCmdInspect(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "inspect [SPEC]",
		Short: "List a rack's guests: state, NIC, addresses, switch port, SSH, pid, image",
		Long: `List the guests of a rack, one row each: NAME, STATE, NIC, LINK, IP, MAC,
SWITCH:PORT, SSH (the management port on 127.0.0.1), PID and IMAGE.

Without SPEC it reads a deployed rack's run directory (--rack, --run-dir):
a guest is running while its QEMU is, stopped after hinic deploy down,
crashed when its QEMU is gone without one, not started when the rack
never launched it. Unlike hinic deploy status it asks the guests
nothing over SSH, so it answers at once. With SPEC it lists what the
spec would deploy, defaults applied, each guest not deployed.

-o json prints one document (the rack and its guests), -o csv the rows
as CSV.`,
		Example: `  hinic deploy inspect
  hinic deploy inspect --rack hicain -o json | jq -r '.guests[] | "\(.name) \(.ssh_port)"'
  hinic deploy inspect testdata/racks/two-ib.yaml -o csv`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if cmd.Flags().Changed("rack") || cmd.Flags().Changed("run-dir") {
					return cmdutil.UsageErrorf("give a SPEC or --rack/--run-dir, not both")
				}
				opts.Spec = args[0]
			} else {
				opts.RunDir = rackDir()
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	rackDir = cmdutil.RackFlags(cmd.Flags(), &opts.RunDir, deploy.DefaultRunDir)
	return cmd
}

// Run lists the guests.
func Run(opts *Options) error {
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	var in Inspection
	if opts.Spec != "" {
		r, err := deploy.ReadRack(opts.Spec)
		if err != nil {
			return cmdutil.UsageErrorf("%v", err)
		}
		if in.Guests, err = deploy.InspectSpec(r); err != nil {
			return cmdutil.UsageErrorf("%v", err)
		}
		in.Rack = r.Name
	} else {
		if in.Guests, err = deploy.Inspect(opts.RunDir); err != nil {
			return err
		}
		in.RunDir = opts.RunDir
		if len(in.Guests) > 0 {
			in.Rack = in.Guests[0].Rack
		}
	}
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(in)
	}
	w := printer.Records("NAME", "STATE", "NIC", "LINK", "IP", "MAC", "SWITCH:PORT", "SSH", "PID", "IMAGE")
	for _, g := range in.Guests {
		pid := ""
		if g.PID > 0 {
			pid = strconv.Itoa(g.PID)
		}
		if err := w.Write(g, g.Name, g.State, g.NIC, g.Link, g.IP, g.MAC, fmt.Sprintf("%s:%d", g.Switch, g.Port),
			strconv.Itoa(g.SSHPort), pid, g.Image); err != nil {
			return err
		}
	}
	return w.Close()
}
