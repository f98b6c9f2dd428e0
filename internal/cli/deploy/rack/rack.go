// Package rack implements `hinic deploy rack`.
package rack

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/shared"
	"github.com/PacketFive/hinic/internal/deploy"
)

// Options are the settings of one deploy.
type Options struct {
	IO      *cmdutil.IOStreams
	Printer func() (*cmdutil.Printer, error)
	Context context.Context

	Spec   string
	Name   string
	RunDir string
	Image  string
	Pcap   bool
	Hinic  string
	Host   string
}

const long = `Deploy a QEMU rack from a rack spec (YAML; see docs/deploy.md,
testdata/racks/two-rxe.yaml and two-hicain.yaml). Without SPEC, the
canonical two-VM rack: vm-a and vm-b on switch sw0, Soft-RoCE (rxe) NICs,
data network 10.42.0.0/24, SSH on 127.0.0.1:2222 and 2223.

It starts the HiSwitch fabric (hinic fabric serve) with one port per
guest: a qemu-stream port for an rxe guest, a seqpacket port for a hicain
guest. With hicain guests it then starts one HiNIC device backend (hinic
device serve, one vNIC per hicain guest on its switch port) and, with
guests that have gpus:, one HiGPU backend (hinic gpu serve, one GPU per
GPU of every guest, on the guest's RAM file). Then the
guests (accel: auto is KVM only when the KVM probe boots the image's
kernel under KVM, else TCG; see hinic doctor) booted from the image directly
(-kernel/-initrd) on a copy-on-write overlay: an rxe guest's data NIC is a
virtio-net NIC, a hicain guest's the ivshmem-doorbell function of its vNIC
with its RAM in GUEST/ram; each GPU is one more ivshmem-doorbell
function (a guest with GPUs has its RAM in GUEST/ram whatever its NIC).
It waits for SSH (host keys pinned on first
contact, the key passed as a systemd credential), copies files and
installs packages, and brings up the data NIC with its static address:
rxe: rdma link add rxe0 type rxe netdev NIC; hicain: modprobe hicain_net,
the address on its netdev, then modprobe hicain_ib (the image, or the
guest's debs, must hold the hicain-modules and libhicain packages of
hinic pkg build); with GPUs, modprobe higpu and /dev/higpuN for each GPU
(libhicart1 and hicart-tools are needed too).

A spec with hosts: spans machines (docs/deploy.md, "Across hosts"): each
host's part (its switches, backends and guests) is deployed as a rack of
its own in RUN-DIR/HOST, a link between two hosts' switches is a VXLAN
link between their addresses, and guests' SSH forwards listen on their
host's address. Hosts that are network namespaces of this machine
(netns:) are all deployed here, each in its namespace; a host with
ssh: [USER@]HOST[:PORT] is another machine, whose part deploy rack
deploys there by running that machine's hinic over ssh (batch mode;
HINIC_SSH replaces the ssh command); or each machine deploys its own
part with --host NAME.

Every step is idempotent: running it again keeps what runs and redoes the
rest. The state, logs (fabric.log, device.log, gpu.log, GUEST/console.log,
GUEST/qemu.log), the SSH key and known_hosts live in the run directory.
Stop everything with hinic deploy down.`

// NewCmdRack returns the `deploy rack` command; runF replaces the run in tests.
func NewCmdRack(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "rack [SPEC]",
		Short: "Start a rack: fabric, QEMU guests, SSH, RDMA NICs",
		Long:  long,
		Example: `  hinic deploy rack
  hinic deploy rack testdata/racks/two-rxe.yaml --pcap
  hinic deploy rack testdata/racks/two-hicain.yaml --image .cache/images/hinic-hicain
  sudo hinic deploy rack testdata/racks/two-hosts-netns.yaml --image .cache/images/hinic-hicain
  hinic deploy rack rack.yaml               # hosts with ssh: deployed over SSH from here
  hinic deploy rack rack.yaml --host b      # on machine b: its part of a rack across machines
  hinic deploy status && hinic verify e2e --rack rack0 && hinic deploy down`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Context = cmd.Context()
			if len(args) == 1 {
				opts.Spec = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Name, "name", "", "rack name (overrides the spec's; default rack0)")
	fl.StringVar(&opts.RunDir, "run-dir", "", "run directory (default /tmp/hinic-rack-NAME)")
	fl.StringVar(&opts.Image, "image", "", "image directory for guests that name none (default .cache/images/hinic-guest)")
	fl.BoolVar(&opts.Pcap, "pcap", false, "capture every fabric port to RUN-DIR/pcap")
	fl.StringVar(&opts.Host, "host", "", "deploy only this host's part of a rack with hosts, in RUN-DIR/HOST (each machine of a rack across machines deploys its own)")
	fl.StringVar(&opts.Hinic, "hinic", "", "hinic binary that runs the fabric and the device backend (default: this one)")
	_ = fl.MarkHidden("hinic")
	return cmd
}

func run(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := shared.LoadRack(opts.Spec, opts.Name, opts.RunDir, opts.Image, opts.Pcap)
	if err != nil {
		return err
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	start := time.Now()
	progress := func(format string, a ...any) {
		fmt.Fprintf(opts.IO.ErrOut, "[%5.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	st, err := deploy.Up(ctx, r, deploy.UpOptions{Hinic: opts.Hinic, Progress: progress, Host: opts.Host})
	if st != nil {
		if printer.Format() == cmdutil.FormatJSON {
			if perr := printer.Object(st); perr != nil && err == nil {
				err = perr
			}
		} else {
			w := printer.Records("GUEST", "READY", "ACCEL", "SSH", "DATA IP", "NIC", "RDMA", "BOOT S", "ERROR")
			for _, g := range st.Guests {
				_ = w.Write(g, g.Name, fmt.Sprint(g.Ready), g.Accel, g.SSHAddr, g.DataIP, g.DataNIC, g.RDMADev, fmt.Sprintf("%.1f", g.BootSec), g.Error)
			}
			if werr := w.Close(); werr != nil && err == nil {
				err = werr
			}
		}
	}
	runDir := r.RunDir
	if st != nil {
		runDir = st.Rack.RunDir // a host's part: RUN-DIR/HOST
	}
	if err != nil {
		return fmt.Errorf("%w\n(what started keeps running: hinic deploy status --run-dir %s; hinic deploy down --run-dir %s)", err, runDir, runDir)
	}
	fmt.Fprintf(opts.IO.ErrOut, "deploy: rack %s up in %.1f s (run dir %s)\n", r.Name, time.Since(start).Seconds(), runDir)
	return nil
}
