// Package serve implements `hinic device serve`: it runs the device
// backend (one or more vNICs) until interrupted.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/device/shared"
	fabricshared "github.com/PacketFive/hinic/internal/cli/fabric/shared"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/metrics"
)

// Setting keys.
const (
	KeyVNICs     = "device.vnics"
	KeyMemBudget = "device.mem_budget"
	KeyPprof     = "device.pprof"
	KeyFabric    = "device.fabric"
	KeyMetrics   = "device.metrics"
)

// Options are the settings of one `hinic device serve` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Logger  *slog.Logger
	Control string
	VNICs   []device.VNICConfig
	// Pprof, if set, is where Go's profiles are served (--pprof).
	Pprof string
	// Fabric, if set, is a fabric to serve in this process too
	// (--fabric), started before the vNICs dial its ports.
	Fabric *fabric.Config
	// Metrics, if set, is where the Prometheus endpoint listens
	// (--metrics); MetricsReady, if set, gets its URL (tests).
	Metrics      string
	MetricsReady func(url string)
	// Ready, if set, is called once every socket listens (tests).
	Ready func(*device.Server)
}

const long = `Run the HiNIC device backend: the "hardware" of emulated RDMA NICs that
stock QEMU guests drive through the ivshmem-doorbell PCI device.

Each --vnic is one NIC. The backend creates (or opens) the guest RAM file,
listens on the ivshmem socket and attaches to a HiSwitch port before it
returns to serving; start it before QEMU, which reads the ivshmem setup
synchronously at start-up. QEMU then needs, for that vNIC:

  -machine <pc|q35>,memory-backend=ram0 -m <ram-size>
  -object memory-backend-file,id=ram0,size=<ram-size>,mem-path=<ram>,share=on
  -chardev socket,path=<socket>,id=ivs0
  -device ivshmem-doorbell,chardev=ivs0,vectors=<vectors>

A --vnic value is a comma-separated list of key=value:
  socket=PATH     ivshmem server socket (required)
  ram=PATH        guest RAM file, the memory-backend-file mem-path (required)
  ram-size=SIZE   guest RAM, equal to QEMU's -m: bytes or with K, M, G (required)
  machine=TYPE    pc or q35 (default q35): where RAM sits below and above 4 GiB
  port=PATH       HiSwitch port socket (hinic fabric serve); none leaves the link down
  transport=KIND  how frames cross that port: shm (default) offers the switch a
                  shared-memory ring pair and keeps the socket when it declines;
                  socket sends one SOCK_SEQPACKET message per frame
  mac=MAC         the NIC's MAC (required)
  ip=A.B.C.D      IPv4 address for the RoCEv2 GID ::ffff:A.B.C.D; repeat with ip=
                  (Ethernet only; the guest driver may also set them)
  node-guid=HEX   node GUID (default EUI-64 of the MAC)
  port-guid=HEX   port GUID (default the node GUID)
  link=eth|ib     link layer: eth (RoCEv2, default) or ib (native InfiniBand: the
                  port must be a HiSwitch port with link: ib, and stays in Init
                  until a subnet manager gives it a LID)
  vectors=N       ivshmem vectors, same as QEMU's vectors= (default 8, at least 3)
  shm-size=SIZE   BAR2 size, a power of two of at least 1M (default 1M)
  mtu=N           path MTU limit in bytes: 256..4096 (default 1024; 4096 with
                  link=ib, which PortInfo MTUCap then advertises)
  mem-budget=SIZE host memory the guest's verbs objects may hold (MR page
                  lists, QP, SRQ and CQ rings at full size, AHs); past it
                  creating one fails with ENOMEM (default --mem-budget)
  trust-pause=BOOL let the guest's PAUSE and PFC frames out (default false:
                  dropped and counted, as frames with another source MAC)
  allow-ip=ADDR   an IPv4 or IPv6 address or prefix (10.42.0.1, fd00::/64) the
                  guest may use; repeat with allow-ip=. With any, SET_ADDR with
                  another address fails (EACCES) and frames whose IPv4, ARP or
                  IPv6 source is another are dropped; the link-local address of
                  mac is always allowed, and every ip= must be among them
                  (default none: any address)
  name=NAME       display name (default the socket path)

With --fabric the process also runs HiSwitch, from the fabric section of
the settings (the file hinic fabric serve reads with --config): port= may
then name its ports, and a frame from one vNIC to another crosses the
switch on the thread that sent it, with no thread switch between two
processes. hinic deploy rack runs its hicain racks this way.

The BAR2 layout and the protocol are in docs/device-abi.md; kernel/hicain_abi.h
is its C header. hinic device status reads the control socket.

The command runs until SIGINT or SIGTERM.`

