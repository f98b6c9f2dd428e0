// Package e2e implements `hinic verify e2e`: the end-to-end gate.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/verify"
)

// Options are the settings of one gate run.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context

	Embedded bool
	// Link selects the embedded racks: "both" (default), "eth" or "ib".
	Link  string
	MTU   int
	Pcap  string
	JUnit string
	// JSON, if set, receives the whole report (target, start, duration,
	// cases) for hinic verify compare.
	JSON  string
	Cases verify.EmbeddedOptions

	// Rack selects a deployed QEMU rack instead of the embedded one: a
	// rack name, its run directory, or its spec file.
	Rack string
	// Server and Client name the guests of the SSH gate (default: the
	// rack's first two guests).
	Server, Client string
	// Save keeps the tools' raw outputs of the SSH gate in this directory.
	Save string
	// CaseTimeout bounds each tool run of the SSH gate.
	CaseTimeout time.Duration
	// Hinic is the binary that runs `proto decode --check-icrc` on the
	// rack's captures (default: this executable).
	Hinic string
	// Only runs just these cases of the SSH gate.
	Only []string

	changed func(name string) bool
}

const long = `Run the end-to-end gate: the equivalents of ibv_devinfo, ibv_rc_pingpong
(also with 64 KiB messages, as --chk), ibv_uc_pingpong, ibv_ud_pingpong,
ibv_srq_pingpong and of perftest's ib_send_bw,
ib_write_bw, ib_read_bw, ib_send_lat, ib_write_lat, ib_read_lat,
ib_atomic_bw and ib_atomic_lat between two emulated hosts, each case on its
own QPs and each checking every byte it moved, and UD multicast from one
host to a QP on every host.

The target is the embedded rack: a HiSwitch fabric and three RDMA engines
in this process, joined by real SOCK_SEQPACKET sockets, with no VMs. Then
(--link both, the default) the same hosts on native InfiniBand: an IB
switch and three InfiniBand HCAs brought up by the rack's subnet manager
on host1's QP0 (discovery by directed route, LIDs, the switch's LFT, every
port Armed then Active). That run starts with ib:subnet, which checks the
subnet and reads a port's PortCounters through its PMA, and repeats every
case but UD multicast by LID, named ib:<case>.

With --rack, the target is a QEMU rack started by hinic deploy rack, and
the gate runs over SSH with the stock tools between two of its guests (the
first is the server): ibv_devices, ibv_devinfo (port ACTIVE, the RoCEv2
GID of the data IP, which the other cases then use), ibv_rc_pingpong,
ibv_ud_pingpong, ibv_srq_pingpong, ib_send_bw, ib_write_bw, ib_read_bw,
ib_atomic_bw, ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat, UD
multicast (ib_send_bw -c UD -g), data integrity (random bytes written and
read back, sha256 compared), and five cases that connect through the RDMA
CM (librdmacm, CM MADs on QP1) by IP address: rping, ucmatose, udaddy,
cmtime (the CM's own timer of one connection's steps) and ib_send_bw -R. Between two native InfiniBand guests (link: ib in the rack
spec) the tools address each other by LID, the out-of-band exchange and
the RDMA CM run over IPoIB, UD multicast joins its group through the SA,
and seven cases look at the subnet with infiniband-diags and iputils:
ibstat, sminfo, ibnetdiscover, smpquery, perfquery (counters before and
after traffic), ibping and a ping over IPoIB. When the rack spec gives the
server guest gpus:, three GPU cases end the run on it: hicart_smi
(hicart-smi --json against the spec's gpu_ids and memory), hicart_test
(its TAP on every GPU) and hicart_bandwidth (H2D, D2H and D2D against
the host memcpy measured in the same run; the figure is the lowest
ratio, docs/verify.md), then three HiLink cases: hicart_smi_topo (the
topology matrix against the spec's HiLink cabling, and the HiLink
switches' ports), hicart_p2p (hicart-p2p over every pair on the
server's HiLink switch, in both guests at once when the client's GPUs
are there, and hicart_test -p) and hicart_allreduce (f32 and bf16, 4 B
to 256 KiB, 0 wrong elements), the rates against the raw HiLink
ceiling measured on the host in the same run. Unless given, iterations are
sized for TCG guests
(pingpong 500, bandwidth 500, latency 500). When the rack was deployed with
--pcap, a last case checks every RoCEv2 frame of the fabric's captures with
hinic proto decode --check-icrc. --save keeps the raw tool outputs.

Each case reports pass, fail or unsupported with its headline figure:
µs per iteration for the pingpong, MiB/s for bandwidth, operations per
second for ib_atomic_bw, the typical
(median) latency in µs, half the round trip for SEND and WRITE and the whole
round trip for READ, as perftest reports them. The command exits 3 when a
case fails.`

