// Package fabric implements `hinic bench fabric`: forwarding through a
// two-port HiSwitch against a raw socket relay, measured in one run.
package fabric

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	hfabric "github.com/PacketFive/hinic/internal/fabric"
)

// Setting keys.
const (
	KeySizes    = "bench.fabric.sizes"
	KeyDuration = "bench.fabric.duration"
	KeyBatch    = "bench.fabric.batch"
)

// Options are the settings of one `hinic bench fabric` run.
type Options struct {
	IO       *cmdutil.IOStreams
	Printer  func() (*cmdutil.Printer, error)
	Sizes    []int
	Duration time.Duration
	Batch    int
}

const long = `Measure HiSwitch forwarding between two ports against the ceiling of
this machine: the same traffic through a raw relay, two SOCK_SEQPACKET
socket pairs joined by a loop that only copies.

For each frame size a generator writes frames for --duration and a sink
reads them, first through the relay, then through the switch (NIC
peers on two ports, priority 3: the lossless class). The result is
frames/s and Gbit/s of both and their ratio. The command fails if the
switch lost or dropped a frame.

--batch sets how many frames the switch moves per recvmmsg/sendmmsg
(1: one system call per frame).`

// NewCmdFabric returns the `bench fabric` command. runF replaces the
// work in tests; nil runs it.
func NewCmdFabric(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "fabric",
		Short:   "Measure switch forwarding against a raw socket relay",
		Long:    long,
		Example: "  hinic bench fabric\n  hinic bench fabric --sizes 4200 --duration 5s -o json\n  hinic bench fabric --batch 1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.Config()
			if err != nil {
				return err
			}
			opts.Sizes, err = parseSizes(v.GetString(KeySizes))
			if err != nil {
				return err
			}
			opts.Duration = v.GetDuration(KeyDuration)
			opts.Batch = v.GetInt(KeyBatch)
			if opts.Duration <= 0 || opts.Batch < 1 || opts.Batch > 256 {
				return cmdutil.UsageErrorf("--duration must be positive and --batch 1 to 256")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().String("sizes", "64,1500,4200", "frame sizes in bytes, comma separated")
	cmd.Flags().Duration("duration", 2*time.Second, "traffic time per size and path")
	cmd.Flags().Int("batch", hfabric.DefaultIOBatch, "frames per recvmmsg/sendmmsg in the switch")
	f.BindFlag(KeySizes, cmd.Flags().Lookup("sizes"))
	f.BindFlag(KeyDuration, cmd.Flags().Lookup("duration"))
	f.BindFlag(KeyBatch, cmd.Flags().Lookup("batch"))
	return cmd
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 60 || n > 9000 {
			return nil, cmdutil.UsageErrorf("invalid --sizes %q: give sizes of 60 to 9000 bytes, for example 64,1500,4200", s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// Run runs the benchmark and prints the results.
func Run(ctx context.Context, opts *Options) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	res, err := hfabric.Bench(ctx, hfabric.BenchConfig{
		Sizes: opts.Sizes, Duration: opts.Duration, IOBatch: opts.Batch,
		Progress: func(what string) { fmt.Fprintf(opts.IO.ErrOut, "hinic: measuring %s...\n", what) },
	})
	if err != nil && !errors.Is(err, hfabric.ErrBenchLoss) {
		return err
	}
	w := p.Records("SIZE", "RELAY FRAMES/S", "RELAY GBIT/S", "SWITCH FRAMES/S", "SWITCH GBIT/S", "RATIO", "LOST")
	for _, r := range res {
		if werr := w.Write(r, strconv.Itoa(r.Size), fmt.Sprintf("%.0f", r.Relay.FPS), fmt.Sprintf("%.2f", r.Relay.Gbps),
			fmt.Sprintf("%.0f", r.Switch.FPS), fmt.Sprintf("%.2f", r.Switch.Gbps), fmt.Sprintf("%.2f", r.Ratio),
			strconv.FormatUint(r.Switch.Lost+r.Switch.Drops, 10)); werr != nil {
			return werr
		}
	}
	if cerr := w.Close(); cerr != nil {
		return cerr
	}
	if err != nil {
		return cmdutil.VerifyErrorf("%v", err)
	}
	return nil
}
