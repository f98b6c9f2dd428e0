// Package serve implements `hinic fabric serve`: it runs the switches of
// the fabric config until interrupted.
package serve

import (
	"context"
	"errors"
	"log/slog"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/metrics"
)

// Setting keys (docs/fabric.md has the whole schema under "fabric").
// KeyRunDir is bound to the --run-dir flag of the fabric noun, which
// serve and status share.
const (
	KeyRunDir  = "fabric.run-dir"
	KeyPorts   = "fabric.ports"
	KeyPcap    = "fabric.pcap"
	KeyPcapMax = "fabric.pcap-max"
	KeyPprof   = "fabric.pprof"
	KeyMetrics = "fabric.metrics"
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
		fc, err := LoadConfig(v)
		if err != nil {
			return err
		}
		opts.Fabric = fc
		opts.Pprof = v.GetString(KeyPprof)
		opts.Metrics = v.GetString(KeyMetrics)
		opts.Logger = f.Logger()
		return nil
	}, runF, Run)
	cmd.Flags().Int("ports", fabric.DefaultPorts, "ports of each switch that does not set its own")
	cmd.Flags().String("pcap", "", "write one capture per port into `DIR`")
	cmd.Flags().String("pcap-max", fabric.DefaultPcapMax.String(), "rotate a port's capture at `SIZE` (the full file becomes .pcap.1)")
	f.BindFlag(KeyPorts, cmd.Flags().Lookup("ports"))
	f.BindFlag(KeyPcap, cmd.Flags().Lookup("pcap"))
	cmd.Flags().String("pprof", "", cmdutil.PprofHelp)
	f.BindFlag(KeyPcapMax, cmd.Flags().Lookup("pcap-max"))
	f.BindFlag(KeyPprof, cmd.Flags().Lookup("pprof"))
	cmd.Flags().String("metrics", "", cmdutil.MetricsHelp)
	f.BindFlag(KeyMetrics, cmd.Flags().Lookup("metrics"))
	return cmd
}

// LoadConfig reads the fabric section of the settings. Unknown keys are
// an error, so that a misspelt setting does not pass unnoticed.
func LoadConfig(v *viper.Viper) (fabric.Config, error) {
	// The settings of the fabric section that are the command's, not
	// the fabric's, beside the fabric's own.
	var all struct {
		fabric.Config `mapstructure:",squash"`
		Pprof         string `mapstructure:"pprof"`
		Metrics       string `mapstructure:"metrics"`
	}
	hook := viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.TextUnmarshallerHookFunc(),
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	))
	strict := func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }
	if v.IsSet("fabric") {
		if err := v.UnmarshalKey("fabric", &all, hook, strict); err != nil {
			return all.Config, cmdutil.UsageErrorf("fabric settings: %v (docs/fabric.md lists them)", err)
		}
	}
	c := all.Config
	c.RunDir = v.GetString(KeyRunDir)
	c.Ports = v.GetInt(KeyPorts)
	c.Pcap = v.GetString(KeyPcap)
	// Flag, environment, file, default: the flag's default is the
	// package default, so this always holds a value.
	if s := v.GetString(KeyPcapMax); s != "" {
		if err := c.PcapMax.UnmarshalText([]byte(s)); err != nil {
			return c, cmdutil.UsageErrorf("--pcap-max %q: %v", s, err)
		}
	}
	return c, nil
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
		if err := Start(fab, opts.Logger); err != nil {
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
		return func() error { return Close(fab) }, nil
	})
}

// Start starts fab's switches and logs where they serve: the run of
// `hinic fabric serve`, and of `hinic device serve --fabric`.
func Start(fab *fabric.Fabric, log *slog.Logger) error {
	if err := fab.Start(); err != nil {
		return err
	}
	ports := 0
	for _, sw := range fab.Switches() {
		ports += sw.NumPorts()
	}
	// Through the logger: port goroutines log to the same stream and
	// the handler serializes the writes.
	log.Info("HiSwitch serving", "switches", len(fab.Switches()), "ports", ports,
		"run_dir", fab.RunDir(), "status", "hinic fabric status --run-dir "+fab.RunDir())
	return nil
}

// Close closes fab (nil: nothing); a fabric already closed is no error.
func Close(fab *fabric.Fabric) error {
	if fab == nil {
		return nil
	}
	if err := fab.Close(); err != nil && !errors.Is(err, fabric.ErrClosed) {
		return err
	}
	return nil
}
