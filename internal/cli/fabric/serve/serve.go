// Package serve implements `hinic fabric serve`: it runs the switches of
// the fabric config until interrupted.
package serve

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/fabric/shared"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/metrics"
)

// Options are the settings of one `hinic fabric serve` run.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	// Fabric is the fabric to serve, from the config file and flags.
	Fabric fabric.Config
	// Pprof, if set, is where Go's profiles are served (--pprof).
	Pprof string
	// Metrics, if set, is where the Prometheus endpoint listens
	// (--metrics); MetricsReady, if set, gets its URL (tests).
	Metrics      string
	MetricsReady func(url string)
	// Ready, if set, is called once the sockets are open (tests).
	Ready func(*fabric.Fabric)
}

const long = `Run HiSwitch: the emulated top-of-rack switches that emulated NICs
(hinic device serve) and stock QEMU guests attach to.

Every port is a UNIX socket in the run directory, mode 0660:
<switch>-port<N>.sock, SOCK_SEQPACKET with the HiNIC hello
(docs/fabric-wire.md), or SOCK_STREAM in QEMU's -netdev stream framing
for ports of kind qemu-stream. control.sock answers hinic fabric status.

Without a config file there is one switch, sw0, with --ports Ethernet
ports. The fabric section of the config file (--config, or hinic.yaml)
describes switches, port kinds and link layers, VLANs, QoS (PCP/DSCP to
traffic class, strict and ETS scheduling), PFC, ECN, static FDB entries,
fault injection and the links between switches: see docs/fabric.md.

The command runs until SIGINT or SIGTERM, then closes every socket and
removes the socket files.`

const example = `  hinic fabric serve
  hinic fabric serve --ports 4 --run-dir /tmp/rack1 --pcap /tmp/rack1/pcap
  hinic fabric serve --config testdata/fabric/two-racks.yaml
  qemu-system-x86_64 ... -netdev stream,id=n0,server=off,addr.type=unix,addr.path=/run/hinic/sw0-port3.sock`

// NewCmdServe returns the `fabric serve` command. runF replaces the work
// in tests; nil runs it.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	cmd := cmdutil.NewCmd(f, &cobra.Command{
		Use:     "serve",
		Short:   "Run HiSwitch until interrupted",
		Long:    long,
		Example: example,
	}, opts, func(v *viper.Viper) error {
		fc, err := shared.LoadConfig(v)
		if err != nil {
			return err
		}
		opts.Fabric = fc
		opts.Pprof = v.GetString(shared.KeyPprof)
		opts.Metrics = v.GetString(shared.KeyMetrics)
		opts.Logger = f.Logger()
		return nil
	}, runF, Run)
	cmd.Flags().Int("ports", fabric.DefaultPorts, "ports of each switch that does not set its own")
	cmd.Flags().String("pcap", "", "write one capture per port into `DIR`")
	cmd.Flags().String("pcap-max", fabric.DefaultPcapMax.String(), "rotate a port's capture at `SIZE` (the full file becomes .pcap.1)")
	f.BindFlag(shared.KeyPorts, cmd.Flags().Lookup("ports"))
	f.BindFlag(shared.KeyPcap, cmd.Flags().Lookup("pcap"))
	cmd.Flags().String("pprof", "", cmdutil.PprofHelp)
	f.BindFlag(shared.KeyPcapMax, cmd.Flags().Lookup("pcap-max"))
	f.BindFlag(shared.KeyPprof, cmd.Flags().Lookup("pprof"))
	cmd.Flags().String("metrics", "", cmdutil.MetricsHelp)
	f.BindFlag(shared.KeyMetrics, cmd.Flags().Lookup("metrics"))
	return cmd
}

// Run serves the fabric until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	cfg := opts.Fabric
	cfg.Logger = opts.Logger
	fab, err := fabric.New(cfg)
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	ms, err := metrics.Start(opts.Metrics, opts.Logger)
	if err != nil {
		return cmdutil.UsageErrorf("--metrics %q: %v", opts.Metrics, err)
	}
	defer ms.Close()
	return cmdutil.Serve(ctx, opts.Pprof, opts.Logger, func() (func() error, error) {
		if err := shared.Start(fab, opts.Logger); err != nil {
			return nil, err
		}
		if err := ms.Register(metrics.Fabric(fab.Status)); err != nil {
			fab.Close()
			return nil, err
		}
		if opts.MetricsReady != nil {
			opts.MetricsReady(ms.URL())
		}
		if opts.Ready != nil {
			opts.Ready(fab)
		}
		return func() error { return shared.Close(fab) }, nil
	})
}