const example = `  hinic device serve --vnic socket=/run/hinic/vm-a.ivshmem,ram=/dev/shm/vm-a.ram,ram-size=4G,machine=q35,port=/run/hinic/sw0-port1.sock,mac=02:48:4e:00:00:01,ip=10.42.0.1
  hinic device serve --vnic socket=/tmp/a.sock,ram=/dev/shm/a.ram,ram-size=1G,machine=pc,mac=02:00:00:00:00:0a \
                     --vnic socket=/tmp/b.sock,ram=/dev/shm/b.ram,ram-size=1G,machine=pc,mac=02:00:00:00:00:0b`

// NewCmdServe returns the `device serve` command. runF replaces the work
// in tests; nil runs it.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	cmd := cmdutil.NewCmd(f, &cobra.Command{
		Use:     "serve",
		Short:   "Run the emulated NIC backend for QEMU guests until interrupted",
		Long:    long,
		Example: example,
	}, opts, func(v *viper.Viper) error {
		specs := v.GetStringSlice(KeyVNICs)
		if len(specs) == 0 {
			return cmdutil.UsageErrorf("no vNIC: give at least one --vnic socket=...,ram=...,ram-size=...,mac=...")
		}
		budget := uint64(device.DefaultMemBudget)
		if b := v.GetString(KeyMemBudget); b != "" {
			var err error
			if budget, err = ParseSize(b); err != nil {
				return cmdutil.UsageErrorf("--mem-budget: %v", err)
			}
		}
		vnics, err := cmdutil.ParseSpecs("--vnic", specs, ParseVNIC)
		if err != nil {
			return err
		}
		for i := range vnics {
			if vnics[i].MemBudget == 0 {
				vnics[i].MemBudget = budget
			}
		}
		opts.VNICs = vnics
		opts.Control = shared.ControlPath(v.GetString(shared.KeyControl))
		opts.Pprof = v.GetString(KeyPprof)
		opts.Metrics = v.GetString(KeyMetrics)
		opts.Logger = f.Logger()
		if v.GetBool(KeyFabric) {
			if !v.IsSet("fabric") {
				return cmdutil.UsageErrorf("--fabric: the settings have no fabric section; give --config FILE with one (docs/fabric.md)")
			}
			fc, err := fabricshared.LoadConfig(v)
			if err != nil {
				return err
			}
			opts.Fabric = &fc
		}
		return nil
	}, runF, Run)
	cmd.Flags().StringArray("vnic", nil, "a vNIC as `key=value,...` (see above); repeat for several")
	cmd.Flags().String("pprof", "", cmdutil.PprofHelp)
	f.BindFlag(KeyVNICs, cmd.Flags().Lookup("vnic"))
	f.BindFlag(KeyPprof, cmd.Flags().Lookup("pprof"))
	cmd.Flags().String("metrics", "", cmdutil.MetricsHelp)
	f.BindFlag(KeyMetrics, cmd.Flags().Lookup("metrics"))
	cmd.Flags().String("mem-budget", "1G", "host memory each guest's verbs objects may hold, bytes or with K, M, G (a vNIC's mem-budget= overrides it)")
	f.BindFlag(KeyMemBudget, cmd.Flags().Lookup("mem-budget"))
	cmd.Flags().Bool("fabric", false, "also run HiSwitch in this process, from the fabric section of the settings (--config), as hinic fabric serve does")
	f.BindFlag(KeyFabric, cmd.Flags().Lookup("fabric"))
	return cmd
}