// NewCmdE2E returns the `verify e2e` command; runF replaces the run in tests.
func NewCmdE2E(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Run the end-to-end RDMA gate (embedded rack by default)",
		Long:  long,
		Example: `  hinic verify e2e
  hinic verify e2e --mtu 1024 --bw-iters 5000 --junit gate.xml
  hinic verify e2e -o json | jq '.[] | select(.result != "pass")'
  hinic verify e2e --rack rack0 --save gate-out --junit gate.xml --json gate.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Context = cmd.Context()
			opts.changed = func(name string) bool { return cmd.Flags().Changed(name) }
			if opts.Rack != "" {
				if runF != nil {
					return runF(opts)
				}
				return runRack(opts)
			}
			if !opts.Embedded {
				return cmdutil.UsageErrorf("only the embedded rack can be verified in this version: drop --embedded=false")
			}
			switch opts.Link {
			case "both", "eth", "ib":
			default:
				return cmdutil.UsageErrorf("invalid --link %q: valid values are both, eth, ib", opts.Link)
			}
			switch opts.MTU {
			case 256, 512, 1024, 2048, 4096:
			default:
				return cmdutil.UsageErrorf("invalid --mtu %d: valid values are 256, 512, 1024, 2048, 4096", opts.MTU)
			}
			for name, v := range map[string]int{"pingpong-iters": opts.Cases.PingPongIters, "bw-iters": opts.Cases.BWIters,
				"lat-iters": opts.Cases.LatIters, "bw-size": opts.Cases.BWSize} {
				if v < 1 {
					return cmdutil.UsageErrorf("--%s must be at least 1", name)
				}
			}
			if opts.Cases.BWSize > 1<<20 {
				return cmdutil.UsageErrorf("--bw-size %d: at most 1 MiB", opts.Cases.BWSize)
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Embedded, "embedded", true, "verify the embedded rack (fabric and emulated hosts in this process)")
	fl.IntVar(&opts.MTU, "mtu", 4096, "path MTU of the emulated NICs")
	fl.StringVar(&opts.Link, "link", "both", "embedded racks to verify: `both`, eth (RoCEv2) or ib (native InfiniBand)")
	fl.StringVar(&opts.Pcap, "pcap", "", "write the fabric's per-port captures to `DIR`")
	fl.StringVar(&opts.JUnit, "junit", "", "also write the report as JUnit XML to `FILE`")
	fl.StringVar(&opts.JSON, "json", "", "also write the whole report as JSON to `FILE` (for hinic verify compare)")
	fl.IntVar(&opts.Cases.PingPongIters, "pingpong-iters", 500, "round trips of the pingpong case")
	fl.IntVar(&opts.Cases.BWIters, "bw-iters", 1000, "messages of each bandwidth case")
	fl.IntVar(&opts.Cases.BWSize, "bw-size", 65536, "message size of the bandwidth cases, bytes")
	fl.IntVar(&opts.Cases.LatIters, "lat-iters", 1000, "round trips of each latency case")
	fl.StringVar(&opts.Rack, "rack", "", "verify this deployed QEMU rack over SSH: a `NAME`, run directory or spec file")
	fl.StringVar(&opts.Server, "server", "", "server guest of the SSH gate (default: the rack's first)")
	fl.StringVar(&opts.Client, "client", "", "client guest of the SSH gate (default: the rack's second)")
	fl.StringVar(&opts.Save, "save", "", "keep the raw tool outputs of the SSH gate in `DIR`")
	fl.DurationVar(&opts.CaseTimeout, "case-timeout", 180*time.Second, "bound on each tool run of the SSH gate")
	fl.StringArrayVar(&opts.Only, "case", nil, "run only this `CASE` of the SSH gate (repeatable)")
	fl.StringVar(&opts.Hinic, "hinic", "", "hinic binary for the capture check (default: this one)")
	_ = fl.MarkHidden("hinic")
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
	if opts.Pcap != "" {
		if err := os.MkdirAll(opts.Pcap, 0o755); err != nil {
			return err
		}
	}
	progress := func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }
	var rep *verify.Report
	if opts.Link != "ib" {
		r, err := rack.Start(ctx, rack.Config{Hosts: 3, MTU: opts.MTU, Pcap: opts.Pcap})
		if err != nil {
			return err
		}
		rep = verify.Run(ctx, "embedded", verify.EmbeddedCases(r, opts.Cases), progress)
		if err := r.Close(); err != nil {
			return fmt.Errorf("closing the rack: %w", err)
		}
	}
	if opts.Link != "eth" {
		pcap := opts.Pcap
		if pcap != "" && opts.Link == "both" {
			// The IB run's captures (LINKTYPE_INFINIBAND) go beside the
			// RoCE ones.
			pcap = filepath.Join(pcap, "ib")
			if err := os.MkdirAll(pcap, 0o755); err != nil {
				return err
			}
		}
		progress("starting the InfiniBand rack (subnet manager on host1) ...")
		r, err := rack.Start(ctx, rack.Config{Hosts: 3, MTU: opts.MTU, Pcap: pcap, LinkLayer: rack.LinkIB})
		if err != nil {
			return err
		}
		ib := verify.Run(ctx, "embedded-ib", verify.EmbeddedIBCases(r, opts.Cases), progress)
		if err := r.Close(); err != nil {
			return fmt.Errorf("closing the InfiniBand rack: %w", err)
		}
		if rep == nil {
			rep = ib
		} else {
			rep.Cases = append(rep.Cases, ib.Cases...)
			rep.Duration += ib.Duration
		}
	}
	return report(opts, printer, rep, fmt.Sprintf("the embedded rack (MTU %s, link %s)", strconv.Itoa(opts.MTU), opts.Link))
}

// report writes the report in the chosen format (and as JUnit) and turns
// failures into exit code 3.
// cpuTable prints, for a run that metered the rack's processes, each
// case's host CPU time, split by process, and its CPU seconds per GiB
// moved.
func cpuTable(opts *Options, printer *cmdutil.Printer, rep *verify.Report) error {
	metered := false
	for _, c := range rep.Cases {
		metered = metered || c.CPU != nil
	}
	if !metered {
		return nil
	}
	fmt.Fprintln(opts.IO.Out)
	w := printer.Records("CASE", "MOVED", "HOST CPU", "CPU/GIB", "BY PROCESS (S/GIB, ELSE S)")
	for _, c := range rep.Cases {
		if c.CPU == nil {
			continue
		}
		moved, perGiB := "", ""
		by := c.CPU
		if c.Bytes > 0 {
			moved = verify.FormatFigure(float64(c.Bytes)/(1<<20), "MiB")
			perGiB = verify.FormatFigure(c.CPUPerGiB, "s")
			by = c.CPUPerGiBBy
		}
		names := make([]string, 0, len(by))
		for n := range by {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + " " + strconv.FormatFloat(by[n], 'g', 3, 64)
		}
		if err := w.Write(c, c.Case, moved, verify.FormatFigure(c.CPUTotal(), "s"), perGiB, strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	return w.Close()
}

func report(opts *Options, printer *cmdutil.Printer, rep *verify.Report, target string) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.JUnit != "" {
		f, err := os.Create(opts.JUnit)
		if err != nil {
			return err
		}
		werr := rep.WriteJUnit(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return werr
		}
	}
	if opts.JSON != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(opts.JSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if printer.Format() == cmdutil.FormatJSON {
		if err := printer.Object(rep.Cases); err != nil {
			return err
		}
	} else {
		w := printer.Records("CASE", "RESULT", "FIGURE", "DETAIL")
		for _, c := range rep.Cases {
			if err := w.Write(c, c.Case, string(c.Result), verify.FormatFigure(c.Figure, c.Unit), c.Detail); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := cpuTable(opts, printer, rep); err != nil {
			return err
		}
	}
	pass, fail, unsup := rep.Counts()
	fmt.Fprintf(opts.IO.ErrOut, "gate: %d pass, %d fail, %d unsupported on %s in %.1f s\n",
		pass, fail, unsup, target, rep.Duration)
	if rep.Failed() {
		return cmdutil.VerifyErrorf("%d of %d cases failed", fail, len(rep.Cases))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}
