// Package rdma implements `hinic bench rdma`: perftest-style figures of
// the embedded rack with the raw ceiling measured in the same run.
package rdma

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/faultsuite"
	"github.com/PacketFive/hinic/internal/perf"
)

// Options are the settings of one bench run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context
	Config  perf.BenchConfig
	// Faults runs the fault-injection suite instead of the figures.
	Faults      bool
	FaultConfig faultsuite.Config
	// CPUProfile, when set, is the file the run's CPU profile goes to
	// (runtime/pprof format, for `go tool pprof`).
	CPUProfile string
}

const long = `Measure the embedded rack (HiSwitch and two RDMA engines in this
process, joined by SOCK_SEQPACKET sockets, or by shared-memory rings with
--port shm) as perftest would: ib_send_bw, ib_write_bw and ib_read_bw over
a range of message sizes, ib_send_lat, ib_write_lat and ib_read_lat, and
ib_atomic_bw (operations per second) and ib_atomic_lat, every byte
checked.

In the same run it measures the raw ceiling: the same number of bytes moved
from host to host as 4 KiB frames through the same two hops (host, switch,
host; sockets or rings, as --port says) with no RDMA protocol work at all. Each bandwidth is also
given as a ratio of that ceiling (VS-RAW), the figure to compare across
machines.

The copy ceiling is what the machine itself allows over rings: the same
bytes as 4 KiB frames that three polling goroutines copy from memory into
a ring slot, from ring to ring and from the slot into memory, with a
CRC-32 made and checked, and nothing else: the fewest copies a sending
NIC, a switch and a receiving NIC can make. Its VS-RAW says how far above
the raw ceiling any NIC could get on this machine.

Bandwidth is MiB/s (2^20 bytes per second, perftest's MB/sec) and Gbit/s.
Latency is the typical (median) and 99th percentile, in µs: half the round
trip for SEND and WRITE, the whole round trip for READ, as perftest
reports them.

With --faults it runs the fault-injection suite instead: --hosts engines
(2 or 4, every pair connected by two RC QPs) exchange --ops random SEND,
WRITE, WRITE with immediate, READ, FETCH_AND_ADD and CMP_AND_SWP operations
through a HiSwitch that drops, duplicates, reorders and corrupts frames at
the given rates (seeded by --seed), at path MTU 1024 unless --mtu is given.
Every operation must complete exactly once, in order, with the right data;
every atomic counter must end at the exact sum of its adds. The report
gives what the faults cost: retransmissions, NAKs, replays and the
corrupted frames the engines dropped. A failed check exits with status 3
and names the operation.`