// Run serves until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	ms, err := metrics.Start(opts.Metrics, opts.Logger)
	if err != nil {
		return cmdutil.UsageErrorf("--metrics %q: %v", opts.Metrics, err)
	}
	defer ms.Close()
	return cmdutil.Serve(ctx, opts.Pprof, opts.Logger, func() (func() error, error) {
		fab, err := startFabric(opts)
		if err != nil {
			return nil, err
		}
		srv, err := device.Start(ctx, device.Config{VNICs: opts.VNICs, Logger: opts.Logger, Control: opts.Control})
		if err != nil {
			fabricshared.Close(fab)
			return nil, err
		}
		for _, v := range srv.VNICs() {
			c := v.Config()
			opts.Logger.Info("vNIC serving", "name", c.Name, "ivshmem", c.Socket, "ram", c.RAMPath,
				"machine", c.Machine, "fabric_port", c.FabricPort, "fabric_transport", v.FabricTransport())
		}
		opts.Logger.Info("device backend serving", "vnics", len(opts.VNICs), "status", "hinic device status --control "+opts.Control)
		// With --fabric the one endpoint has the switches' metrics too.
		err = ms.Register(metrics.Device(srv.Status))
		if err == nil && fab != nil {
			err = ms.Register(metrics.Fabric(fab.Status))
		}
		if err != nil {
			srv.Close()
			fabricshared.Close(fab)
			return nil, err
		}
		if opts.MetricsReady != nil {
			opts.MetricsReady(ms.URL())
		}
		if opts.Ready != nil {
			opts.Ready(srv)
		}
		return func() error {
			err := srv.Close()
			return errors.Join(err, fabricshared.Close(fab))
		}, nil
	})
}

// startFabric starts the fabric of --fabric, if any. In one process
// with the backend, a frame from one vNIC crosses the switch to another
// on the thread that sent it: each end of a port socket is a goroutine
// of the same scheduler, where two processes need a thread switch per
// hop (docs/device.md).
func startFabric(opts *Options) (*fabric.Fabric, error) {
	if opts.Fabric == nil {
		return nil, nil
	}
	cfg := *opts.Fabric
	cfg.Logger = opts.Logger
	fab, err := fabric.New(cfg)
	if err != nil {
		return nil, &cmdutil.UsageError{Err: err}
	}
	if err := fabricshared.Start(fab, opts.Logger); err != nil {
		return nil, err
	}
	return fab, nil
}

// ParseVNIC parses one --vnic value.
func ParseVNIC(spec string) (device.VNICConfig, error) {
	var c device.VNICConfig
	guest := cmdutil.GuestSpec{Socket: &c.Socket, RAMPath: &c.RAMPath, RAMSize: &c.RAMSize, Machine: &c.Machine}
	keys := guest.Keys(cmdutil.SpecKeys{
		"port":      cmdutil.StringKey(&c.FabricPort),
		"transport": cmdutil.StringKey(&c.FabricTransport),
		"mac": func(_, val string) error {
			hw, err := net.ParseMAC(val)
			if err == nil && len(hw) != 6 {
				err = fmt.Errorf("MAC %q: want 6 bytes", val)
			}
			copy(c.MAC[:], hw)
			return err
		},
		"ip": func(_, val string) error {
			a, err := netip.ParseAddr(val)
			if err == nil && !a.Is4() {
				err = fmt.Errorf("ip %q: want IPv4", val)
			}
			c.IPv4 = append(c.IPv4, a)
			return err
		},
		"node-guid":   guidKey(&c.NodeGUID),
		"port-guid":   guidKey(&c.PortGUID),
		"link":        cmdutil.StringKey(&c.LinkLayer),
		"vectors":     cmdutil.IntKey(&c.Vectors),
		"shm-size":    cmdutil.SizeKey(&c.ShmSize),
		"mtu":         cmdutil.IntKey(&c.MTU),
		"mem-budget":  cmdutil.SizeKey(&c.MemBudget),
		"trust-pause": cmdutil.BoolKey(&c.TrustPause),
		"allow-ip": func(_, val string) error {
			p, err := device.ParseAllowedIP(val)
			if err != nil {
				return fmt.Errorf("allow-ip: %w", err)
			}
			c.AllowedIPs = append(c.AllowedIPs, p)
			return nil
		},
		"name": cmdutil.StringKey(&c.Name),
	})
	if err := cmdutil.ParseSpec(spec, keys); err != nil {
		return c, err
	}
	if err := guest.Check(); err != nil {
		return c, err
	}
	if c.MAC == [6]byte{} {
		return c, fmt.Errorf("mac= is required")
	}
	return c, nil
}

func guidKey(p *uint64) func(key, val string) error {
	return func(_, val string) (err error) {
		val = strings.ReplaceAll(strings.TrimPrefix(val, "0x"), ":", "")
		*p, err = strconv.ParseUint(val, 16, 64)
		return err
	}
}

// ParseSize parses bytes with an optional K, M or G suffix (binary).
func ParseSize(s string) (uint64, error) { return cmdutil.ParseSize(s) }
