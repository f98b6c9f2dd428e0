// Package serve implements `hinic link serve`: it runs the HiLink switch
// until interrupted.
package serve

import (
	"context"
	"log/slog"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/link/shared"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/metrics"
	"github.com/PacketFive/hinic/internal/rundir"
)

// Setting keys (the link section of hinic.yaml). The run directory's,
// bound by the noun and shared with status, is shared.KeyRunDir.
const (
	KeyPorts    = "link.ports"
	KeyCredits  = "link.credits"
	KeyMaxFrame = "link.max-frame"
	KeyIOBatch  = "link.io-batch"
	KeyPcap     = "link.pcap"
	KeyPcapMax  = "link.pcap-max"
	KeyPprof    = "link.pprof"
	KeyMetrics  = "link.metrics"
)

// Options are the settings of one `hinic link serve` run.
type Options struct {
	IO     *cmdutil.IOStreams
	Logger *slog.Logger
	// Switch is the switch to serve, from the settings.
	Switch hilink.Config
	// Pprof, if set, is where Go's profiles are served (--pprof).
	Pprof string
	// Metrics, if set, is where the Prometheus endpoint listens
	// (--metrics); MetricsReady, if set, gets its URL (tests).
	Metrics      string
	MetricsReady func(url string)
	// Ready, if set, is called once every socket listens (tests).
	Ready func(*hilink.Switch)
}

const long = `Run the HiLink switch: the GPU peer fabric of a rack, which carries only
HiGPU-to-HiGPU traffic (remote writes and reads into a peer GPU's memory).

Every port is a UNIX SOCK_SEQPACKET socket in the run directory, mode
0660: hilink-port<N>.sock for N from 0, one frame per message, opened by a
hello that names the GPU ids behind the port (docs/hilink-wire.md). A GPU
id behind two ports is refused. Frames go by destination GPU id; one to an
unknown GPU is dropped and counted.

The fabric is lossless and in order per source and destination: credits
count frames; the switch grants each port's peer --credits frames, never
holds more than that of one port, and sends to a peer only against the
credits the peer granted. hilink.sock answers hinic link status.

With --pcap DIR each port writes DIR/hilink-port<N>.pcap (mode 0600, in a
0700 directory) with every message it receives and sends, HiLink header
first, link type 148 (USER1); it rotates at --pcap-max.

Settings come from flags, HINIC_LINK_* variables, the link section of the
config file, then defaults. The command runs until SIGINT or SIGTERM, then
closes every socket and removes the socket files.`

const example = `  hinic link serve
  hinic link serve --run-dir /tmp/rack1 --ports 8 --credits 128
  hinic link serve --run-dir /tmp/rack1 --pcap /tmp/rack1/pcap --pcap-max 64MiB
  HINIC_LINK_MAX_FRAME=16408 hinic link serve --run-dir /tmp/rack1`

// NewCmdServe returns the `link serve` command. runF replaces the work
// in tests; nil runs it.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	cmd := cmdutil.NewCmd(f, &cobra.Command{
		Use:     "serve",
		Short:   "Run the HiLink switch until interrupted",
		Long:    long,
		Example: example,
	}, opts, func(v *viper.Viper) error {
		c, err := LoadConfig(v)
		if err != nil {
			return err
		}
		opts.Switch = c
		opts.Pprof = v.GetString(KeyPprof)
		opts.Metrics = v.GetString(KeyMetrics)
		opts.Logger = f.Logger()
		return nil
	}, runF, Run)
	cmd.Flags().Int("ports", hilink.DefaultPorts, "ports of the switch, numbered from 0")
	cmd.Flags().Int("credits", hilink.DefaultCredits, "frames granted to each port's peer: the most the switch holds of one port")
	cmd.Flags().Int("max-frame", hilink.DefaultMaxFrame, "largest frame in `BYTES`, the 24-byte header included")
	cmd.Flags().Int("io-batch", hilink.DefaultIOBatch, "frames per recvmmsg/sendmmsg (1: no batching)")
	cmd.Flags().String("pcap", "", "write one capture per port into `DIR` (hilink-port<N>.pcap, link type 148)")
	cmd.Flags().String("pcap-max", "256MiB", "rotate a port's capture at `SIZE` (the full file becomes .pcap.1)")
	cmd.Flags().String("pprof", "", cmdutil.PprofHelp)
	cmd.Flags().String("metrics", "", cmdutil.MetricsHelp)
	for key, flag := range map[string]string{KeyPorts: "ports", KeyCredits: "credits", KeyMaxFrame: "max-frame",
		KeyIOBatch: "io-batch", KeyPcap: "pcap", KeyPcapMax: "pcap-max", KeyPprof: "pprof", KeyMetrics: "metrics"} {
		f.BindFlag(key, cmd.Flags().Lookup(flag))
	}
	return cmd
}

// LoadConfig reads the link section of the settings. Unknown keys are an
// error, so that a misspelt setting does not pass unnoticed.
func LoadConfig(v *viper.Viper) (hilink.Config, error) {
	var all struct {
		hilink.Config `mapstructure:",squash"`
		PcapMax       string `mapstructure:"pcap-max"`
		Pprof         string `mapstructure:"pprof"`
		Metrics       string `mapstructure:"metrics"`
	}
	strict := func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }
	if v.IsSet("link") {
		if err := v.UnmarshalKey("link", &all, strict); err != nil {
			return all.Config, cmdutil.UsageErrorf("link settings: %v (hinic link serve --help lists them)", err)
		}
	}
	c := hilink.Config{RunDir: rundir.Dir(v.GetString(shared.KeyRunDir)), Ports: v.GetInt(KeyPorts), Credits: v.GetInt(KeyCredits),
		MaxFrame: v.GetInt(KeyMaxFrame), IOBatch: v.GetInt(KeyIOBatch), Pcap: v.GetString(KeyPcap)}
	s := v.GetString(KeyPcapMax)
	n, err := cmdutil.ParseSize(s)
	if err != nil || n > 1<<40 {
		return c, cmdutil.UsageErrorf("--pcap-max %q: want a size such as 64MiB", s)
	}
	c.PcapMax = int64(n)
	return c, nil
}

// Run serves the switch until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	cfg := opts.Switch
	cfg.Logger = opts.Logger
	sw, err := hilink.New(cfg)
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	ms, err := metrics.Start(opts.Metrics, opts.Logger)
	if err != nil {
		return cmdutil.UsageErrorf("--metrics %q: %v", opts.Metrics, err)
	}
	defer ms.Close()
	return cmdutil.Serve(ctx, opts.Pprof, opts.Logger, func() (func() error, error) {
		if err := sw.Start(); err != nil {
			return nil, err
		}
		c := sw.Config()
		opts.Logger.Info("HiLink serving", "ports", c.Ports, "credits", c.Credits, "max_frame", c.MaxFrame,
			"run_dir", c.RunDir, "status", "hinic link status --run-dir "+c.RunDir)
		if err := ms.Register(metrics.Link(sw.Status)); err != nil {
			sw.Close()
			return nil, err
		}
		if opts.MetricsReady != nil {
			opts.MetricsReady(ms.URL())
		}
		if opts.Ready != nil {
			opts.Ready(sw)
		}
		return sw.Close, nil
	})
}
