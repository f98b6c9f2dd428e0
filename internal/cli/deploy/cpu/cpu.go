// Package cpu implements `hinic deploy cpu`.
package cpu

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one cpu.
type Options struct {
	Printer func() (*cmdutil.Printer, error)
	RunDir  string
}

// row is one process of the rack and its CPU time.
type row struct {
	Process string  `json:"process"`
	Seconds float64 `json:"cpu_seconds"`
}

// NewCmdCPU returns the `deploy cpu` command; runF replaces the run in tests.
func NewCmdCPU(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Printer: f.Printer}
	var rackDir func() string
	cmd := &cobra.Command{
		Use:   "cpu",
		Short: "Show the CPU time each running process of a deployed rack has used",
		Long: `Show the CPU time, user plus system, that each running process of a
deployed rack has used since it started: the fabric, the device backend
("backend", with the fabric inside it under daemons: joined), the GPU
backend, each HiLink switch and each guest's QEMU ("qemu:GUEST"). On a
rack across hosts a daemon is named after its host ("backend@b"), and a
host reached over SSH is asked with its own hinic deploy cpu. A process
that is not running is left out. verify e2e --rack reads the same
figures before and after each case (its CPU column); -o json prints them
as one object, process to seconds.`,
		Example: "  hinic deploy cpu\n  hinic deploy cpu --rack lab1 -o json | jq '.backend'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.RunDir = rackDir()
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	rackDir = cmdutil.RackFlags(cmd.Flags(), &opts.RunDir, deploy.DefaultRunDir)
	return cmd
}

func run(opts *Options) error {
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	st, err := deploy.ReadState(opts.RunDir)
	if err != nil {
		return err
	}
	cpu := st.CPUSeconds()
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(cpu)
	}
	names := slices.Sorted(maps.Keys(cpu))
	w := printer.Records("PROCESS", "CPU SECONDS")
	for _, n := range names {
		if err := w.Write(row{n, cpu[n]}, n, strconv.FormatFloat(cpu[n], 'f', 2, 64)); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("deploy cpu: no process of the rack in %s is running", opts.RunDir)
	}
	return nil
}
