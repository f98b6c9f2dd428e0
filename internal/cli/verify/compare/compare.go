// Package compare implements `hinic verify compare`: two gate reports
// side by side with the ratio of every figure.
package compare

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/verify"
)

// Options are the settings of one comparison.
type Options struct {
	IO       *cmdutil.IOStreams
	Printer  func() (*cmdutil.Printer, error)
	Base     string
	New      string
	BaseName string
	NewName  string
}

const long = `Print two reports of hinic verify e2e side by side: every case with
the figure of each run and the ratio NEW/BASE, and which run is better by
how much (rates: higher is better; latencies in µs: lower is better).

A report is what hinic verify e2e writes with --json FILE, or its -o json
output. make e2e compares the Soft-RoCE rack (BASE) with the HiNIC rack
(NEW) this way.

Cases that did not pass in both runs, or whose figure is not a rate or a
time (a count of what was checked, such as "MiB checked"), show no ratio.`

// NewCmdCompare returns the `verify compare` command; runF replaces the
// work in tests.
func NewCmdCompare(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare two gate reports case by case",
		Long:  long,
		Example: `  hinic verify e2e --rack rxe --json rxe.json
  hinic verify e2e --rack hicain --json hicain.json
  hinic verify compare rxe.json hicain.json --base-name Soft-RoCE --new-name HiNIC`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Base, opts.New = args[0], args[1]
			if opts.BaseName == "" || opts.NewName == "" {
				return cmdutil.UsageErrorf("--base-name and --new-name must not be empty")
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.BaseName, "base-name", "BASE", "column title of the first report")
	fl.StringVar(&opts.NewName, "new-name", "NEW", "column title of the second report")
	return cmd
}

func read(path string) (*verify.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := verify.ReadReport(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}

func run(opts *Options) error {
	base, err := read(opts.Base)
	if err != nil {
		return err
	}
	cand, err := read(opts.New)
	if err != nil {
		return err
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	rows := verify.Compare(base, cand)
	headers := []string{"CASE", opts.BaseName, opts.NewName, opts.NewName + "/" + opts.BaseName, "BETTER"}
	metered := false
	for _, c := range rows {
		metered = metered || c.BaseCPUPerGiB > 0 || c.NewCPUPerGiB > 0
	}
	if metered {
		// Host CPU per GiB moved, when the runs metered their racks.
		headers = append(headers, "CPU S/GIB "+opts.BaseName+" / "+opts.NewName)
	}
	w := printer.Records(headers...)
	var gains []float64
	for _, c := range rows {
		ratio, better := "-", "-"
		if c.Ratio > 0 {
			ratio = strconv.FormatFloat(c.Ratio, 'f', 2, 64)
			gains = append(gains, c.Gain)
			switch {
			case c.Gain >= 1:
				better = fmt.Sprintf("%s %.2f×", opts.NewName, c.Gain)
			default:
				better = fmt.Sprintf("%s %.2f×", opts.BaseName, 1/c.Gain)
			}
		}
		switch c.Only {
		case verify.OnlyBase:
			better = opts.BaseName + " only"
		case verify.OnlyNew:
			better = opts.NewName + " only"
		}
		cells := []string{c.Case, cell(c.BaseResult, c.Base, c.Unit), cell(c.NewResult, c.New, c.Unit), ratio, better}
		if metered {
			cells = append(cells, cpuCell(c.BaseCPUPerGiB)+" / "+cpuCell(c.NewCPUPerGiB))
		}
		if err := w.Write(c, cells...); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if len(gains) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "compare: %d cases with figures in both runs; %s better in %d, geometric mean gain %.2f×\n",
			len(gains), opts.NewName, countAtLeastOne(gains), geomean(gains))
	}
	return nil
}

// cell is a run's figure, or its result when it has no figure or did not
// pass, or "absent".
func cell(r verify.Result, v float64, unit string) string {
	switch {
	case r == "":
		return "absent"
	case r != verify.Pass:
		return string(r)
	}
	if f := verify.FormatFigure(v, unit); f != "" {
		return f
	}
	return string(r)
}

// cpuCell is a CPU-seconds-per-GiB figure, or "-" when not metered.
func cpuCell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func countAtLeastOne(g []float64) int {
	n := 0
	for _, v := range g {
		if v >= 1 {
			n++
		}
	}
	return n
}

func geomean(g []float64) float64 {
	s := 0.0
	for _, v := range g {
		s += math.Log(v)
	}
	return math.Exp(s / float64(len(g)))
}