// NewCmdRDMA returns the `bench rdma` command; runF replaces the run in
// tests.
func NewCmdRDMA(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	var bytesMiB int
	cmd := &cobra.Command{
		Use:   "rdma",
		Short: "perftest-style bandwidth and latency of the embedded rack, against the raw ceiling",
		Long:  long,
		Example: "  hinic bench rdma\n  hinic bench rdma --sizes 4096,65536 --mib 16 -o json\n" +
			"  hinic bench rdma --faults\n  hinic bench rdma --faults --hosts 4 --ops 20000 --seed 7 --drop 0.05",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			if opts.Faults {
				if err := faultFlags(cmd, opts); err != nil {
					return err
				}
				if runF != nil {
					return runF(opts)
				}
				return runFaults(opts)
			}
			switch opts.Config.Port {
			case "socket", "shm":
			default:
				return cmdutil.UsageErrorf("invalid --port %q: valid values are socket, shm", opts.Config.Port)
			}
			switch opts.Config.MTU {
			case 256, 512, 1024, 2048, 4096:
			default:
				return cmdutil.UsageErrorf("invalid --mtu %d: valid values are 256, 512, 1024, 2048, 4096", opts.Config.MTU)
			}
			for _, s := range opts.Config.Sizes {
				if s < 1 || s > 1<<20 {
					return cmdutil.UsageErrorf("invalid size %d in --sizes: 1 B to 1 MiB", s)
				}
			}
			if bytesMiB < 1 || opts.Config.LatIters < 1 {
				return cmdutil.UsageErrorf("--mib and --lat-iters must be at least 1")
			}
			if opts.Config.MaxIters < 100 || opts.Config.MaxIters > 1000000 {
				return cmdutil.UsageErrorf("invalid --max-iters %d: 100 to 1000000", opts.Config.MaxIters)
			}
			opts.Config.Bytes = bytesMiB << 20
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Config.MTU, "mtu", 4096, "path MTU of the emulated NICs")
	fl.StringVar(&opts.Config.Port, "port", "socket", "how hosts reach the switch: socket (SOCK_SEQPACKET) or shm (shared-memory rings); the raw ceiling uses the same")
	fl.IntSliceVar(&opts.Config.Sizes, "sizes", []int{64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20}, "bandwidth message sizes, bytes")
	fl.IntVar(&bytesMiB, "mib", 64, "MiB moved by each bandwidth test (iterations are clamped to 100..--max-iters)")
	fl.IntVar(&opts.Config.MaxIters, "max-iters", perf.DefaultMaxIters, "most iterations of a bandwidth test (perftest's default); raise it with --mib for a steady small-message rate")
	fl.IntSliceVar(&opts.Config.LatSizes, "lat-sizes", []int{2, 4096}, "latency message sizes, bytes")
	fl.IntVar(&opts.Config.LatIters, "lat-iters", 1000, "round trips of each latency test")
	fl.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE` (go tool pprof FILE)")
	fc := &opts.FaultConfig
	fl.BoolVar(&opts.Faults, "faults", false, "run the fault-injection suite instead (docs/verify.md)")
	fl.IntVar(&fc.Ops, "ops", faultsuite.DefaultOps, "--faults: operations in all")
	fl.IntVar(&fc.Hosts, "hosts", faultsuite.DefaultHosts, "--faults: engines, 2 or 4")
	fl.Uint64Var(&fc.Seed, "seed", 1, "--faults: seed of the operation mix and the fault injection")
	spec := faultsuite.SpecFaults()
	fl.Float64Var(&fc.Faults.Drop, "drop", spec.Drop, "--faults: probability that a frame is dropped")
	fl.Float64Var(&fc.Faults.Duplicate, "dup", spec.Duplicate, "--faults: probability that a frame is duplicated")
	fl.Float64Var(&fc.Faults.Reorder, "reorder", spec.Reorder, "--faults: probability that a frame is held back behind the next")
	fl.Float64Var(&fc.Faults.Corrupt, "corrupt", spec.Corrupt, "--faults: probability that a frame has one bit flipped")
	fl.Uint8Var(&fc.Timeout, "timeout", faultsuite.DefaultTimeout, "--faults: local ACK timeout code (4.096 µs × 2^code)")
	fl.BoolVar(&fc.RNR, "rnr", false, "--faults: let senders run ahead of posted receives, so RNR NAKs happen")
	fl.IntVar(&fc.Restarts, "restarts", 0, "--faults: restart the fabric this many times during the run (0 to 100)")
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	opts.Config.Progress = func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }
	stop, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return err
	}
	rep, err := perf.Bench(ctx, opts.Config)
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(rep)
	}
	w := printer.Records("TEST", "SIZE", "ITERS", "MIB/S", "GBIT/S", "VS-RAW", "OPS/S", "TYPICAL-US", "AVG-US", "P99-US")
	dash := func(v float64, prec int) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	for _, r := range rep.Rows {
		if err := w.Write(r, r.Test, strconv.Itoa(r.Size), strconv.Itoa(r.Iters), dash(r.MiBps, 1), dash(r.Gbps, 2),
			dash(r.VsRaw, 2), dash(r.OpsPerS, 0), dash(r.Typical, 2), dash(r.Avg, 2), dash(r.P99, 2)); err != nil {
			return err
		}
	}
	cp := rep.Copy
	if err := w.Write(cp, "copy ceiling", strconv.Itoa(cp.FrameSize), strconv.Itoa(cp.Frames), dash(cp.MiBps, 1),
		dash(cp.Gbps, 2), dash(cp.MiBps/rep.Raw.MiBps, 2), "-", "-", "-", "-"); err != nil {
		return err
	}
	raw := rep.Raw
	if err := w.Write(raw, "raw ceiling", strconv.Itoa(raw.FrameSize), strconv.Itoa(raw.Frames), dash(raw.MiBps, 1),
		dash(raw.Gbps, 2), "1.00", "-", "-", "-", "-"); err != nil {
		return err
	}
	rl := rep.RawLat
	if err := w.Write(rl, "raw pingpong", strconv.Itoa(rl.Size), strconv.Itoa(rl.Iters), "-", "-", "-", "-",
		dash(rl.Typical, 2), dash(rl.Avg, 2), dash(rl.P99, 2)); err != nil {
		return err
	}
	return w.Close()
}

// startCPUProfile starts a CPU profile into path (nothing when path is
// empty) and returns the function that stops it and closes the file.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
